"""Two gateway replicas on one PostgreSQL: a session the host ends through one replica is ended on
the other at once (its next request 404, its memory freed by the listener); a replica killed with
SIGKILL leaves no decided call without an outcome (a survivor writes `lost`); /readyz follows the
database while /healthz does not; a refused initialize hands out no session id; an outage is
said once on stderr, and so is the recovery."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.audit.test_audit import write_profile
from tests.gateway.test_http import INIT, Gateway, read_events, slow_call, start, stop
from tests.helpers import free_port, llmc, wait_until
from tests.state.postgres import PASSWORD, PostgresServer
from tests.state.test_replicas import deployment

pytestmark = pytest.mark.e2e  # a real PostgreSQL (and HAProxy)

CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "sdk.add", "arguments": {"a": 1, "b": 2}}}


def _sessions(replica: Gateway) -> int:
    return int(json.loads(replica.request("GET", "/status")[2])["sessions"])


def _records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in llmc("audit", "tail", "-n", "10000").stdout.splitlines()]


def _call(replica: Gateway, session: str, a: int) -> tuple[int, dict[str, Any]]:
    body = {**CALL, "params": {"name": "sdk.add", "arguments": {"a": a, "b": 1}}}
    status, _, reply = replica.request("POST", "/mcp", body, {"Mcp-Session-Id": session, "Accept": "application/json"})
    return status, json.loads(reply)


def test_a_delete_through_one_replica_ends_the_session_on_the_other_at_once(isolated_dirs: Path, state_url: str) -> None:
    write_profile(isolated_dirs)
    replicas = [start(isolated_dirs / "config" / "profiles" / "default.toml", process=True) for _ in range(2)]
    try:
        first, second = replicas
        sessions = [first.request("POST", "/mcp", INIT)[1]["mcp-session-id"] for _ in range(2)]
        for n, session in enumerate(sessions):  # both replicas serve both sessions now
            status, reply = _call(second, session, 10 + n)
            assert status == 200 and reply["result"]["structuredContent"] == {"result": 11 + n}, reply
            assert _call(first, session, 20 + n)[0] == 200
        assert _sessions(second) == 2
        # The host's DELETE through the first; its very next call through the second is refused,
        # with no sleep for any timeout, and nothing runs.
        assert first.request("DELETE", "/mcp", None, {"Mcp-Session-Id": sessions[0]})[0] == 200
        status, reply = _call(second, sessions[0], 1000)
        assert status == 404 and "Session not found" in reply["error"]["message"], reply
        assert second.request("GET", "/mcp", None, {"Mcp-Session-Id": sessions[0]})[0] == 404
        assert second.request("DELETE", "/mcp", None, {"Mcp-Session-Id": sessions[0]})[0] == 404
        # The other session, ended through the first and never asked for again on the second:
        # the second lets go of it (its upstream connections, its memory) by itself, at once.
        assert first.request("DELETE", "/mcp", None, {"Mcp-Session-Id": sessions[1]})[0] == 200
        assert wait_until(lambda: _sessions(second) == 0, timeout=10), _sessions(second)
        assert _call(second, sessions[1], 1001)[0] == 404
    finally:
        for replica in replicas:
            stop(replica)
    ran = [r["arguments"]["a"] for r in _records() if r.get("event") == "decision"]
    assert sorted(ran) == [10, 11, 20, 21]  # the refused calls were never decided, let alone run


def _kill_mid_calls(front: Gateway, holder: Gateway, survivors: list[Gateway], session: str) -> list[dict[str, Any]]:
    """Through `front`, a call still running on `holder` when it is killed, and calls whose
    results the host has received (their outcomes waiting for the replica's next write); then
    SIGKILL. The records once a survivor has closed what was left open, and had time to close it
    again (it must find nothing)."""
    conn, response = slow_call(front, 30, session)
    read_events(response, b"progress")
    for a in range(4):
        status, reply = _call(front, session, a)
        assert status == 200 and reply["result"]["structuredContent"] == {"result": a + 1}, reply
    holder.proc.kill()
    holder.proc.wait(timeout=30)
    conn.close()
    started = time.monotonic()
    assert wait_until(lambda: any(r.get("outcome") == "lost" for r in _records()), timeout=30), _records()[-6:]
    assert time.monotonic() - started < 15  # a lease of 1 s, renewed every third of it
    time.sleep(2)  # several more passes of every survivor
    records = _records()
    decided = [r for r in records if r.get("event") == "decision" and r["decision"] == "allow"]
    outcomes = [r for r in records if r.get("event") == "outcome"]

    def call_of(record: dict[str, Any]) -> tuple[str, ...]:
        return tuple(json.dumps(record.get(k), sort_keys=True) for k in ("pid", "tool", "arguments"))

    assert len(decided) == 5 and sorted(map(call_of, decided)) == sorted(map(call_of, outcomes)), (
        decided,
        outcomes,
    )  # every decided call has exactly one outcome
    lost = [r for r in outcomes if r["outcome"] == "lost"]
    assert any(r["tool"] == "slow" for r in lost)
    killed = str(holder.proc.pid)
    for record in lost:
        assert str(record["pid"]) == killed and record["replica"].split(":")[1] == killed
        assert record["closedBy"].split(":")[1] in {str(r.proc.pid) for r in survivors}
        assert record["replica"] in record["reason"]
    report = json.loads(llmc("audit", "verify").stdout)
    assert report["ok"] is True and report["records"] == len(records)
    assert llmc("audit", "tail", "--outcome", "lost").stdout.count('"lost"') == len(lost)
    return records


def test_a_replica_killed_mid_calls_leaves_no_decision_without_an_outcome(
    isolated_dirs: Path, state_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMC_REPLICA_LEASE", "1")  # a replica is taken for gone after a second without renewal
    write_profile(isolated_dirs)
    with deployment(isolated_dirs / "config" / "profiles" / "default.toml") as (front, replicas):
        session = front.request("POST", "/mcp", INIT)[1]["mcp-session-id"]
        holder = next(r for r in replicas if _sessions(r) == 1)
        _kill_mid_calls(front, holder, [r for r in replicas if r is not holder], session)


def test_two_survivors_close_each_lost_call_once(isolated_dirs: Path, state_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMC_REPLICA_LEASE", "1")
    write_profile(isolated_dirs)
    replicas = [start(isolated_dirs / "config" / "profiles" / "default.toml", process=True) for _ in range(3)]
    try:
        session = replicas[0].request("POST", "/mcp", INIT)[1]["mcp-session-id"]
        _kill_mid_calls(replicas[0], replicas[0], replicas[1:], session)
    finally:
        for replica in replicas[1:]:
            stop(replica)


def test_readiness_refused_initialize_and_an_outage_said_once(isolated_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_profile(isolated_dirs)
    profile = isolated_dirs / "config" / "profiles" / "default.toml"
    server = PostgresServer()  # its own cluster: this test stops it
    try:
        monkeypatch.setenv("LLMC_STATE_URL", server.url(password=True))
        monkeypatch.setenv("LLMC_REPLICA_LEASE", "1")
        assert llmc("state", "migrate").returncode == 0
        gateway = start(profile, process=True)
        try:
            assert gateway.request("GET", "/readyz")[0] == 200
            server.stop()
            assert gateway.request("GET", "/healthz")[0] == 200  # alive: no reason to restart it
            status, headers, body = gateway.request("GET", "/readyz")
            assert status == 503 and json.loads(body) == {"status": "not ready"}  # the why is on stderr only
            for _ in range(3):  # initialize refused: no session id for a session never started
                status, headers, body = gateway.request("POST", "/mcp", INIT)
                assert status == 200 and "cannot start a session" in json.loads(body)["error"]["message"]
                assert "mcp-session-id" not in headers, headers
            assert _sessions(gateway) == 0
            time.sleep(2)  # the lease and the listener retry meanwhile, several times each
            server.start()
            assert wait_until(lambda: gateway.request("GET", "/readyz")[0] == 200, timeout=30)
            session = gateway.request("POST", "/mcp", INIT)[1]["mcp-session-id"]
            assert _call(gateway, session, 5)[1]["result"]["structuredContent"] == {"result": 6}
        finally:
            stderr = stop(gateway)
    finally:
        server.close()
    database = f"PostgreSQL database 127.0.0.1:{server.port}/postgres"
    lines = stderr.splitlines()
    down = [line for line in lines if database in line and "unreachable" in line]
    back = [line for line in lines if database in line and "reachable again" in line]
    assert len(down) == 1 and len(back) == 1 and lines.index(down[0]) < lines.index(back[0]), stderr
    assert PASSWORD not in stderr


def test_a_refused_initialize_starts_no_session(isolated_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever refuses it (here: params that are no object), without a state database too."""
    monkeypatch.delenv("LLMC_STATE_URL", raising=False)
    write_profile(isolated_dirs)
    gateway = start(isolated_dirs / "config" / "profiles" / "default.toml", process=True)
    try:
        status, headers, body = gateway.request("POST", "/mcp", {**INIT, "params": "not an object"})
        assert "error" in json.loads(body) and "mcp-session-id" not in headers, (status, headers, body)
        assert _sessions(gateway) == 0
        assert gateway.request("GET", "/readyz")[0] == 200  # nothing it needs is missing
    finally:
        stop(gateway)


@pytest.mark.parametrize("lease", ["soon", "0", "-1", "nan"])
def test_a_bad_lease_is_one_line_before_the_gateway_starts(isolated_dirs: Path, state_url: str, lease: str) -> None:
    write_profile(isolated_dirs)
    proc = llmc(
        "serve",
        "-p",
        str(isolated_dirs / "config" / "profiles" / "default.toml"),
        "--http",
        f"127.0.0.1:{free_port()}",
        env={"LLMC_REPLICA_LEASE": lease},
    )
    assert proc.returncode == 3 and proc.stdout == "", proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"llmc: LLMC_REPLICA_LEASE={lease}: expected a number of seconds from 0.5 to 86400"
    ], proc.stderr
