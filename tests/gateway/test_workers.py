"""`llmc serve --http ADDR --workers N`: processes serving one socket (gateway/supervisor.py), a
host session held by the worker that opened it and reached through any other (gateway/forward.py).

Which worker the kernel hands a connection to is its choice; every reply says which worker
accepted the connection (`llmc-worker`) and a session id names its owner (`....K`), so these
tests pick, for each request, a kept-alive connection that the other worker accepted."""

from __future__ import annotations

import http.client
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.conftest import audit_records
from tests.gateway.test_http import INIT, Gateway, read_events, start, stop
from tests.helpers import llmc, signal_until_exit, wait_until
from tests.processes import gone, live_processes

V2026 = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
# connection_to picks a worker's connection with GET /healthz, a public page, so the connection
# stays pending (it has shown no token), and the gateway closes a pending connection that sends no
# next request within --pending-timeout (5 s by default). The tests hold such connections across
# round trips through both processes, upstream starts and waits; on a loaded runner that took more
# than 5 s, and the next request met a closed connection (BrokenPipeError: reproduced with 5.5 s
# between the pick and the request). A minute is how long a test may hold one.
WORKERS = ("--workers", "2", "--pending-timeout", "60")
INIT_ELICIT = {**INIT, "params": {**INIT["params"], "capabilities": {"elicitation": {}}}}  # type: ignore[dict-item]


def connection_to(gateway: Gateway, worker: int) -> http.client.HTTPConnection:
    """A kept-alive connection that worker `worker` accepted (new connections until one is); pending
    until a request on it is admitted (see WORKERS)."""
    for _ in range(200):
        conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=30)
        conn.request("GET", "/healthz")
        response = conn.getresponse()
        response.read()
        if response.getheader("llmc-worker") == str(worker):
            return conn
        conn.close()
    raise AssertionError(f"no connection reached worker {worker} in 200 tries")


def post(conn: http.client.HTTPConnection, body: Any, session: str | None = None, **extra: str) -> Any:
    headers = {**HEADERS, **({"Mcp-Session-Id": session} if session else {}), **extra}
    conn.request("POST", "/mcp", body=json.dumps(body), headers=headers)
    return conn.getresponse()


def reply_of(response: Any) -> Any:
    """The final JSON-RPC message of a reply, JSON or SSE (a call the upstream was slow to answer)."""
    body = response.read()
    if response.getheader("Content-Type") == "text/event-stream":
        body = body.rpartition(b"data: ")[2]
    return json.loads(body)


def call(name: str, msg_id: int, **arguments: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def open_session(gateway: Gateway, worker: int, init: dict[str, Any] = INIT) -> str:
    """A session that worker `worker` opened and holds (initialized)."""
    conn = connection_to(gateway, worker)
    response = post(conn, init)
    response.read()
    session = response.getheader("Mcp-Session-Id")
    assert response.status == 200 and session and session.endswith(f".{worker}"), session
    initialized = post(conn, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    initialized.read()
    assert initialized.status == 202
    conn.close()
    return session


def workers_of(gateway: Gateway) -> list[int]:
    return sorted(p.pid for p in live_processes() if p.ppid == gateway.proc.pid)


@pytest.fixture
def two(gateway_profile: Path) -> Any:
    running = start(gateway_profile, *WORKERS, "-v", process=True)
    try:
        yield running
    finally:
        if running.proc.poll() is None:
            stop(running)


@pytest.mark.e2e  # processes: the supervisor and its workers
def test_a_sessions_requests_reach_its_worker_through_either(two: Gateway) -> None:
    """Calls, a GET stream and DELETE of a session, each through the worker that does not hold
    it; sessions of both workers; /status through either shows both."""
    sessions = [open_session(two, 0), open_session(two, 1)]
    for owner, session in enumerate(sessions):
        other, mine = connection_to(two, 1 - owner), connection_to(two, owner)
        for n, conn in enumerate([other, mine, other, other]):
            response = post(conn, call("sdk.add", n + 2, a=n, b=owner), session)
            body = reply_of(response)
            assert response.status == 200 and body["result"]["structuredContent"] == {"result": n + owner}, body
            assert response.getheader("llmc-worker") == str(1 - owner if conn is other else owner)
        other.request("HEAD", "/mcp", headers={"Mcp-Session-Id": session})  # not relayed: no body to wait for
        head = other.getresponse()
        head.read()
        assert head.status == 501
        other.close()
        mine.close()
    for worker in (0, 1):
        conn = connection_to(two, worker)
        conn.request("GET", "/status")
        status = json.loads(conn.getresponse().read())
        conn.close()
        assert status["sessions"] == 2 and sorted(h["worker"] for h in status["hosts"]) == [0, 1], status
        assert all(h["stage"] == "working" for h in status["hosts"]), status
    for owner, session in enumerate(sessions):
        # The session's GET stream, opened through the other worker, is the owner's: its DELETE
        # (through the other worker too) ends it, and the owner says 404 from then on.
        other, mine = connection_to(two, 1 - owner), connection_to(two, owner)
        listen = connection_to(two, 1 - owner)
        listen.request("GET", "/mcp", headers={"Accept": "text/event-stream", "Mcp-Session-Id": session})
        stream = listen.getresponse()
        assert stream.status == 200 and stream.getheader("Content-Type") == "text/event-stream"
        other.request("DELETE", "/mcp", headers={"Mcp-Session-Id": session})
        deleted = other.getresponse()
        deleted.read()
        assert deleted.status == 200
        assert stream.read() in (b"", b": keepalive\n\n")  # ended by the owner, relayed to its end
        gone_now = post(mine, call("sdk.add", 9, a=1, b=1), session)
        gone_now.read()
        assert gone_now.status == 404
        for conn in (other, mine, listen):
            conn.close()
    stderr = stop(two)
    assert "worker 0: host session" in stderr and "worker 1: host session" in stderr  # -v says which worker


@pytest.mark.e2e
def test_confirmation_by_elicitation_answered_through_the_other_worker(two: Gateway, tmp_path: Path) -> None:
    """sdk.echo needs the host's yes: the question goes out on the call's stream at the owner,
    the host's answer arrives through the other worker, and the call runs."""
    session = open_session(two, 0, INIT_ELICIT)
    conn = connection_to(two, 0)
    response = post(conn, call("sdk.echo", 5, message="across workers"), session)
    assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
    (*_, (_, data)) = read_events(response, b"elicitation/create")
    question = json.loads(data)
    answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"confirm": True}}}
    other = connection_to(two, 1)
    accepted = post(other, answer, session)
    accepted.read()
    assert accepted.status == 202 and accepted.getheader("llmc-worker") == "1"
    (*_, (_, final)) = read_events(response, b'"id": 5')
    result = json.loads(final)["result"]
    assert result["isError"] is False and result["structuredContent"] == {"result": "across workers"}, result
    conn.close()
    other.close()
    assert wait_until(lambda: any(r.get("outcome") == "ok" and r["tool"] == "echo" for r in audit_records(tmp_path)), 30)


@pytest.mark.e2e
def test_cancel_and_resume_through_the_other_worker(two: Gateway, tmp_path: Path) -> None:
    """A call's stream dropped at the owner is resumed with Last-Event-ID through the other
    worker; a running call cancelled through the other worker ends its response."""
    session = open_session(two, 1)
    slow = {
        **call("sdk.slow", 7, seconds=1.5),
        "params": {**call("sdk.slow", 7, seconds=1.5)["params"], "_meta": {"progressToken": "p"}},
    }
    conn = connection_to(two, 1)
    response = post(conn, slow, session)
    events = read_events(response, b"notifications/progress")
    last_id = events[-1][0]
    assert last_id
    conn.close()
    resume = connection_to(two, 0)
    resume.request("GET", "/mcp", headers={"Accept": "text/event-stream", "Mcp-Session-Id": session, "Last-Event-ID": last_id})
    resumed = resume.getresponse()
    assert resumed.status == 200 and resumed.getheader("llmc-worker") == "0"
    rest = read_events(resumed, b'"id": 7')
    assert json.loads(rest[-1][1])["result"]["content"][0]["text"] == "slept 1.5"
    resume.close()

    long = {
        **call("sdk.slow", 8, seconds=30),
        "params": {**call("sdk.slow", 8, seconds=30)["params"], "_meta": {"progressToken": "q"}},
    }
    conn = connection_to(two, 1)
    running = post(conn, long, session)
    read_events(running, b"notifications/progress")
    other = connection_to(two, 0)
    cancelled = post(other, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 8}}, session)
    cancelled.read()
    assert cancelled.status == 202
    started = time.monotonic()
    while running.readline():  # the response ends without a reply (cancellation.mdx)
        assert time.monotonic() - started < 20
    conn.close()
    other.close()
    assert wait_until(lambda: any(r.get("outcome") == "cancelled" for r in audit_records(tmp_path)), 30)


@pytest.mark.e2e
def test_a_killed_worker_is_started_again(two: Gateway) -> None:
    """SIGKILL one worker: the supervisor says so and starts it again; its sessions are gone
    (404, as with a lost replica), the other worker's go on."""
    sessions = [open_session(two, 0), open_session(two, 1)]
    before = workers_of(two)
    assert len(before) == 2
    victim = before[0]
    os.kill(victim, signal.SIGKILL)
    assert wait_until(lambda: len(workers_of(two)) == 2 and victim not in workers_of(two), 60)
    statuses = []
    for worker in (0, 1):
        conn = connection_to(two, worker)  # both serve again
        conn.close()
    for session in sessions:
        conn = connection_to(two, int(session[-1]))
        response = post(conn, call("sdk.add", 3, a=1, b=2), session)
        response.read()
        statuses.append(response.status)
        conn.close()
    stderr = stop(two)
    (dead,) = [k for k in (0, 1) if f"worker {k} (pid {victim}) was killed by SIGKILL; starting it again" in stderr]
    assert statuses[dead] == 404 and statuses[1 - dead] == 200, (dead, statuses)


@pytest.mark.e2e
def test_sigterm_drains_every_worker(two: Gateway) -> None:
    """A 2026-07-28 listen stream open on each worker: SIGTERM to the supervisor, each stream
    gets its `complete` result, the upstream servers go, exit 0 (as one process does)."""
    listen = {
        "jsonrpc": "2.0",
        "id": "L",
        "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": True}, "_meta": V2026},
    }
    streams = []
    for worker in (0, 1):
        conn = connection_to(two, worker)
        response = post(conn, listen, None, **{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"})
        assert response.status == 200
        read_events(response, b"notifications/subscriptions/acknowledged")
        streams.append((conn, response))
    upstreams = [p.pid for p in live_processes() if p.ppid in workers_of(two)]
    assert upstreams
    two.proc.terminate()
    for conn, response in streams:
        ((_, data),) = read_events(response, b'"complete"')
        assert json.loads(data)["id"] == "L"
        conn.close()
    _, stderr = two.proc.communicate(timeout=60)
    assert two.proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert wait_until(lambda: all(gone(pid) for pid in upstreams), 30), "an upstream server outlived the gateway"


@pytest.mark.e2e
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_a_storm_of_signals_stops_every_worker_cleanly(two: Gateway, sig: signal.Signals) -> None:
    """The signal again and again at the supervisor: the first stops every worker, the others
    change nothing, exit 0; no worker and no upstream server is left."""
    assert connection_to(two, 0) and connection_to(two, 1)
    workers = workers_of(two)
    upstreams = [p.pid for p in live_processes() if p.ppid in workers]
    assert len(workers) == 2 and upstreams
    assert signal_until_exit(two.proc, sig) == 0
    assert wait_until(lambda: all(gone(pid) for pid in [*workers, *upstreams]), 30), "a worker or upstream outlived the gateway"
    _, stderr = two.proc.communicate(timeout=30)
    assert "Traceback" not in stderr, stderr


@pytest.mark.e2e
def test_rate_limits_count_across_workers(gateway_profile: Path, tmp_path: Path) -> None:
    """calls_per_minute = 4 with two workers: four calls in the minute, not four per worker."""
    gateway_profile.write_text(gateway_profile.read_text().replace("[policy]\n", "[policy]\ncalls_per_minute = 4\n", 1))
    running = start(gateway_profile, *WORKERS, process=True)
    try:
        allowed = refused = 0
        for n in range(8):
            conn = connection_to(running, n % 2)
            params = {"name": "sdk.add", "arguments": {"a": n, "b": 1}, "_meta": V2026}
            response = post(
                conn,
                {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params},
                None,
                **{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "sdk.add"},
            )
            result = reply_of(response)["result"]
            conn.close()
            if result.get("isError"):
                assert "rate limit" in json.dumps(result).lower(), result
                refused += 1
            else:
                allowed += 1
        assert (allowed, refused) == (4, 4)
    finally:
        stop(running)


def test_workers_option_is_checked(gateway_profile: Path) -> None:
    for args, message in (
        (["--http", "127.0.0.1:1", "--workers", "0"], "give a number from 1 to 64"),
        (["--http", "127.0.0.1:1", "--workers", "many"], "give a number from 1 to 64"),
        (["--workers", "2"], "--workers needs --http"),
    ):
        proc = llmc("serve", "-p", str(gateway_profile), *args)
        assert proc.returncode == 2 and message in proc.stderr and proc.stdout == "", proc.stderr


def test_owner_of_a_session_id() -> None:
    from llmc_cli.gateway.forward import WorkerSlot, owner_of

    slot = WorkerSlot(1, 2, "/run")
    assert slot.suffix == ".1" and slot.socket_path(0) == "/run/w0.sock"
    assert owner_of(b"abc.1", 2) == 1 and owner_of(b"abc.0", 2) == 0
    assert owner_of(b"abc.2", 2) is None and owner_of(b"abc", 2) is None and owner_of(b"abc.x", 2) is None


@pytest.mark.e2e
def test_a_per_session_server_is_one_process_per_session_whichever_worker(gateway_profile: Path, tmp_path: Path) -> None:
    """A `per_session` server's notes, kept in its process, written through the session's worker
    and read through the other: one process for the session, not one per worker."""
    import sys

    from tests.helpers import PEERS

    marker = tmp_path / "own-calls.log"
    with gateway_profile.open("a") as fh:  # the hints go into [policy.hints], the profile's last table
        fh.write('"own.remember" = { readOnly = true }\n"own.recall" = { readOnly = true }\n\n')
        fh.write(f"[servers.own]\ncommand = {json.dumps(sys.executable)}\n")
        fh.write(f"args = [{json.dumps(str(PEERS / 'sdk_server.py'))}, '--call-log', {json.dumps(str(marker))}]\n")
        fh.write('per_session = true\nsandbox = "none"\n')
    running = start(gateway_profile, *WORKERS, process=True)

    def own() -> set[int]:
        # Process.cmdline: [] for a process that exited since it was listed (not an error)
        return {p.pid for p in live_processes() if any(str(marker).encode() in arg for arg in p.cmdline())}

    try:
        session = open_session(running, 0)
        mine, other = connection_to(running, 0), connection_to(running, 1)
        # Each worker's own connection, for listings (one per worker), is up before the session's.
        assert wait_until(lambda: len(own()) == 2, 60)
        listing = own()
        remembered = post(mine, call("own.remember", 2, key="k", value="v1"), session)
        assert remembered.status == 200 and not reply_of(remembered)["result"]["isError"]
        recalled = post(other, call("own.recall", 3, key="k"), session)
        assert recalled.getheader("llmc-worker") == "1"
        assert reply_of(recalled)["result"]["content"][0]["text"] == "v1"
        assert len(own() - listing) == 1  # the session's, in its worker
        mine.close()
        other.close()
    finally:
        stop(running)


def test_a_relayed_request_says_who_the_host_is_and_nothing_the_host_forged() -> None:
    """What the owner reads: the host's own fields, its real address and TLS client subject in
    the relay's headers, never the host's copies of those headers, nor hop-by-hop fields."""
    from llmc_cli.gateway.forward import request_head

    scope = {
        "method": "POST",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "client": ("203.0.113.7", 40000),
        "extensions": {"tls": {"llmc.client_subject": {"CN": "carol"}}},
        "headers": [
            (b"host", b"127.0.0.1:8765"),
            (b"x-llmc-forwarded-tls-subject", b'{"CN": "admin"}'),
            (b"x-llmc-forwarded-peer", b'["127.0.0.1", 1]'),
            (b"connection", b"keep-alive"),
            (b"transfer-encoding", b"chunked"),
            (b"content-length", b"999"),
            (b"mcp-session-id", b"abc.1"),
        ],
    }
    head = request_head(scope, 2).decode()
    lines = head.split("\r\n")
    assert lines[0] == "POST /mcp HTTP/1.1"
    assert "host: 127.0.0.1:8765" in lines and "mcp-session-id: abc.1" in lines and "content-length: 2" in lines
    assert 'x-llmc-forwarded-peer: ["203.0.113.7", 40000]' in lines
    assert 'x-llmc-forwarded-tls-subject: {"CN": "carol"}' in lines
    assert "admin" not in head and "chunked" not in head and "999" not in head and "keep-alive" not in head


def test_the_private_socket_believes_the_relay() -> None:
    import asyncio

    from llmc_cli.gateway.forward import Private

    seen: list[dict[str, Any]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope)

    scope = {
        "type": "http",
        "client": None,
        "headers": [
            (b"x-llmc-forwarded-peer", b'["203.0.113.7", 40000]'),
            (b"x-llmc-forwarded-tls-subject", b'{"CN": "carol"}'),
            (b"authorization", b"Bearer t"),
        ],
    }
    asyncio.run(Private(app)(scope, None, None))  # type: ignore[arg-type]
    (inner,) = seen
    assert inner["client"] == ("203.0.113.7", 40000)
    assert inner["extensions"]["tls"] == {"llmc.client_subject": {"CN": "carol"}}
    assert inner["headers"] == [(b"authorization", b"Bearer t")]


@pytest.mark.e2e
def test_workers_end_when_the_supervisor_is_killed(two: Gateway) -> None:
    """SIGKILL to the supervisor (the OOM killer, a timeout's kill): its workers drain and end
    rather than serve on orphaned, holding the port and their upstreams."""
    workers = workers_of(two)
    assert len(workers) == 2
    os.kill(two.proc.pid, signal.SIGKILL)
    two.proc.wait(timeout=30)
    assert wait_until(lambda: all(gone(pid) for pid in workers), 30), [p for p in workers if not gone(p)]
