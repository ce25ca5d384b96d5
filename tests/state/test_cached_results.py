"""[cache] with `[state] url`: the result cache is a table of the shared database (schema version
6), so every llmc using it (gateway replicas on many machines) answers from one cache; nothing is
written under the state directory's results/."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cache.test_results import TOKEN, call, calls, write_profile
from tests.helpers import llmc

pytestmark = pytest.mark.e2e  # a real PostgreSQL (and HAProxy)


def test_the_database_holds_the_cache_every_llmc_shares(tmp_path: Path, state_url: str) -> None:
    import psycopg

    from tests.state.postgres import PASSWORD

    write_profile(tmp_path)
    call("count.search", "query=a", f"token={TOKEN}")
    assert call("count.search", "query=a", f"token={TOKEN}")["cached"] is True
    assert "cached" not in call("count.search", "query=b", f"token={TOKEN}")
    assert len(calls(tmp_path)) == 2
    assert not (Path(os.environ["LLMC_STATE_DIR"]) / "results").exists()
    with psycopg.connect(state_url, password=PASSWORD) as conn:
        rows = conn.execute("SELECT key, server, result FROM llmc_result_cache").fetchall()
        assert conn.execute("SELECT max(version) FROM llmc_schema").fetchone() == (6,)
    assert len(rows) == 2 and {row[1] for row in rows} == {"count"}
    assert not any(TOKEN in row[0] or TOKEN in row[2] for row in rows)
    tail = llmc("audit", "tail", "--outcome", "cached", "--format", "jsonl")
    assert [json.loads(line)["outcome"] for line in tail.stdout.splitlines()] == ["cached"]
    cleared = json.loads(llmc("cache", "clear", "--server", "count").stdout)
    assert cleared == {"cleared": 2, "server": "count", "store": "database"}
    assert "cached" not in call("count.search", "query=a", f"token={TOKEN}")
