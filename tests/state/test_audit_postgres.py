"""The audit chain in PostgreSQL: concurrent writers stay one linear chain, verify/tail/head read
it, tampering in the database is caught, and a database that is down stops every call (exit 3,
naming the database, never its password) until it returns."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from llmc_cli.audit import PostgresAuditLog
from llmc_cli.store.postgres import MIGRATIONS
from tests.audit.test_audit import write_profile
from tests.helpers import llmc
from tests.schemas import check_output
from tests.state.postgres import PASSWORD, PostgresServer

pytestmark = pytest.mark.e2e  # a real PostgreSQL (and HAProxy)

WRITER = """
import sys
from llmc_cli.audit import PostgresAuditLog
from llmc_cli.store.postgres import MIGRATIONS
log = PostgresAuditLog(sys.argv[1])
for i in range(500):
    log.append({"event": "outcome", "server": "s", "tool": "t", "n": i, "writer": sys.argv[2]})
"""


def test_four_processes_append_2000_records_to_one_chain(state_url: str) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, state_url, str(i)]) for i in range(4)]
    assert [p.wait(timeout=300) for p in procs] == [0] * 4
    report = json.loads(llmc("audit", "verify").stdout)
    assert report["ok"] is True and report["records"] == 2000
    head = json.loads(llmc("audit", "head").stdout)
    assert head["records"] == 2000 and head["head"] == report["last"]
    with psycopg.connect(state_url) as conn:
        seqs = [row[0] for row in conn.execute("SELECT seq FROM llmc_audit ORDER BY seq")]
    assert seqs == list(range(1, 2001))
    writers = [json.loads(line)["writer"] for line in llmc("audit", "tail", "-n", "2000").stdout.splitlines()]
    assert sorted(writers.count(str(i)) for i in range(4)) == [500] * 4


def _edit(conn: psycopg.Connection) -> None:
    conn.execute("UPDATE llmc_audit SET record = replace(record, '\"n\":5', '\"n\":50') WHERE seq = 6")


def _delete(conn: psycopg.Connection) -> None:
    conn.execute("DELETE FROM llmc_audit WHERE seq = 6")


def _cut_end(conn: psycopg.Connection) -> None:
    conn.execute("DELETE FROM llmc_audit WHERE seq > 8")


def _rewrite_head(conn: psycopg.Connection) -> None:
    conn.execute("UPDATE llmc_audit_head SET head = repeat('a', 64)")


@pytest.mark.parametrize(
    "tamper, reason",
    [
        (_edit, "modified"),
        (_delete, "broken link"),
        (_cut_end, "ends before its anchor"),
        (_rewrite_head, "differs from its anchor"),
    ],
)
def test_tampering_in_the_database_is_caught(state_url: str, tamper, reason: str) -> None:
    log = PostgresAuditLog(state_url)
    for i in range(10):
        log.append({"event": "outcome", "n": i})
    assert log.verify()["ok"] is True
    with psycopg.connect(state_url, autocommit=True) as conn:
        tamper(conn)
    proc = llmc("audit", "verify")
    assert proc.returncode == 1 and reason in json.loads(proc.stdout)["reason"]
    assert "audit log broken" in proc.stderr


def test_calls_are_audited_in_the_database(isolated_dirs: Path, state_url: str) -> None:
    write_profile(isolated_dirs)
    assert llmc("call", "sdk.echo", "message=hi").returncode == 0
    batch = "".join(json.dumps({"tool": "sdk.echo", "arguments": {"message": str(i)}}) + "\n" for i in range(5))
    assert llmc("call", "--batch", "-", stdin=batch).returncode == 0
    records = [json.loads(line) for line in llmc("audit", "tail", "-n", "100").stdout.splitlines()]
    assert len(records) == 12 and {r["event"] for r in records} == {"decision", "outcome"}
    assert not (isolated_dirs / "state" / "audit.jsonl").exists()  # nothing went to the file
    report = json.loads(llmc("audit", "verify").stdout)
    assert report["ok"] is True and report["records"] == 12


def test_migrate_is_idempotent_and_a_database_without_schema_is_refused(
    postgres: PostgresServer, isolated_dirs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = postgres.create_database("fresh")
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    monkeypatch.setenv("LLMC_STATE_URL", url)
    write_profile(isolated_dirs)
    proc = llmc("call", "sdk.echo", "message=x")
    assert proc.returncode == 3 and "llmc state migrate" in proc.stderr and proc.stdout == ""
    first = json.loads(llmc("state", "migrate").stdout)
    assert first["applied"] == sorted(MIGRATIONS) and first["database"] == f"PostgreSQL database 127.0.0.1:{postgres.port}/fresh"
    assert json.loads(llmc("state", "migrate").stdout)["applied"] == []
    assert llmc("call", "sdk.echo", "message=x").returncode == 0


def test_a_database_that_is_down_stops_every_call_until_it_returns(isolated_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = PostgresServer()  # its own cluster: this test stops it
    try:
        monkeypatch.setenv("LLMC_STATE_URL", server.url(password=True))  # the password in the url: never shown
        write_profile(isolated_dirs)
        assert llmc("state", "migrate").returncode == 0
        assert llmc("call", "sdk.echo", "message=before").returncode == 0
        server.stop()
        proc = llmc("call", "sdk.echo", "message=while-down")
        assert proc.returncode == 3 and proc.stdout == ""
        assert f"PostgreSQL database 127.0.0.1:{server.port}/postgres" in proc.stderr and "not run" in proc.stderr
        assert PASSWORD not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
        head = llmc("audit", "head")
        assert head.returncode == 3 and PASSWORD not in head.stderr
        server.start()
        assert llmc("call", "sdk.echo", "message=after").returncode == 0
        messages = [
            json.loads(line).get("arguments", {}).get("message") for line in llmc("audit", "tail", "-n", "10").stdout.splitlines()
        ]
        assert "while-down" not in messages and messages.count("before") == 2 and messages.count("after") == 2
        assert json.loads(llmc("audit", "verify").stdout)["records"] == 4
    finally:
        server.close()


def test_a_rate_limit_holds_across_processes(isolated_dirs: Path, state_url: str) -> None:
    """60 calls a minute between two concurrent batches and a loop of single calls, all counted in
    the database: 60 run, the rest are denied (and audited as denied)."""
    write_profile(isolated_dirs, extra="")
    profile = isolated_dirs / "config" / "profiles" / "default.toml"
    profile.write_text(profile.read_text() + "calls_per_minute = 60\n")
    batch = "".join(json.dumps({"tool": "sdk.echo", "arguments": {"message": str(i)}}) + "\n" for i in range(35))
    from tests.helpers import llmc_executable

    procs = [
        subprocess.Popen(
            [llmc_executable(), "call", "--batch", "-"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    singles = [llmc("call", "sdk.echo", f"message=single-{i}").returncode for i in range(5)]
    outputs = [p.communicate(batch, timeout=300)[0] for p in procs]
    for out in outputs:
        check_output(["call", "--batch", "-"], out)
    lines = [json.loads(line) for out in outputs for line in out.splitlines()]
    ran = sum(1 for line in lines if "content" in line) + singles.count(0)
    denied = sum(1 for line in lines if "rate limit" in json.dumps(line.get("error"))) + singles.count(4)
    assert (ran, denied) == (60, 15), lines[:3]
    with psycopg.connect(state_url) as conn:
        assert conn.execute("SELECT count(*) FROM llmc_rate").fetchone() == (60,)
    outcomes = [json.loads(line).get("outcome") for line in llmc("audit", "tail", "-n", "1000").stdout.splitlines()]
    assert outcomes.count("ok") == 60 and outcomes.count("denied") == 15
