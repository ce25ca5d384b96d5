"""What real hosts meet at the gateway's HTTP door, served in process: /status shows a principal
only its own sessions and servers (with each host's clientInfo, protocol and principal), the
OAuth discovery paths of a token-only gateway answer as OAuth clients expect, a host that
cancels its own call gets its response ended and its slot back at once, sessions nobody
finishes expire sooner than working ones, and -v says which hosts came and went."""

from __future__ import annotations

import http.client
import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.conftest import audit_records
from tests.gateway.inprocess import InProcess, gateway_in_process
from tests.gateway.test_admission import ALICE, BOB, bearer, with_principals
from tests.gateway.test_http import INIT, read_events
from tests.helpers import wait_until

INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


@pytest.fixture
def principals(gateway_profile: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """alice gets the served profile; bob a profile of his own, with the workspace server only."""
    monkeypatch.setenv("GW_ALICE", ALICE)
    monkeypatch.setenv("GW_BOB", BOB)
    profiles = Path(__import__("os").environ["LLMC_CONFIG_DIR"]) / "profiles"
    profiles.mkdir(parents=True)
    root = gateway_profile.parent / "ws"
    (profiles / "bobs.toml").write_text(
        f'[servers.ws]\nbuiltin = "workspace"\noptions = {{ roots = [{json.dumps(str(root))}] }}\n'
    )
    return with_principals(gateway_profile, alice="max_requests = 2", bob='profile = "bobs"')


def open_session(gateway: InProcess, token: str | None, name: str = "raw") -> str:
    init = {**INIT, "params": {**INIT["params"], "clientInfo": {"name": name, "version": "1.5"}}}  # type: ignore[dict-item]
    status, headers, body = gateway.request("POST", "/mcp", init, bearer(token) if token else {})
    assert status == 200, body
    return headers["mcp-session-id"]


def headers_of(token: str | None, session: str) -> dict[str, str]:
    return bearer(token, session) if token else {"Mcp-Session-Id": session}


def test_status_shows_each_principal_only_its_own(principals: Path) -> None:
    with gateway_in_process(principals) as gateway:
        open_session(gateway, ALICE, "alice-desktop")
        bobs = open_session(gateway, BOB, "bob-cli")
        assert gateway.request("POST", "/mcp", TOOLS_LIST, bearer(BOB, bobs))[0] == 200  # bob's profile loaded
        alice_page = json.loads(gateway.request("GET", "/status", None, bearer(ALICE))[2])
        bob_page = json.loads(gateway.request("GET", "/status", None, bearer(BOB))[2])
    assert alice_page["principal"] == "alice" and alice_page["sessions"] == 1
    assert set(alice_page["profiles"]) == {"gw"} and alice_page["profile"] == "gw"
    [host] = alice_page["hosts"]
    assert host["principal"] == "alice" and host["client"] == {"name": "alice-desktop", "version": "1.5"}
    assert host["protocolVersion"] == "2025-11-25" and host["stage"] == "unstarted"
    assert bob_page["principal"] == "bob" and set(bob_page["profiles"]) == {"bobs"}
    assert [h["client"]["name"] for h in bob_page["hosts"]] == ["bob-cli"] and bob_page["hosts"][0]["stage"] == "listed"
    assert "alice" not in json.dumps(bob_page) and "sdk" not in json.dumps(bob_page)
    assert bobs not in json.dumps(bob_page)  # never a session id: it is all a host needs to use one


@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", "/.well-known/oauth-protected-resource"),
        ("GET", "/.well-known/oauth-protected-resource/mcp"),
        ("GET", "/.well-known/oauth-authorization-server"),
        ("GET", "/.well-known/openid-configuration"),
        ("POST", "/register"),
        ("GET", "/authorize"),
        ("POST", "/token"),
    ],
)
def test_oauth_discovery_on_a_token_only_gateway_is_an_oauth_404(principals: Path, method: str, path: str) -> None:
    """mcp-remote and mcp-cli, refused with 401, look for OAuth here: they get 404 with an OAuth
    error naming static bearer tokens, never a JSON-RPC body they cannot read."""
    with gateway_in_process(principals) as gateway:
        status, headers, body = gateway.request(method, path, {"client_name": "mcp-remote"} if method == "POST" else None)
        other = gateway.request("GET", "/elsewhere")
    page = json.loads(body)
    assert status == 404 and headers["content-type"] == "application/json"
    assert "jsonrpc" not in page and page["error"] == "invalid_request"
    assert "static bearer token" in page["error_description"] and "llmc serve token create" in page["error_description"]
    assert other[0] == 404 and "jsonrpc" in json.loads(other[2])  # any other path: as before


def test_a_host_that_cancels_its_call_gets_its_stream_ended_and_its_slot_back(principals: Path, tmp_path: Path) -> None:
    """alice may have 2 requests in flight: the cancelled call's SSE response ends at once (not
    at the hour-long reply limit) and stops counting, so two more fit."""
    with gateway_in_process(principals) as gateway:
        session = open_session(gateway, ALICE)
        assert gateway.request("POST", "/mcp", INITIALIZED, bearer(ALICE, session))[0] == 202
        conn, response = slow_call(gateway, session, 7)
        read_events(response, b"notifications/progress")  # the upstream is working on it
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "user"}}
        began = time.monotonic()
        assert gateway.request("POST", "/mcp", cancel, bearer(ALICE, session))[0] == 202
        rest = response.read()  # the stream ends: no reply for a cancelled request
        assert time.monotonic() - began < 10 and b'"id": 7' not in rest
        conn.close()
        other, _held = slow_call(gateway, session, 8)  # one slot: the cancelled call gave its own back
        assert gateway.request("POST", "/mcp", TOOLS_LIST, bearer(ALICE, session))[0] == 200  # and the other
        other.close()
        assert wait_until(lambda: any(r.get("outcome") == "cancelled" for r in audit_records(tmp_path)), 30)


def slow_call(gateway: InProcess, session: str, msg_id: int) -> tuple[http.client.HTTPConnection, Any]:
    call = {
        "jsonrpc": "2.0",
        "id": msg_id,
        "method": "tools/call",
        "params": {"name": "sdk.slow", "arguments": {"seconds": 30}, "_meta": {"progressToken": "p"}},
    }
    conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=30)
    headers = {**bearer(ALICE, session), "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    conn.request("POST", "/mcp", body=json.dumps(call), headers=headers)
    response = conn.getresponse()
    assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
    return conn, response


def test_sessions_nobody_finishes_expire_sooner_than_working_ones(gateway_profile: Path) -> None:
    """--idle-timeout 30: a session that never got past initialize ends after 1 s, one that only
    listed after 5 s, one that called a tool keeps its 30 s; -v says why each ended."""
    with gateway_in_process(gateway_profile, idle_seconds=30) as gateway:
        probe = open_session(gateway, None, "probe")
        lister = open_session(gateway, None, "lister")
        worker = open_session(gateway, None, "worker")
        assert gateway.request("POST", "/mcp", TOOLS_LIST, headers_of(None, lister))[0] == 200
        add = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "sdk.add", "arguments": {"a": 1, "b": 2}}}
        assert gateway.request("POST", "/mcp", add, headers_of(None, worker))[0] == 200

        def hosts() -> list[str]:
            return [h["client"]["name"] for h in json.loads(gateway.request("GET", "/status")[2])["hosts"]]

        assert wait_until(lambda: "probe" not in hosts(), 10)
        assert wait_until(lambda: hosts() == ["worker"], 15)
        assert gateway.request("POST", "/mcp", TOOLS_LIST, headers_of(None, probe))[0] == 404
        assert gateway.request("POST", "/mcp", TOOLS_LIST, headers_of(None, worker))[0] == 200
        lines = list(gateway.lines)
    assert any("ended (never got past initialize): client probe 1.5" in line for line in lines), lines
    assert any("ended (idle (listed)): client lister 1.5" in line for line in lines), lines


def test_verbose_says_which_hosts_come_and_go(principals: Path) -> None:
    with gateway_in_process(principals) as gateway:
        session = open_session(gateway, ALICE, "mcp-remote")
        assert gateway.request("DELETE", "/mcp", None, bearer(ALICE, session))[0] == 200
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "modern-host", "version": "3"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        modern = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}
        headers = {**bearer(BOB), "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
        for _ in range(2):
            assert gateway.request("POST", "/mcp", modern, headers)[0] == 200
        lines = list(gateway.lines)
    opened = [line for line in lines if "opened" in line]
    assert len(opened) == 1 and "client mcp-remote 1.5, protocol 2025-11-25, principal alice" in opened[0], lines
    assert any("ended (the host ended it): client mcp-remote 1.5" in line for line in lines), lines
    modern_lines = [line for line in lines if "modern-host" in line]
    assert modern_lines == ["host connected: client modern-host 3, protocol 2026-07-28 (no session), principal bob"]
    assert not any(ALICE in line or BOB in line or session in line for line in lines)  # no secrets
