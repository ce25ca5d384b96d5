"""[audit] sync: when an allowed call's decision record is made durable, seen from a real stdio
server's side effect (the counting server appends a line to a file when a call reaches it) and
the real log file at each of its syncs (os.fdatasync, spied as tests/audit/test_group_commit.py
does). "before_call": the decision is written and synced before the server has the call.
"before_reply": written before the call is sent, synced while the server works, and durable
before the result, an error or a refusal comes back; a sync that fails then withholds the result
with one AuditError saying the call ran."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from llmc_cli import services
from llmc_cli.audit import AuditError, AuditLog
from llmc_cli.catalog import Catalog
from llmc_cli.config.profiles import LoadedProfile
from llmc_cli.config.schema import AuditConfig, PolicyConfig, Profile
from llmc_cli.errors import PolicyDenied
from llmc_cli.model import ServerSpec
from tests.helpers import llmc, profile_file, sdk_server


class LogSyncs:
    """os.fdatasync as it is, noting at each sync of the log how much of it was written, whether
    the server had a call by then and, with `wait_for_server`, first waiting (bounded) until it
    has one (a sync made while the server works finds it; one made before the send would not).
    `failing`: the log's syncs fail with EIO."""

    def __init__(self, log: Path, calls: Path, wait_for_server: bool) -> None:
        self.log, self.calls, self.wait = log, calls, wait_for_server
        self.real = os.fdatasync
        self.seen: list[tuple[int, bool]] = []  # (the log's size, the server had a call)
        self.failing = False
        self.lock = threading.Lock()

    def __call__(self, fd: int) -> None:
        target = os.fstat(fd)
        try:
            ours = (target.st_dev, target.st_ino) == (os.stat(self.log).st_dev, os.stat(self.log).st_ino)
        except FileNotFoundError:
            ours = False
        if ours:
            for _ in range(3000):  # bounded: 30 s
                if not self.wait or self.calls.exists():
                    break
                threading.Event().wait(0.01)
            if self.failing:
                raise OSError(5, "Input/output error")
            self.real(fd)
            with self.lock:
                self.seen.append((target.st_size, self.calls.exists()))
            return
        self.real(fd)

    def durable(self) -> int:
        """How much of the log the last sync covered."""
        return max((size for size, _ in self.seen), default=0)


def decision_end(log: Path, nth: int) -> int:
    """Where the line of the log's `nth` decision record (from 1) ends."""
    data, at = log.read_bytes(), 0
    for _ in range(nth):
        at = data.index(b'"event":"decision"', at) + 1
    return data.index(b"\n", at) + 1


@pytest.fixture
def pipeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Any]]:
    """make(mode, wait_for_server=False, policy=None, grouped=False) -> (run(tool, name), the spy,
    the log). `grouped`: the records go through an audit.Deferred, as the gateway's and a batch's."""
    monkeypatch.setenv("LLMC_STATE_DIR", str(tmp_path / "state"))
    made: list[tuple[Catalog, Any]] = []
    stack = ExitStack()

    def make(
        mode: str, wait_for_server: bool = False, policy: PolicyConfig | None = None, grouped: bool = False
    ) -> tuple[Any, LogSyncs, Path]:
        log, calls = tmp_path / "audit.jsonl", tmp_path / "calls"
        AuditLog(log).append({"event": "outcome", "n": 0})  # the log and its anchor exist
        spy = LogSyncs(log, calls, wait_for_server)
        monkeypatch.setattr(os, "fdatasync", spy)
        profile = LoadedProfile(
            "test", None, Profile(audit_log=str(log), audit=AuditConfig(sync=mode), policy=policy or PolicyConfig())
        )
        spec = ServerSpec("count", command=tuple(sdk_server("counting_server.py")), env={"COUNT_FILE": str(calls)})
        catalog = Catalog([spec]).__enter__()
        pipe = services.open_calls(catalog, profile, command="call", assume_yes=True)
        made.append((catalog, pipe))
        if grouped:
            stack.enter_context(pipe.grouped())
        return lambda tool, name: pipe.run(services.ToolRequest(f"count.{tool}", {"name": name})), spy, log

    yield make
    stack.close()
    for catalog, pipe in made:
        pipe.close()
        catalog.__exit__(None, None, None)


def test_before_call_syncs_the_decision_before_the_server_has_the_call(pipeline) -> None:
    run, spy, log = pipeline("before_call")
    assert "plain a #1" in str(run("plain", "a").raw)
    end = decision_end(log, 1)
    first = next((size, had) for size, had in spy.seen if size >= end)
    assert first == (first[0], False)  # the sync that covered the decision: the server had no call yet
    assert AuditLog(log).verify()["ok"]


@pytest.mark.parametrize("grouped", [False, True], ids=["call", "deferred"])
def test_before_reply_syncs_while_the_server_works_and_before_the_result(pipeline, grouped: bool) -> None:
    run, spy, log = pipeline("before_reply", wait_for_server=True, grouped=grouped)
    outcome = run("plain", "a")
    # When the result came back, the decision was durable already...
    end = decision_end(log, 1)
    assert "plain a #1" in str(outcome.raw) and spy.durable() >= end
    # ...by a sync that found the call at the server: the two overlapped.
    assert next(had for size, had in spy.seen if size >= end) is True
    assert (log.parent / "calls").read_text().count("plain") == 1
    if not grouped:  # (a Deferred's outcome record waits up to a second)
        verified = AuditLog(log).verify()
        assert verified["ok"] and verified["records"] == 3, verified  # the first, the decision, the outcome


def test_before_reply_a_refusal_after_the_decision_is_durable_before_it_is_raised(pipeline) -> None:
    # grouped: the refusal's outcome record waits in memory, so only the decision's settle syncs
    run, spy, log = pipeline("before_reply", policy=PolicyConfig(calls_per_minute=1), grouped=True)
    run("plain", "a")
    with pytest.raises(PolicyDenied):
        run("plain", "b")  # over the rate limit: decided (allowed), then refused
    assert spy.durable() >= decision_end(log, 2)
    assert (log.parent / "calls").read_text().count("plain") == 1


def test_before_reply_a_failed_sync_withholds_the_result_and_says_the_call_ran(pipeline) -> None:
    run, spy, log = pipeline("before_reply")
    spy.failing = True
    with pytest.raises(AuditError) as failed:
        run("plain", "a")
    message = failed.value.message
    assert "its decision is not durable" in message and "the call ran" in message, message
    assert "Input/output error" in message or "the sync failed" in message, message
    assert (log.parent / "calls").read_text().count("plain") == 1  # it did run
    # The disk is back: the next call's decision is synced, and it works.
    spy.failing = False
    assert "plain b #2" in str(run("plain", "b").raw)
    assert spy.durable() >= decision_end(log, 2)


def test_before_call_a_failed_sync_stops_the_call_before_it_runs(pipeline) -> None:
    run, spy, log = pipeline("before_call")
    spy.failing = True
    with pytest.raises(AuditError, match="the tool was not run"):
        run("plain", "a")
    assert not (log.parent / "calls").exists()


def test_before_reply_through_the_commands_call_and_batch(isolated_dirs: Path) -> None:
    """The CLI's call and batch run the same pipeline: results as ever, a chain that verifies,
    every decision before its outcome and every call's outcome present."""
    calls = isolated_dirs / "calls"
    command = " ".join(f'"{part}"' for part in sdk_server("counting_server.py"))
    profile_file(
        isolated_dirs / "config",
        f"[servers.count]\ncommand = {command.split(' ')[0]}\nargs = [{', '.join(command.split(' ')[1:])}]\n"
        f'env = {{ COUNT_FILE = "{calls}" }}\n[audit]\nsync = "before_reply"\n',
    )
    single = llmc("call", "count.plain", "name=a")
    assert single.returncode == 0 and "plain a #1" in single.stdout, single.stderr
    lines = "".join(json.dumps({"tool": "count.plain", "arguments": {"name": n}}) + "\n" for n in "bcd")
    batch = llmc("call", "--batch", "-", stdin=lines)
    out = [str(json.loads(line)["content"]) for line in batch.stdout.splitlines()]
    assert batch.returncode == 0 and len(out) == 3 and all(f"plain {n} #" in o for n, o in zip("bcd", out, strict=True)), out
    assert calls.read_text().count("plain") == 4
    records = [json.loads(line) for line in (isolated_dirs / "state" / "audit.jsonl").read_text().splitlines()]
    events = [(r["event"], r.get("arguments", {}).get("name")) for r in records]
    for name in "abcd":
        assert events.index(("decision", name)) < events.index(("outcome", name)), events
    assert llmc("audit", "verify").returncode == 0
