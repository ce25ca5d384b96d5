"""Audit appends per second, the file store against PostgreSQL, in one run: N single-record
appends (what `llmc call` does: one transaction or one fsync each) and N records through a
batch's Deferred trail, for each store.

    .venv/bin/python bench/state_bench.py [--records N] [--json]

PostgreSQL: LLMC_STATE_URL (migrated; PGPASSWORD in the environment), else a throwaway cluster
started like the tests do (Debian's postgresql package) — that one runs with fsync=off, so its
numbers flatter PostgreSQL against the file store (which fsyncs): give LLMC_STATE_URL of a real
database for a fair comparison. Gateway calls/s is not measured here yet.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def rate(log: Any, records: int, deferred: bool) -> float:
    from llmc_cli.audit import Deferred

    started = time.perf_counter()
    if deferred:
        with Deferred(log) as trail:
            for i in range(records):
                trail.record({"event": "outcome", "n": i}, before_action=i % 2 == 0)
    else:
        for i in range(records):
            log.append({"event": "outcome", "n": i})
    return records / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=500)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from llmc_cli.audit import AuditLog, PostgresAuditLog
    from llmc_cli.store.postgres import Database

    server = None
    url = os.environ.get("LLMC_STATE_URL")
    if not url:
        from tests.state.postgres import PASSWORD, PostgresServer

        server = PostgresServer()
        os.environ["PGPASSWORD"] = PASSWORD
        url = server.create_database("bench")
    try:
        Database.for_url(url).migrate()
        with tempfile.TemporaryDirectory() as tmp:
            results = {
                "file appends/s": rate(AuditLog(Path(tmp) / "a.jsonl"), args.records, False),
                "file batch records/s": rate(AuditLog(Path(tmp) / "b.jsonl"), args.records, True),
                "postgres appends/s": rate(PostgresAuditLog(url), args.records, False),
                "postgres batch records/s": rate(PostgresAuditLog(url), args.records, True),
            }
    finally:
        if server is not None:
            server.close()
    if args.json:
        print(json.dumps({k: round(v, 1) for k, v in results.items()}))
    else:
        for name, value in results.items():
            print(f"{name:28} {value:10.1f}")


if __name__ == "__main__":
    main()
