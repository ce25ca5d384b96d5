"""Who gets into the HTTP gateway, and how much of it each may take: revoking the last token
closes the door rather than opening it (`[serve] auth`), principals have their own shares of
sessions and requests in flight, and connections that have shown no token wait in a small pool
with a short deadline of their own, so none of them can crowd out a host with a valid token."""

from __future__ import annotations

import http.client
import json
import select
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.test_http import INIT, Gateway, run, sdk_host, start, stop
from tests.helpers import free_port, llmc, wait_until

ALICE, BOB = "alice-token-0123456789abcdef", "bob-token-0123456789abcdef"
TOKENS = {"GW_ALICE": ALICE, "GW_BOB": BOB}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def with_principals(profile: Path, alice: str = "", bob: str = "") -> Path:
    """Principals alice and bob (tokens from the environment), with extra lines for each."""
    profile.write_text(
        profile.read_text() + f'\n[serve.principals.alice]\ntoken_env = "GW_ALICE"\n{alice}\n'
        f'\n[serve.principals.bob]\ntoken_env = "GW_BOB"\n{bob}\n'
    )
    return profile


def bearer(token: str, session: str | None = None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **({"Mcp-Session-Id": session} if session else {})}


def post_init(conn: http.client.HTTPConnection, token: str) -> int:
    """initialize on a connection of the test's own (kept alive after the answer)."""
    conn.request(
        "POST",
        "/mcp",
        json.dumps(INIT),
        {**bearer(token), "Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
    )
    response = conn.getresponse()
    response.read()
    return response.status


def open_host_session(gateway: Gateway, token: str) -> str:
    status, headers, body = gateway.request("POST", "/mcp", INIT, bearer(token))
    assert status == 200, body
    session = headers["mcp-session-id"]
    assert (
        gateway.request("POST", "/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"}, bearer(token, session))[0]
        == 202
    )
    return session


def used(gateway: Gateway, token: str, session: str) -> int:
    """The status of a tools/list in the session (404 once the session is gone)."""
    return gateway.request("POST", "/mcp", TOOLS_LIST, bearer(token, session))[0]


def open_stream(gateway: Gateway, token: str, session: str) -> tuple[http.client.HTTPConnection, Any]:
    """The session's GET stream, open (a request in flight until the connection closes)."""
    conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
    conn.request("GET", "/mcp", headers={**bearer(token, session), "Accept": "text/event-stream"})
    response = conn.getresponse()
    assert response.status == 200
    return conn, response


def test_idle_connections_that_show_no_token_cannot_keep_a_token_holder_out(gateway_profile: Path) -> None:
    """80 connections that never send a byte, more than --max-connections: a host with a valid
    token still gets in at once (its connection waits among the pending ones, and the one that
    waited longest makes room), again and again."""
    running = start(with_principals(gateway_profile), "--max-connections", "64", env=TOKENS)
    idle: list[socket.socket] = []
    try:
        assert running.request("POST", "/mcp", INIT, bearer(ALICE))[0] == 200  # the upstream is up: what is timed is the door
        for _ in range(80):
            idle.append(socket.create_connection(("127.0.0.1", running.port), timeout=30))
        time.sleep(0.5)  # the accept loop has taken them
        for _ in range(3):
            began = time.monotonic()
            status, _, body = running.request("POST", "/mcp", INIT, bearer(ALICE))
            assert status == 200, body
            assert time.monotonic() - began < 5
            idle.append(socket.create_connection(("127.0.0.1", running.port), timeout=30))
        assert running.request("POST", "/mcp", INIT)[0] == 401  # no token: still nobody's
    finally:
        for sock in idle:
            sock.close()
        stop(running)


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the gateway ends the connection within `seconds` (its read sees end of input)."""
    ready, _, _ = select.select([sock], [], [], seconds)
    if not ready:
        return False
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True


def test_a_connection_must_present_its_request_within_the_pending_timeout(gateway_profile: Path) -> None:
    """A connection that sends nothing, or a head a byte at a time, is closed after
    --pending-timeout, not --request-timeout; one whose request was admitted is kept alive for
    the next for --request-timeout."""
    running = start(with_principals(gateway_profile), "--pending-timeout", "1", "--request-timeout", "20", env=TOKENS)
    try:
        with (
            socket.create_connection(("127.0.0.1", running.port), timeout=30) as silent,
            socket.create_connection(("127.0.0.1", running.port), timeout=30) as trickling,
            socket.create_connection(("127.0.0.1", running.port), timeout=30) as public,
        ):
            trickling.sendall(b"POST /mcp HTTP/1.1\r\n")
            public.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # no token: still pending
            began = time.monotonic()
            answer = b""
            for _ in range(10):  # head and body may come apart
                answer += public.recv(65536)
                if answer.endswith(b'{"status": "ok"}'):
                    break
            assert answer.startswith(b"HTTP/1.1 200 ")
            assert closed_within(silent, 6) and closed_within(trickling, 6) and closed_within(public, 6)
            assert time.monotonic() - began < 6
        kept = http.client.HTTPConnection("127.0.0.1", running.port, timeout=30)
        assert post_init(kept, ALICE) == 200 and kept.sock is not None
        assert not closed_within(kept.sock, 2.5)  # admitted once: kept alive past the pending timeout
        kept.close()
    finally:
        stop(running)


def test_kept_alive_connections_take_no_slot_and_requests_in_flight_do(gateway_profile: Path) -> None:
    """--max-connections counts admitted requests in flight, not connections: connections kept
    alive between requests keep nobody out (and end after --request-timeout idle); with every
    slot answering a request, the next one is told to come back (503, Retry-After)."""
    running = start(with_principals(gateway_profile), "--max-connections", "2", "--request-timeout", "2", env=TOKENS)
    kept = [http.client.HTTPConnection("127.0.0.1", running.port, timeout=30) for _ in range(2)]
    try:
        for conn in kept:
            assert post_init(conn, ALICE) == 200
        assert running.request("POST", "/mcp", INIT, bearer(BOB))[0] == 200
        assert kept[0].sock is not None and closed_within(kept[0].sock, 5)  # idle past --request-timeout
        streams = [open_stream(running, token, open_host_session(running, token)) for token in (ALICE, BOB)]
        status, headers, _ = running.request("POST", "/mcp", INIT, bearer(BOB))
        assert status == 503 and headers["retry-after"] == "1"
        for conn, response in streams:
            response.close()
            conn.close()
        assert wait_until(lambda: running.request("POST", "/mcp", INIT, bearer(BOB))[0] == 200, timeout=10)
    finally:
        for conn in kept:
            conn.close()
        stop(running)


def slow_call(gateway: Gateway, token: str, session: str) -> tuple[http.client.HTTPConnection, Any]:
    """sdk.slow (3 s) in the session: its SSE stream, open (the request in flight)."""
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "sdk.slow", "arguments": {"seconds": 3}, "_meta": {"progressToken": "p"}},
    }
    conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=30)
    conn.request(
        "POST",
        "/mcp",
        json.dumps(call),
        {**bearer(token, session), "Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
    )
    response = conn.getresponse()
    assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
    return conn, response


def test_a_principal_at_its_session_quota_loses_its_least_recently_used_session(gateway_profile: Path) -> None:
    """alice may hold 2 sessions. A third ends the one she used least recently (its host hears
    404), never bob's; sessions with no stream open go before those whose host listens on its
    GET stream (that stream ends); with each of hers answering a call she is refused (429) and
    bob goes on."""
    running = start(with_principals(gateway_profile, alice="max_sessions = 2"), env=TOKENS)
    try:
        first, second = open_host_session(running, ALICE), open_host_session(running, ALICE)
        bobs = open_host_session(running, BOB)
        assert used(running, ALICE, first) == 200  # `second` is now the least recently used
        third = open_host_session(running, ALICE)
        assert used(running, ALICE, second) == 404
        assert (used(running, ALICE, first), used(running, ALICE, third), used(running, BOB, bobs)) == (200, 200, 200)

        listening = [open_stream(running, ALICE, first), open_stream(running, ALICE, third)]
        assert used(running, ALICE, third) == 200  # both listen; `first` is the least recently used
        fourth = open_host_session(running, ALICE)
        began = time.monotonic()
        listening[0][1].read()  # its stream ends (not at the 15 s keep-alive)
        assert time.monotonic() - began < 5
        assert (used(running, ALICE, first), used(running, ALICE, third)) == (404, 200)
        for conn, stream in listening:
            stream.close()
            conn.close()

        calls = [slow_call(running, ALICE, third), slow_call(running, ALICE, fourth)]
        status, _, body = running.request("POST", "/mcp", INIT, bearer(ALICE))
        assert status == 429 and b"max_sessions" in body

        async def bob_works() -> None:
            async with sdk_host(running.url, "legacy", BOB) as client:
                result = await client.call_tool("sdk.add", {"a": 2, "b": 3})
                assert result.structured_content == {"result": 5}

        run(bob_works)
        for conn, response in calls:
            assert b"slept 3" in response.read()
            conn.close()
        assert running.request("POST", "/mcp", INIT, bearer(ALICE))[0] == 200
        assert used(running, BOB, bobs) == 200
    finally:
        stop(running)


def test_one_principal_cannot_take_every_session_of_the_gateway(gateway_profile: Path) -> None:
    """alice, allowed more sessions than the gateway holds (256), fills it; bob still gets a
    session, and it is alice's least recently used that ends for it."""
    running = start(with_principals(gateway_profile, alice="max_sessions = 1000"), env=TOKENS)
    try:
        sessions = []
        for _ in range(256):
            status, headers, body = running.request("POST", "/mcp", INIT, bearer(ALICE))
            assert status == 200, body
            sessions.append(headers["mcp-session-id"])
        assert used(running, ALICE, sessions[0]) == 200  # sessions[1] is now her least recently used
        bobs = open_host_session(running, BOB)
        assert used(running, BOB, bobs) == 200
        assert (used(running, ALICE, sessions[1]), used(running, ALICE, sessions[0])) == (404, 200)
    finally:
        stop(running)


def test_a_principal_at_its_request_quota_is_refused_and_the_others_go_on(gateway_profile: Path) -> None:
    running = start(with_principals(gateway_profile, alice="max_requests = 1"), env=TOKENS)
    try:
        session = open_host_session(running, ALICE)
        stream, response = open_stream(running, ALICE, session)  # her one request in flight
        status, headers, body = running.request("POST", "/mcp", TOOLS_LIST, bearer(ALICE, session))
        assert status == 429 and headers["retry-after"] == "1" and b"max_requests" in body
        assert used(running, BOB, open_host_session(running, BOB)) == 200
        response.close()  # the host drops its stream
        stream.close()
        assert wait_until(lambda: used(running, ALICE, session) == 200, timeout=10)
    finally:
        stop(running)


@pytest.mark.e2e  # the `llmc serve` process itself: its stderr, signals, exit
def test_revoking_the_last_token_lets_nobody_in(gateway_profile: Path) -> None:
    """After `token revoke` of the only principal every request is 401 (on loopback too), and
    stays so when the profile is then edited back to having no [serve] at all; restarted on the
    revoked profile the gateway refuses to start and says what to do."""
    original = gateway_profile.read_text()
    created = llmc("serve", "-p", str(gateway_profile), "token", "create", "ops")
    assert created.returncode == 0, created.stderr
    token = json.loads(created.stdout)["token"]
    running = start(gateway_profile, process=True)
    try:
        assert running.request("POST", "/mcp", INIT, bearer(token))[0] == 200
        assert running.request("POST", "/mcp", INIT)[0] == 401
        revoked = llmc("serve", "-p", str(gateway_profile), "token", "revoke", "ops")
        assert revoked.returncode == 0 and "no principal is left" in revoked.stderr, revoked.stderr
        assert 'auth = "required"' in gateway_profile.read_text()
        for method, path, body, headers in [
            ("POST", "/mcp", INIT, {}),
            ("POST", "/mcp", INIT, bearer(token)),
            ("GET", "/status", None, {}),
            ("DELETE", "/mcp", None, {}),
        ]:
            status, _, answer = running.request(method, path, body, headers)
            assert status == 401, (method, path, answer)
        assert b"token create" in running.request("POST", "/mcp", INIT)[2]
        revoked_text = gateway_profile.read_text()
        gateway_profile.write_text(original)  # edited by hand: no principals, no [serve] auth
        assert running.request("POST", "/mcp", INIT)[0] == 401
        assert running.request("GET", "/healthz")[0] == 200
    finally:
        stderr = stop(running)
    assert "no principal can reach this gateway now" in stderr and token not in stderr
    gateway_profile.write_text(revoked_text)
    refused = llmc("serve", "-p", str(gateway_profile), "--http", f"127.0.0.1:{free_port()}")
    assert refused.returncode == 3, refused.stderr
    assert "no principal can reach this gateway" in refused.stderr and "token create" in refused.stderr
    assert 'auth = "none"' in refused.stderr and "Traceback" not in refused.stderr


def test_an_empty_principals_table_means_nobody(gateway_profile: Path) -> None:
    gateway_profile.write_text(gateway_profile.read_text() + "\n[serve.principals]\n")
    refused = llmc("serve", "-p", str(gateway_profile), "--http", f"127.0.0.1:{free_port()}")
    assert refused.returncode == 3 and "no principal can reach this gateway" in refused.stderr, refused.stderr


def test_auth_none_is_open_on_loopback_only(gateway_profile: Path) -> None:
    text = gateway_profile.read_text()
    gateway_profile.write_text(text + '\n[serve]\nauth = "none"\n\n[serve.principals]\n')
    running = start(gateway_profile)
    try:
        assert running.request("POST", "/mcp", INIT)[0] == 200
        assert json.loads(running.request("GET", "/status")[2])["auth"] == "none"
    finally:
        stop(running)
    refused = llmc("serve", "-p", str(gateway_profile), "--http", f"0.0.0.0:{free_port()}")
    assert refused.returncode == 2 and 'auth = "none"' in refused.stderr, refused.stderr
    assert "non-loopback" in refused.stderr and refused.stdout == ""


def test_auth_none_beside_principals_is_a_profile_error_and_token_create_closes_it(gateway_profile: Path) -> None:
    text = gateway_profile.read_text()
    gateway_profile.write_text(text + '\n[serve]\nauth = "none"\n\n[serve.principals.ops]\ntoken_env = "X"\n')
    listed = llmc("serve", "-p", str(gateway_profile), "token", "list")
    assert listed.returncode == 3 and "lets everybody in" in listed.stderr, listed.stderr
    gateway_profile.write_text(text + '\n[serve]\nauth = "none"\n')
    created = llmc("serve", "-p", str(gateway_profile), "token", "create", "ops")
    assert created.returncode == 0 and '"required"' in created.stderr, created.stderr
    assert 'auth = "required"' in gateway_profile.read_text()


def test_quotas_must_be_positive(gateway_profile: Path) -> None:
    with_principals(gateway_profile, alice="max_sessions = 0")
    listed = llmc("serve", "-p", str(gateway_profile), "token", "list")
    assert listed.returncode == 3, listed.stderr
    assert "max_sessions" in listed.stderr and "greater than 0" in listed.stderr, listed.stderr
