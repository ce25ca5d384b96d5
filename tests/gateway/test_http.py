"""`llmc serve -p PROFILE --http`: the `mcp` SDK client (both eras) and llmc itself as hosts over
Streamable HTTP; DNS rebinding protection, bearer tokens per principal, principal -> profile,
sessions, limits, health pages."""

from __future__ import annotations

import http.client
import json
import os
import select
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.conftest import audit_records
from tests.gateway.test_stdio import ERAS, accept, run
from tests.helpers import free_port, llmc, llmc_executable, signal_until_exit, wait_until
from tests.processes import gone, live_processes

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}


class Gateway:
    def __init__(self, port: int, proc: subprocess.Popen[str]) -> None:
        self.port, self.proc = port, proc
        self.url = f"http://127.0.0.1:{port}/mcp"

    def request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            data = body if isinstance(body, bytes) else json.dumps(body).encode() if body is not None else None
            all_headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **(headers or {})}
            conn.request(method, path, body=data, headers=all_headers)
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()


def start(
    profile: Path, *extra: str, env: dict[str, str] | None = None, port: int | None = None, process: bool = False
) -> Gateway:
    """The gateway for `profile`: served in this process (inprocess.py) unless `process` or an
    option start_server has no keyword for asks for `llmc serve --http` itself."""
    if not process:
        from tests.gateway.inprocess import options_of, serve_in_process

        options = options_of(extra)
        if options is not None:
            return serve_in_process(profile, env=env, port=port or 0, **options)
    port = port or free_port()
    proc = subprocess.Popen(
        [llmc_executable(), "serve", "-p", str(profile), "--http", f"127.0.0.1:{port}", *extra],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    gateway = Gateway(port, proc)
    for _ in range(240):  # up to a minute on a loaded machine
        if proc.poll() is not None:
            pytest.fail(f"the gateway exited {proc.returncode}: {proc.stderr.read()}")  # type: ignore[union-attr]
        try:
            if gateway.request("GET", "/healthz")[0] == 200:
                return gateway
        except OSError:
            pass
        time.sleep(0.25)
    proc.kill()
    pytest.fail("the gateway did not come up")


def stop(gateway: Gateway) -> str:
    """Stop it as SIGTERM does; what it said on stderr (in process: what it logged)."""
    from tests.gateway.inprocess import InProcess

    if isinstance(gateway, InProcess):
        return gateway.close()
    gateway.proc.terminate()
    _, stderr = gateway.proc.communicate(timeout=30)
    assert gateway.proc.returncode == 0, stderr
    assert "Traceback" not in stderr, stderr
    return stderr


@pytest.fixture
def gateway(gateway_profile: Path) -> Iterator[Gateway]:
    """The gateway served from a thread of the test process (inprocess.py): the same server and
    core as `llmc serve --http`, without a process to start; the tests of the process itself
    (signals, options, start-up) use start()."""
    from tests.gateway.inprocess import gateway_in_process

    with gateway_in_process(gateway_profile) as running:
        yield running


def sdk_host(url: str, mode: str, token: str | None = None, **options: Any) -> Any:
    import httpx2
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp_types import Implementation

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=60))
    return Client(transport, mode=mode, client_info=Implementation(name="http-host", version="2.0"), **options)


@pytest.mark.parametrize("mode, version", ERAS)
def test_sdk_host_over_http(gateway: Gateway, tmp_path: Path, mode: str, version: str) -> None:
    from mcp.shared.exceptions import MCPError

    seen: list[str] = []

    async def work() -> None:
        async with sdk_host(gateway.url, mode, elicitation_callback=accept("accept", seen)) as client:
            assert client.session.protocol_version == version
            names = {t.name for t in (await client.list_tools()).tools}
            assert "sdk.add" in names and "sdk.crash" not in names
            added = await client.call_tool("sdk.add", {"a": 40, "b": 2})
            assert added.structured_content == {"result": 42}
            echoed = await client.call_tool("sdk.echo", {"message": "over http"})  # confirmed by elicitation
            assert echoed.is_error is False and echoed.structured_content == {"result": "over http"}
            with pytest.raises(MCPError, match="Unknown tool"):
                await client.call_tool("sdk.crash", {})
            contents = (await client.read_resource("sdk.test://greeting")).contents
            assert contents[0].text == "hello from a resource"

    run(work)
    assert seen == ['Run sdk.echo with message="over http"?']
    for _ in range(50):  # outcome records reach the disk within a second (decisions before each call)
        records = audit_records(tmp_path)
        if len([r for r in records if r["event"] == "outcome"]) == 3:
            break
        time.sleep(0.1)
    assert {r.get("tool") or r.get("resource") for r in records if r["event"] == "outcome"} == {"add", "echo", "test://greeting"}
    assert all(r["client"]["name"] == "http-host" and r["client"]["transport"] == "http" for r in records)


def test_llmc_is_a_host_over_http(gateway: Gateway) -> None:
    listed = llmc("tools", "list", "--url", gateway.url)
    assert listed.returncode == 0, listed.stderr
    assert "sdk.add" in {t["name"] for t in json.loads(listed.stdout)["tools"]}
    called = llmc("call", "--url", gateway.url, "sdk.add", "a=1", "b=2")
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["structuredContent"] == {"result": 3}


# (Host, Origin, status): a request a browser was tricked into making names another host.
REBINDING = [
    ("evil.example.com", None, 403),
    ("evil.example.com:{port}", "http://evil.example.com:{port}", 403),
    ("localhost:{port}", "http://evil.example.com", 403),
    ("localhost:{port}", "http://localhost:{port}", 200),
    ("127.0.0.1:{port}", None, 200),
    ("[::1]:{port}", "http://[::1]:{port}", 200),
]


@pytest.mark.parametrize("host, origin, status", REBINDING)
def test_dns_rebinding_protection(gateway: Gateway, host: str, origin: str | None, status: int) -> None:
    headers = {"Host": host.format(port=gateway.port)}
    if origin:
        headers["Origin"] = origin.format(port=gateway.port)
    got, _, _ = gateway.request("POST", "/mcp", INIT, headers)
    assert got == status


def test_limits_sessions_and_pages(gateway: Gateway) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=30)
    conn.putrequest("POST", "/mcp")
    conn.putheader("Content-Length", str(4 * 1024 * 1024 + 1))  # refused before a byte of it is read
    conn.endheaders()
    assert conn.getresponse().status == 413
    conn.close()
    status, _, _ = gateway.request("POST", "/mcp", b"{not json")
    assert status == 400
    status, _, _ = gateway.request("POST", "/mcp", b"[" * 1_000_000 + b"]" * 1_000_000)  # RecursionError to parse
    assert status == 400
    status, _, _ = gateway.request("POST", "/mcp", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert status == 400  # neither a session nor a 2026-07-28 _meta
    status, headers, _ = gateway.request("POST", "/mcp", INIT)
    session = headers["mcp-session-id"]
    assert status == 200 and len(session) >= 32
    status, _, body = gateway.request(
        "POST", "/mcp", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, {"Mcp-Session-Id": session}
    )
    assert status == 200 and "sdk.add" in {t["name"] for t in json.loads(body)["result"]["tools"]}
    page = json.loads(gateway.request("GET", "/status")[2])
    assert page["sessions"] == 1 and page["auth"] == "none"
    servers = {s["name"]: s for s in page["profiles"]["gw"]["servers"]}
    assert servers["sdk"]["state"] == "connected" and servers["sdk"]["tools"] > 0
    assert "command" not in json.dumps(page) and "python" not in json.dumps(page)  # no commands, paths or secrets
    assert gateway.request("DELETE", "/mcp", None, {"Mcp-Session-Id": session})[0] == 200
    assert (
        gateway.request("POST", "/mcp", {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, {"Mcp-Session-Id": session})[0]
        == 404
    )
    assert gateway.request("GET", "/mcp")[0] == 405


def raw_exchange(port: int, data: bytes) -> bytes:
    """Send bytes as they are and read the answer until the gateway closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_request_heads_are_parsed_strictly(gateway: Gateway) -> None:
    """Request heads are parsed strictly (llhttp in uvicorn, and protocol.py's limits): well-formed
    ones kept alive; malformed header lines 400, a head past 64 KiB or 100 fields 431."""
    host = b"Host: 127.0.0.1\r\n"
    ok = raw_exchange(gateway.port, b"GET /healthz HTTP/1.1\r\nHost:  127.0.0.1  \r\nConnection: close\r\n\r\n")
    assert ok.startswith(b"HTTP/1.1 200 ") and ok.endswith(b'{"status": "ok"}')
    for head, status in [
        (b"Host : 127.0.0.1\r\n", b"400"),  # whitespace before the colon (RFC 9112 5.1)
        (host + b"X-A: 1\r\n folded\r\n", b"400"),  # obs-fold
        (host + b"no colon here\r\n", b"400"),
        (host + b"Host: evil.example.com\r\n", b"400"),  # two Hosts (RFC 9112 3.2)
        (host + b"X-Long: " + b"a" * 70_000 + b"\r\n", b"431"),
        (host + b"X-Many: 1\r\n" * 101, b"431"),
    ]:
        answer = raw_exchange(gateway.port, b"GET /healthz HTTP/1.1\r\n" + head + b"\r\n")
        assert answer.startswith(b"HTTP/1.1 " + status + b" "), (head[:40], answer[:80])
    assert raw_exchange(gateway.port, b"GET /healthz HTTP/2.0\r\n" + host + b"\r\n").startswith(b"HTTP/1.1 505 ")
    assert raw_exchange(gateway.port, b"GET /healthz HTTP/1.1\r\nHost: evil.example.com\r\nConnection: close\r\n\r\n").startswith(
        b"HTTP/1.1 403 "
    )
    conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=30)  # keep-alive: one connection, two requests
    conn.request("GET", "/healthz")
    assert json.loads(conn.getresponse().read()) == {"status": "ok"}
    kept = conn.sock
    assert kept is not None  # http.client drops the socket of a response that closes the connection
    conn.request("GET", "/healthz")
    assert json.loads(conn.getresponse().read()) == {"status": "ok"} and conn.sock is kept
    conn.close()


def test_environment_secrets_are_masked_in_the_records_of_every_call(gateway_profile: Path, tmp_path: Path) -> None:
    """The gateway reads its environment's secret values once, when it starts: every call's
    audit records still mask them (a 2026-07-28 request answered on the handler's thread)."""
    secret = "s3cr3t-value-4242"
    running = start(gateway_profile, env={"GATEWAY_TEST_API_TOKEN": secret})
    try:
        for n in range(2):
            meta = {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            }
            call = {
                "jsonrpc": "2.0",
                "id": n,
                "method": "tools/call",
                "params": {"name": "sdk.weather", "arguments": {"city": f"{secret} #{n}"}, "_meta": meta},
            }
            status, _, body = running.request(
                "POST",
                "/mcp",
                call,
                {
                    "Accept": "application/json",
                    "MCP-Protocol-Version": "2026-07-28",
                    "Mcp-Method": "tools/call",
                    "Mcp-Name": "sdk.weather",
                },
            )
            assert status == 200 and not json.loads(body)["result"]["isError"], body
    finally:
        stop(running)
    records = [r for r in audit_records(tmp_path) if r.get("tool") == "weather"]
    events = [(r["event"], r.get("decision") or r.get("outcome")) for r in records]
    assert events == [("decision", "allow"), ("outcome", "ok")] * 2
    assert [r["arguments"]["city"] for r in records] == ["*** #0", "*** #0", "*** #1", "*** #1"]
    assert secret not in json.dumps(audit_records(tmp_path))


def test_idle_sessions_expire(gateway_profile: Path) -> None:
    from tests.gateway.inprocess import gateway_in_process

    with gateway_in_process(gateway_profile, idle_seconds=1) as running:
        session = running.request("POST", "/mcp", INIT)[1]["mcp-session-id"]
        for _ in range(100):
            if json.loads(running.request("GET", "/status")[2])["sessions"] == 0:
                break
            time.sleep(0.2)
        assert (
            running.request("POST", "/mcp", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, {"Mcp-Session-Id": session})[0]
            == 404
        )


def test_bearer_tokens_principals_and_their_profiles(gateway_profile: Path, tmp_path: Path) -> None:
    from mcp.shared.exceptions import MCPError

    # principal "ops" (token from `llmc serve token create`) gets the served profile; "ci" (token
    # from the environment) gets a profile that allows sdk.add only.
    config = Path(os.environ["LLMC_CONFIG_DIR"]) / "profiles"
    config.mkdir(parents=True)
    sdk = gateway_profile.read_text().split("[servers.sdk]\n")[1].split("\n\n")[0]
    (config / "ci-only.toml").write_text(
        "[servers.sdk]\n"
        + sdk
        + '\n\n[policy]\ndefault = "deny"\nallow = ["sdk.add"]\n\n[policy.hints."sdk.add"]\nreadOnly = true\n'
    )
    created = llmc("serve", "-p", str(gateway_profile), "token", "create", "ops")
    assert created.returncode == 0, created.stderr
    ops_token = json.loads(created.stdout)["token"]
    assert ops_token not in gateway_profile.read_text()  # only its hash is kept
    with gateway_profile.open("a") as fh:
        fh.write('\n[serve.principals.ci]\ntoken_env = "GW_CI_TOKEN"\nprofile = "ci-only"\n')
    ci_token = "ci-token-0123456789abcdef"
    running = start(gateway_profile, env={"GW_CI_TOKEN": ci_token})
    try:
        for headers, challenge in [
            ({}, 'Bearer realm="llmc"'),
            ({"Authorization": "Bearer wrong-token"}, "invalid_token"),
            ({"Authorization": f"Basic {ops_token}"}, 'Bearer realm="llmc"'),
        ]:
            status, got, _ = running.request("POST", "/mcp", INIT, headers)
            assert status == 401 and challenge in got["www-authenticate"]
        assert running.request("GET", "/status")[0] == 401
        assert running.request("GET", "/healthz")[0] == 200

        async def work() -> None:
            async with sdk_host(running.url, "auto", ops_token) as client:
                assert "sdk.weather" in {t.name for t in (await client.list_tools()).tools}
            async with sdk_host(running.url, "legacy", ci_token) as client:
                assert {t.name for t in (await client.list_tools()).tools} == {"sdk.add"}
                assert (await client.call_tool("sdk.add", {"a": 1, "b": 1})).structured_content == {"result": 2}
                with pytest.raises(MCPError, match="Unknown tool"):
                    await client.call_tool("sdk.weather", {"city": "Oslo"})

        run(work)
        # a session opened with one token cannot be used with another
        session = running.request("POST", "/mcp", INIT, {"Authorization": f"Bearer {ops_token}"})[1]["mcp-session-id"]
        assert (
            running.request(
                "POST",
                "/mcp",
                {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                {"Mcp-Session-Id": session, "Authorization": f"Bearer {ci_token}"},
            )[0]
            == 404
        )
    finally:
        stderr = stop(running)
    assert ops_token not in stderr and ci_token not in stderr
    records = audit_records(tmp_path)
    add = next(r for r in records if r["event"] == "outcome" and r["tool"] == "add")
    assert add["client"]["principal"] == "ci" and add["profile"] == "ci-only"
    denied = next(r for r in records if r["event"] == "decision" and r["tool"] == "weather")
    assert denied["decision"] == "deny" and denied["client"]["principal"] == "ci"


@pytest.mark.e2e  # the `llmc serve` process itself: its stderr, signals, exit
def test_revoked_and_rotated_tokens_count_without_a_restart(gateway_profile: Path) -> None:
    """`token create` (again: rotation) and `token revoke` change what a running gateway accepts
    from the next request on; a profile broken mid-edit keeps the principals it had."""

    def token(name: str) -> str:
        created = llmc("serve", "-p", str(gateway_profile), "token", "create", name)
        assert created.returncode == 0, created.stderr
        return str(json.loads(created.stdout)["token"])

    def status(secret: str) -> int:
        return running.request("POST", "/mcp", INIT, {"Authorization": f"Bearer {secret}"})[0]

    first = token("ops")
    running = start(gateway_profile, process=True)
    try:
        assert status(first) == 200
        second = token("ops")  # rotated: the old token is gone, the new one works
        bot = token("bot")
        assert (status(first), status(second), status(bot)) == (401, 200, 200)
        revoked = llmc("serve", "-p", str(gateway_profile), "token", "revoke", "bot")
        assert revoked.returncode == 0, revoked.stderr
        assert (status(bot), status(second)) == (401, 200)
        good = gateway_profile.read_text()
        gateway_profile.write_text(good + "\n[serve\n")  # broken mid-edit
        assert (status(second), status(bot)) == (200, 401)
        gateway_profile.write_text(good)
        assert status(second) == 200
    finally:
        stderr = stop(running)
    assert "principals not re-read" in stderr and first not in stderr and second not in stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--http", "nonsense"], "expected [HOST:]PORT"),
        (["--http", "0.0.0.0:8765"], "needs inbound authentication"),
    ],
)
def test_bad_http_options(gateway_profile: Path, args: list[str], message: str) -> None:
    proc = llmc("serve", "-p", str(gateway_profile), *args)
    assert proc.returncode == 2 and message in proc.stderr and proc.stdout == ""


def slow_call(gateway: Gateway, seconds: float, session: str | None) -> tuple[http.client.HTTPConnection, Any]:
    """POST sdk.slow with a progress token; the open SSE response, read up to the first progress."""
    meta: dict[str, Any] = {"progressToken": "p"}
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if session:
        headers["Mcp-Session-Id"] = session
    else:  # 2026-07-28: no session, the version in _meta and headers
        meta.update({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}})
        headers.update({"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "sdk.slow"})
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "sdk.slow", "arguments": {"seconds": seconds}, "_meta": meta},
    }
    conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=30)
    conn.request("POST", "/mcp", body=json.dumps(call), headers=headers)
    response = conn.getresponse()
    assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
    return conn, response


def read_events(response: Any, until: bytes) -> list[tuple[str | None, bytes]]:
    """SSE events (id, data) up to and including the first whose data holds `until`."""
    events: list[tuple[str | None, bytes]] = []
    event_id, data = None, b""
    for _ in range(10_000):
        line = response.readline()
        assert line, f"the stream ended before {until!r}: {events}"
        if line.startswith(b"id: "):
            event_id = line[4:].strip().decode()
        elif line.startswith(b"data: "):
            data += line[6:].strip()
        elif line in (b"\n", b"\r\n") and (event_id or data):
            events.append((event_id, data))
            if until in data:
                return events
            event_id, data = None, b""
    raise AssertionError("too many events")


def test_a_dropped_stream_cancels_a_2026_call(gateway: Gateway, tmp_path: Path) -> None:
    conn, response = slow_call(gateway, 30, None)
    read_events(response, b"notifications/progress")  # the upstream is working on it
    response.close()  # the host goes away mid-call: in 2026-07-28 that is a cancel
    conn.close()
    for _ in range(150):
        if any(r.get("outcome") == "cancelled" for r in audit_records(tmp_path)):
            break
        time.sleep(0.2)
    outcome = next(r for r in audit_records(tmp_path) if r["event"] == "outcome")
    assert outcome["outcome"] == "cancelled" and outcome["tool"] == "slow"


def test_a_call_with_nothing_before_its_result_is_answered_with_json(gateway: Gateway) -> None:
    """A host that accepts both gets a quick call's result as one JSON body (nothing had to reach
    it first: no stream to set up); a call still running after a moment gets its SSE stream as
    before, the priming event first (SEP-1699) and the result last."""
    session = gateway.request("POST", "/mcp", INIT)[1]["mcp-session-id"]
    headers = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    add = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "sdk.add", "arguments": {"a": 1, "b": 2}}}
    for _ in range(5):  # the first calls may find the upstream still starting (a busy machine)
        status, seen, body = gateway.request("POST", "/mcp", add, headers)
        assert status == 200
        if seen["content-type"] == "application/json":
            break
    assert seen["content-type"] == "application/json" and json.loads(body)["result"]["content"][0]["text"] == "3"
    slow = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "sdk.slow", "arguments": {"seconds": 1}}}
    status, seen, body = gateway.request("POST", "/mcp", slow, headers)
    assert (status, seen["content-type"]) == (200, "text/event-stream")
    events = [block for block in body.decode().split("\n\n") if block.strip()]
    assert events[0].startswith("id: ") and events[0].split("\n")[0].endswith("-0")
    assert json.loads(events[-1].rpartition("data: ")[2])["result"]["content"][0]["text"] == "slept 1.0"


def test_a_session_resumes_a_dropped_stream_with_last_event_id(gateway: Gateway, tmp_path: Path) -> None:
    """Initialize era: a broken stream is no cancel (2025-11-25 transports); GET with
    Last-Event-ID replays what the host missed and goes on to the result."""
    session = gateway.request("POST", "/mcp", INIT)[1]["mcp-session-id"]
    conn, response = slow_call(gateway, 1.5, session)
    events = read_events(response, b"notifications/progress")
    assert events[0] == (events[0][0], b"") and events[0][0].endswith("-0")  # the priming event (SEP-1699)
    last_id = events[-1][0]
    assert last_id and not last_id.endswith("-0")
    response.close()
    conn.close()
    resume = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=30)
    resume.request("GET", "/mcp", headers={"Accept": "text/event-stream", "Mcp-Session-Id": session, "Last-Event-ID": last_id})
    resumed = resume.getresponse()
    assert resumed.status == 200
    rest = read_events(resumed, b'"id": 7')
    resume.close()
    ids = [event_id for event_id, _ in rest]
    stream, number = last_id.rsplit("-", 1)
    assert ids == [f"{stream}-{n}" for n in range(int(number) + 1, int(number) + 1 + len(ids))]  # nothing twice
    assert json.loads(rest[-1][1])["result"]["content"][0]["text"] == "slept 1.5"
    for _ in range(50):  # the outcome record follows within a second
        if any(r["event"] == "outcome" for r in audit_records(tmp_path)):
            break
        time.sleep(0.2)
    outcome = next(r for r in audit_records(tmp_path) if r["event"] == "outcome")
    assert outcome["outcome"] == "ok" and outcome["tool"] == "slow"


# The official conformance suites' server scenarios that need no purpose-built target server
# (the others call tools by the target's own names, e.g. test_simple_text): (suite, scenario).
CONFORMANCE = [
    (suite, scenario)
    for suite in ("2025-11-25", "2026-07-28")
    for scenario in ("server-initialize", "ping", "logging-set-level", "tools-list", "dns-rebinding-protection")
] + [
    ("2026-07-28", scenario)
    for scenario in ("server-session-lifecycle", "http-header-validation", "caching", "sep-2164-resource-not-found")
]


def warm_up(gateway: Gateway) -> None:
    """A list through the gateway starts its upstreams (the SDK server under bwrap). The suite's
    2026-07-28 client gives each request 10 s; on a loaded CI runner that start alone took longer
    (prompts/list "aborted"), which is the runner's speed, not what the scenario checks."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "warm-up", "version": "1"},
    }
    for method in ("tools/list", "prompts/list", "resources/list"):
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": meta}}
        headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
        status, _, data = gateway.request("POST", "/mcp", body, headers)
        assert status == 200, data


@pytest.mark.e2e  # the official conformance suite
@pytest.mark.parametrize("suite, scenario", CONFORMANCE)
def test_conformance_server_scenarios(gateway: Gateway, tmp_path: Path, suite: str, scenario: str) -> None:
    from tests.helpers import conformance_suite, node_tool

    warm_up(gateway)
    # 127.0.0.1, not localhost: Node may try ::1 first, where the gateway does not listen
    proc = subprocess.run(
        [
            node_tool("node"),
            conformance_suite(suite),
            "server",
            "--url",
            f"http://127.0.0.1:{gateway.port}/mcp",
            "--scenario",
            scenario,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert " 0 failed" in proc.stdout


@pytest.mark.e2e  # the `llmc serve` process itself: its stderr, signals, exit
def test_open_listen_streams_end_with_complete_when_the_gateway_stops(gateway_profile: Path) -> None:
    """2026-07-28 subscriptions/listen over HTTP: when the gateway shuts down (SIGTERM), each open
    stream gets the `complete` result for its request before it closes (subscriptions.mdx,
    Graceful Closure), so the host can tell a clean end from a lost connection."""
    running = start(gateway_profile, process=True)
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    listen = {
        "jsonrpc": "2.0",
        "id": "L1",
        "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": True}, "_meta": meta},
    }
    conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=30)
    try:
        conn.request(
            "POST",
            "/mcp",
            body=json.dumps(listen),
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2026-07-28",
                "Mcp-Method": "subscriptions/listen",
            },
        )
        response = conn.getresponse()
        assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
        read_events(response, b"notifications/subscriptions/acknowledged")
        running.proc.terminate()
        ((_, data),) = read_events(response, b'"complete"')
        assert json.loads(data) == {
            "jsonrpc": "2.0",
            "id": "L1",
            "result": {"resultType": "complete", "_meta": {"io.modelcontextprotocol/subscriptionId": "L1"}},
        }
        assert response.readline() == b""  # then the stream ends
    finally:
        conn.close()
        stop(running)


@pytest.mark.e2e  # the `llmc serve` process itself: its stderr, signals, exit
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_a_storm_of_signals_still_stops_the_gateway_cleanly(gateway_profile: Path, sig: signal.Signals) -> None:
    """The signal again and again until the gateway is gone (a supervisor repeating its stop; one
    lands while the interpreter finalizes, when CPython has put back each signal's default action):
    the first one stops it, the others change nothing, it exits 0 as after one. SIGHUP (the
    terminal it ran in closed) stops it the same way, upstream servers included."""
    running = start(gateway_profile, process=True)
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    status, _, body = running.request(
        "POST",
        "/mcp",
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}},
        {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"},
    )
    assert status == 200 and b"sdk.add" in body, body
    upstreams = [p.pid for p in live_processes() if p.ppid == running.proc.pid]
    assert upstreams  # the SDK server it started for the listing
    assert signal_until_exit(running.proc, sig) == 0
    assert wait_until(lambda: all(gone(pid) for pid in upstreams), 30), "an upstream server outlived the gateway"
    _, stderr = running.proc.communicate(timeout=30)
    assert "Traceback" not in stderr, stderr


PING = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
SMUGGLED = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
FRAMINGS = [  # the server's parser (llhttp) refuses the first four itself, before the app sees a body
    ("chunked beside a length", b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n" % len(PING), (400,)),
    ("chunked alone", b"Transfer-Encoding: chunked\r\n", (400, 501)),
    ("two lengths that differ", b"Content-Length: %d\r\nContent-Length: %d\r\n" % (len(PING), len(PING) + 5), (400,)),
    # RFC 9110 8.6 lets a recipient refuse or collapse repeated lengths that agree; llhttp refuses
    ("one length given twice alike", b"Content-Length: %d\r\nContent-Length: %d\r\n" % (len(PING), len(PING)), (400,)),
    ("a length that is no ASCII number", "Content-Length: ²\r\n".encode("latin-1"), (400,)),
    # no body at all to llhttp: the JSON after the head is a malformed next request (400), or,
    # when the app answers first, 411 and the connection closes
    ("no length", b"", (400, 411)),
]


@pytest.mark.parametrize("what, framing, statuses", FRAMINGS, ids=[f[0] for f in FRAMINGS])
def test_a_body_framed_two_ways_is_refused_and_smuggles_nothing(
    gateway: Gateway, what: str, framing: bytes, statuses: tuple[int, ...]
) -> None:
    """Request smuggling (RFC 9112 6.1, 6.3): a message whose end a proxy in front could read
    differently is refused, the connection closed, and what followed it is never served as a
    request of its own."""
    head = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\n" + framing + b"\r\n"
    )
    answer = raw_exchange(gateway.port, head + PING + SMUGGLED)
    assert answer.startswith(tuple(f"HTTP/1.1 {status} ".encode() for status in statuses)), answer
    assert answer.count(b"HTTP/1.") == 1, answer  # the smuggled GET got no answer


def test_a_post_without_a_length_or_with_chunks_is_refused_by_the_gateway(gateway: Gateway) -> None:
    """What llhttp lets through, the gateway refuses: a POST with no Content-Length (411) or a
    well-formed chunked body (501); the connection closes."""
    head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    assert raw_exchange(gateway.port, head + b"\r\n").startswith(b"HTTP/1.1 411 ")
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(PING), PING)
    assert raw_exchange(gateway.port, head + b"Transfer-Encoding: chunked\r\n\r\n" + chunked).startswith(b"HTTP/1.1 501 ")


TRICKLED = [
    ("the head", b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"X-Slow: 1\r\n"),
    ("one header line", b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", b"a"),
    ("the request line", b"POST /", b"a"),
    ("nothing at all", b"", b""),
    (
        "the body",
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
        b" ",
    ),
]


@pytest.mark.parametrize("what, start_with, trickle", TRICKLED, ids=[t[0] for t in TRICKLED])
def test_a_request_trickled_in_is_cut_off_at_the_request_timeout(
    gateway_profile: Path, what: str, start_with: bytes, trickle: bytes
) -> None:
    """The socket's timeout is per read: a client sending a little every few tenths of a second
    never trips it, and held its connection (and its thread) as long as it liked. The whole
    request must arrive within --request-timeout."""
    running = start(gateway_profile, "--request-timeout", "1")
    try:
        with socket.create_connection(("127.0.0.1", running.port), timeout=30) as sock:
            sock.sendall(start_with)
            cut = False
            for _ in range(100):  # 100 x 0.2 s: 20 s of trickling, unless the gateway hangs up
                try:
                    sock.sendall(trickle)
                except OSError:  # reset: the gateway closed the connection
                    cut = True
                    break
                ready, _, _ = select.select([sock], [], [], 0.2)
                try:
                    if ready and sock.recv(65536) == b"":
                        cut = True
                        break
                except ConnectionResetError:  # closed with bytes of ours unread: a reset
                    cut = True
                    break
            assert cut, "the connection was never closed"
    finally:
        stop(running)


def test_pipelined_requests_are_answered_in_order_and_100_continue_is_honoured(gateway: Gateway) -> None:
    """HTTP/1.1 as clients use it, now uvicorn's: requests pipelined on one connection are each
    answered, in order; a POST that asks `Expect: 100-continue` hears 100 before it sends its body."""
    host = b"Host: 127.0.0.1\r\n"
    two = b"GET /healthz HTTP/1.1\r\n" + host + b"\r\nGET /readyz HTTP/1.1\r\n" + host + b"Connection: close\r\n\r\n"
    answer = raw_exchange(gateway.port, two)
    assert answer.count(b"HTTP/1.1 200 ") == 2 and answer.index(b'"ok"') < answer.index(b'"ready"'), answer
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=30) as sock:
        sock.sendall(
            b"POST /mcp HTTP/1.1\r\n" + host + b"Content-Type: application/json\r\nAccept: application/json\r\n"
            b"Expect: 100-continue\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(PING)
        )
        assert sock.recv(65536).startswith(b"HTTP/1.1 100 ")
        sock.sendall(PING)
        rest = b""
        while chunk := sock.recv(65536):
            rest += chunk
    assert rest.startswith(b"HTTP/1.1 400 ") and b"Mcp-Session-Id" in rest  # an answer to the body it then sent


def test_replies_are_not_held_back_by_nagle(gateway: Gateway) -> None:
    """uvicorn writes a reply's head and body apart; asyncio turns Nagle's algorithm off only for
    sockets whose protocol says TCP, else each reply's body waits ~40 ms for the client's delayed
    ACK. The listening socket (start_server binds it) must say so."""
    running = gateway.running  # type: ignore[attr-defined]
    assert running.sock.proto == socket.IPPROTO_TCP


def test_a_reply_after_the_gateway_stopped_is_dropped_without_a_trace(gateway_profile: Path, capfd: Any) -> None:
    """Stopped (as by SIGTERM) while a call runs longer than the drain waits: the event loop is
    gone by the time the call's worker thread has its reply (the upstream stopped under it); the
    reply has nobody to go to and is dropped quietly, not with a trace on stderr."""
    import threading

    gateway = start(gateway_profile)
    session = gateway.request("POST", "/mcp", INIT)[1]["mcp-session-id"]
    conn, _ = slow_call(gateway, 30, session)
    stop(gateway)
    conn.close()
    for _ in range(200):  # the worker threads end once their request has
        if not any(t.name == "llmc-gateway" and t.is_alive() for t in threading.enumerate()):
            break
        time.sleep(0.1)
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err and "Event loop is closed" not in captured.err, captured.err
