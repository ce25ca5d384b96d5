"""The audit trail: every decision and outcome recorded, secrets masked, appends serialised
across processes, tampering found by `audit verify`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llmc_cli.audit import AuditError, AuditLog, Deferred, mask_secrets, records
from tests.helpers import audit_trail, llmc, profile_file, sdk_server

WRITER = """
import sys
import time
from llmc_cli.audit import AuditLog
log = AuditLog(sys.argv[1])
for i in range(500):
    log.append({"event": "outcome", "server": "s", "tool": "t", "n": i, "writer": sys.argv[2]})
"""


def write_profile(isolated_dirs: Path, extra: str = "") -> None:
    profile_file(
        isolated_dirs / "config",
        f"""{extra}
[servers.sdk]
command = "{sys.executable}"
args = ["{sdk_server("sdk_server.py")[1]}"]
[policy]
confirm_destructive = false
""",
    )


@pytest.mark.e2e  # eight llmc processes writing one trail
def test_eight_processes_append_4000_records_with_an_intact_chain(tmp_path):
    path = tmp_path / "audit.jsonl"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(i)]) for i in range(8)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 8
    report = AuditLog(path).verify()
    assert report == {**report, "ok": True, "records": 4000}
    lines = path.read_text().splitlines()
    assert len(lines) == 4000 and all(json.loads(line)["hash"] for line in lines)


@pytest.mark.parametrize("tamper, first_bad_line", [("edit", 6), ("delete", 6), ("swap", 5)])
def test_tampering_in_the_middle_is_caught(tmp_path, tamper, first_bad_line):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    for i in range(10):
        log.append({"event": "outcome", "n": i})
    lines = path.read_text().splitlines(keepends=True)
    if tamper == "edit":
        lines[5] = lines[5].replace('"n":5', '"n":50')
    elif tamper == "delete":
        del lines[5]
    else:
        lines[4], lines[5] = lines[5], lines[4]
    path.write_text("".join(lines))
    report = AuditLog(path).verify()
    assert report["ok"] is False and report["line"] == first_bad_line
    assert report["records"] == first_bad_line - 1


def test_rotation_keeps_the_chain_verifiable(tmp_path):
    log = AuditLog(tmp_path / "audit.jsonl", max_bytes=2000)
    for i in range(60):
        log.append({"event": "outcome", "n": i})
    files = log.files()
    assert len(files) > 3 and files[-1].name == "audit.jsonl"
    assert log.verify() == {**log.verify(), "ok": True, "records": 60}
    files[1].unlink()  # a whole rotated file removed
    assert log.verify()["ok"] is False


def test_secrets_are_masked(monkeypatch):
    monkeypatch.setenv("ERP_TOKEN", "s3cr3t-value")
    masked = mask_secrets({"password": "hunter2", "query": "token is s3cr3t-value", "n": [{"api_key": "x"}]})
    assert masked == {"password": "***", "query": "token is ***", "n": [{"api_key": "***"}]}


def test_calls_are_audited_through_the_cli(isolated_dirs, monkeypatch):
    monkeypatch.setenv("MY_API_TOKEN", "tok-123456")
    write_profile(isolated_dirs)
    assert llmc("call", "sdk.echo", "message=uses tok-123456").returncode == 0
    assert llmc("call", "sdk.fail", "reason=x").returncode == 1
    records = [json.loads(line) for line in llmc("audit", "tail", "-n", "10").stdout.splitlines()]
    assert [(r["event"], r.get("decision") or r.get("outcome")) for r in records] == [
        ("decision", "allow"),
        ("outcome", "ok"),
        ("decision", "allow"),
        ("outcome", "tool_error"),
    ]
    first = records[0]
    assert first["arguments"] == {"message": "uses ***"} and first["profile"] == "default"
    assert {"user", "host", "pid", "time", "rule", "command"} <= set(first)
    assert records[1]["resultSha256"] and records[1]["resultBytes"] > 0 and "result" not in records[1]
    assert "tok-123456" not in (isolated_dirs / "state" / "audit.jsonl").read_text()
    only_errors = llmc("audit", "tail", "--outcome", "tool_error").stdout.splitlines()
    assert len(only_errors) == 1 and json.loads(only_errors[0])["tool"] == "fail"
    assert llmc("audit", "tail", "--since", "1h", "--tool", "sdk.echo").stdout.count("\n") == 2
    assert json.loads(llmc("audit", "verify").stdout)["ok"] is True


def test_a_denial_is_audited_and_an_unwritable_log_stops_the_call(isolated_dirs, tmp_path):
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the log's folder should be")
    write_profile(isolated_dirs, extra=f'audit_log = "{blocked}/audit.jsonl"')
    proc = llmc("call", "sdk.echo", "message=x")
    assert proc.returncode == 3 and "audit log" in proc.stderr and "not run" in proc.stderr
    assert proc.stdout == ""


def test_verify_reports_a_broken_log_with_exit_1(isolated_dirs):
    write_profile(isolated_dirs)
    llmc("call", "sdk.echo", "message=x")
    log = isolated_dirs / "state" / "audit.jsonl"
    log.write_text(log.read_text().replace('"message":"x"', '"message":"y"'))
    proc = llmc("audit", "verify")
    assert proc.returncode == 1 and json.loads(proc.stdout)["ok"] is False


def test_a_batch_trail_writes_each_outcome_with_the_next_decision(tmp_path):
    log = AuditLog(tmp_path / "audit.jsonl")
    other = AuditLog(tmp_path / "audit.jsonl")  # another process appending between our writes
    trail = Deferred(log)
    trail.record({"event": "decision", "n": 1}, before_action=True)
    trail.record({"event": "outcome", "n": 1}, before_action=False)
    assert [json.loads(x)["n"] for x in log.path.read_text().splitlines()] == [1]  # the outcome waits...
    other.append({"event": "elsewhere"})
    trail.record({"event": "decision", "n": 2}, before_action=True)  # ...and goes with the next decision
    trail.record({"event": "outcome", "n": 2}, before_action=False)
    trail.flush()
    records = [json.loads(x) for x in log.path.read_text().splitlines()]
    assert [(r["event"], r.get("n")) for r in records] == [
        ("decision", 1),
        ("elsewhere", None),
        ("outcome", 1),
        ("decision", 2),
        ("outcome", 2),
    ]
    assert records[2]["time"] <= records[3]["time"]  # an outcome keeps the time it happened at
    assert log.verify()["ok"] and log.verify()["records"] == 5


def test_a_waiting_outcome_reaches_the_disk_within_the_flush_interval(tmp_path):
    log = AuditLog(tmp_path / "audit.jsonl")
    trail = Deferred(log)
    trail.FLUSH_SECONDS = 0.1
    with trail:
        trail.record_before_actions([{"event": "decision", "n": 1}, {"event": "decision", "n": 2}])
        trail.record({"event": "outcome", "n": 1}, before_action=False)  # then a long call, say
        deadline = time.monotonic() + 5
        while len(log.path.read_text().splitlines()) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(log.path.read_text().splitlines()) == 3
        trail.FLUSH_SECONDS = 60.0
        trail.record({"event": "outcome", "n": 2}, before_action=False)
    assert [json.loads(x)["n"] for x in log.path.read_text().splitlines()][-1] == 2  # leaving flushes
    untimed = Deferred(log)  # not entered: no background flush, only the count
    for n in range(Deferred.FLUSH_RECORDS):
        untimed.record({"event": "outcome", "n": 100 + n}, before_action=False)
    assert len(log.path.read_text().splitlines()) == 4 + Deferred.FLUSH_RECORDS  # a full group at once
    assert log.verify()["ok"]


def test_concurrent_decisions_share_writes_and_keep_the_chain(tmp_path: Path) -> None:
    """The gateway's hosts record decisions at once: every record lands, each caller returns only
    after its own is on disk, and the chain verifies."""
    import threading

    log = AuditLog(tmp_path / "audit.jsonl")
    seen_on_return: list[bool] = []
    with Deferred(log) as trail:

        def decide(n: int) -> None:
            trail.record({"event": "decision", "n": n}, before_action=True)
            seen_on_return.append(f'"n":{n}' in (tmp_path / "audit.jsonl").read_text().replace(" ", ""))
            trail.record({"event": "outcome", "n": n}, before_action=False)

        threads = [threading.Thread(target=decide, args=(n,)) for n in range(24)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    records = audit_trail(tmp_path)
    assert sorted(r["n"] for r in records if r["event"] == "decision") == list(range(24))
    assert sorted(r["n"] for r in records if r["event"] == "outcome") == list(range(24))
    assert seen_on_return == [True] * 24
    assert log.verify()["ok"] is True


def test_a_forked_child_records_its_own_pid() -> None:
    """Who ran a call (user, host, pid) is looked up once per process: a forked child (the
    gateway's workers) looks again, so its records carry its own pid."""
    assert records.identity()["pid"] == os.getpid()
    records.identity()["pid"] = 0  # a copy each time: a caller's change is its own
    assert records.identity()["pid"] == os.getpid()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        os.write(write, str(records.identity()["pid"] == os.getpid()).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    with os.fdopen(read) as answer:
        assert answer.read() == "True"


def test_outcomes_carrying_results_are_written_once_their_results_fill_a_group(tmp_path):
    """With [audit] results on, each outcome record carries its (masked) result: a group waiting in
    memory is written once FLUSH_RESULT_BYTES of results wait, long before FLUSH_RECORDS records,
    so a batch of large results does not hold a thousand of them; records without a result count
    only against FLUSH_RECORDS."""
    log = AuditLog(tmp_path / "audit.jsonl")
    untimed = Deferred(log)  # not entered: no background flush, only the bounds
    untimed.FLUSH_RESULT_BYTES = 3000
    big = {"content": [{"type": "text", "text": "x" * 1000}]}
    for n in range(10):
        untimed.record({"event": "outcome", "n": n, "resultBytes": 10_000}, before_action=False)  # no result carried
    assert not log.path.exists()
    for n in range(2):
        untimed.record({"event": "outcome", "n": 10 + n, "resultBytes": 1040, "result": big}, before_action=False)
    assert not log.path.exists() and untimed.pending_results == 2080
    untimed.record({"event": "outcome", "n": 12, "resultBytes": 1040, "result": big}, before_action=False)
    assert [json.loads(x)["n"] for x in log.path.read_text().splitlines()] == list(range(13))  # the group, in order
    assert untimed.pending == [] and untimed.pending_results == 0
    untimed.record({"event": "outcome", "n": 13, "resultBytes": 1040, "result": big}, before_action=False)
    assert len(log.path.read_text().splitlines()) == 13 and untimed.pending_results == 1040
    untimed.flush()
    assert len(log.path.read_text().splitlines()) == 14 and log.verify()["ok"]


def test_a_waiting_outcome_keeps_the_time_it_was_recorded_at_through_a_failed_write(tmp_path, monkeypatch):
    """A Deferred keeps an outcome's time apart from the record (not a copy of it with the time
    added): each record is stored with the time it was recorded at, also when the write it
    waited for failed and put it back in the queue before later ones."""
    from datetime import UTC, datetime

    log = AuditLog(tmp_path / "audit.jsonl")
    trail = Deferred(log)  # not entered: written by the decisions and flush()
    start = 1_764_302_645_123_000_000
    clock = [start]
    monkeypatch.setattr("time.time_ns", lambda: clock[0])
    trail.record({"event": "outcome", "n": 0}, before_action=False)
    log.path.mkdir()  # a directory where the log goes: the next write fails
    clock[0] += 2_000_000_000
    with pytest.raises(AuditError):
        trail.record_before_actions([{"event": "decision", "decision": "allow", "n": 1}])
    trail.record({"event": "outcome", "n": 2}, before_action=False)
    log.path.rmdir()
    clock[0] += 2_000_000_000
    trail.record_before_actions([{"event": "decision", "decision": "allow", "n": 3}])

    def at(nanos: int) -> str:
        return datetime.fromtimestamp(nanos / 1e9, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    stored = [json.loads(line) for line in log.path.read_text().splitlines()]
    assert [(r["n"], r["time"]) for r in stored] == [(0, at(start)), (2, at(start + 2 * 10**9)), (3, at(start + 4 * 10**9))]
    assert trail.pending == [] and trail.times == [] and log.verify()["ok"]
