"""Upstreams that keep state are kept per principal: its initialize-era HTTP sessions and its
2026-07-28 requests share one process of a stdio server and one session of an initialize-era
HTTP server, which another principal never shares; a server marked `per_session` gets one for
each host session; a stateless upstream's one connection serves them all. The upstream is the
`mcp` SDK test server, whose remember/recall tools keep notes per connection (its process over
stdio, its Mcp-Session-Id over HTTP)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.test_http import INIT, Gateway, start, stop
from tests.helpers import PEERS, free_port

MODERN = "2026-07-28"
PROFILE = """\
[servers.sdk]
command = {python}
args = [{server}]
sandbox = "bwrap"  # a gateway with principals starts no unsandboxed stdio server

[servers.own]
command = {python}
args = [{server}]
per_session = true
sandbox = "none"  # routing is tested here, confinement in tests/sandbox; a gateway with principals needs it said

[servers.remote]
url = "http://127.0.0.1:{stateful}/mcp"

[servers.remote_own]
url = "http://127.0.0.1:{stateful}/mcp"
per_session = true

[servers.shared]
url = "http://127.0.0.1:{stateless}/mcp"

[policy.hints]
"sdk.remember" = {{ readOnly = true }}
"sdk.recall" = {{ readOnly = true }}
"own.remember" = {{ readOnly = true }}
"own.recall" = {{ readOnly = true }}
"remote.remember" = {{ readOnly = true }}
"remote.recall" = {{ readOnly = true }}
"remote_own.remember" = {{ readOnly = true }}
"remote_own.recall" = {{ readOnly = true }}
"shared.remember" = {{ readOnly = true }}
"shared.recall" = {{ readOnly = true }}

[serve.principals.alice]
token_env = "GW_ALICE"

[serve.principals.bob]
token_env = "GW_BOB"
"""
TOKENS = {"alice": "alice-token-0123456789abcdef", "bob": "bob-token-0123456789abcdef"}


def _sdk_http(port: int, *flags: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, str(PEERS / "sdk_server.py"), "streamable-http", "--port", str(port), *flags],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(120):  # up to half a minute on a loaded machine
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.25)
    proc.kill()
    pytest.fail("the SDK test server did not come up")


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    stateful, stateless = free_port(), free_port()
    # --legacy: an initialize-era server, sessions by Mcp-Session-Id; --stateless: no sessions
    upstreams = [_sdk_http(stateful, "--legacy"), _sdk_http(stateless, "--stateless", "--json")]
    profile = tmp_path / "stateful.toml"
    profile.write_text(
        PROFILE.format(
            python=json.dumps(sys.executable),
            server=json.dumps(str(PEERS / "sdk_server.py")),
            stateful=stateful,
            stateless=stateless,
        )
    )
    running = start(profile, env={"GW_ALICE": TOKENS["alice"], "GW_BOB": TOKENS["bob"]})
    try:
        yield running
    finally:
        stop(running)
        for proc in upstreams:
            proc.terminate()
            proc.wait(timeout=30)


def _auth(principal: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[principal]}", "Accept": "application/json"}


class HttpHost:
    """An initialize-era host session, spoken in plain HTTP."""

    def __init__(self, gateway: Gateway, principal: str) -> None:
        self.gateway, self.headers = gateway, _auth(principal)
        status, headers, _ = gateway.request("POST", "/mcp", INIT, self.headers)
        assert status == 200
        self.headers["Mcp-Session-Id"] = headers["mcp-session-id"]
        status, _, _ = gateway.request("POST", "/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"}, self.headers)
        assert status == 202

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
        status, _, data = self.gateway.request("POST", "/mcp", body, self.headers)
        assert status == 200, data
        return json.loads(data)["result"]

    def end(self) -> None:
        assert self.gateway.request("DELETE", "/mcp", None, self.headers)[0] == 200


def modern_call(gateway: Gateway, principal: str, tool: str, **arguments: Any) -> dict[str, Any]:
    """A 2026-07-28 request: no session, everything it needs in its _meta and headers."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": principal, "version": "1"},
    }
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": tool, "arguments": arguments, "_meta": meta}}
    headers = {**_auth(principal), "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": tool}
    status, _, data = gateway.request("POST", "/mcp", body, headers)
    assert status == 200, data
    return json.loads(data)["result"]


def _text(result: dict[str, Any]) -> tuple[bool, str]:
    return bool(result.get("isError")), result["content"][0]["text"]


@pytest.mark.parametrize("server", ["sdk", "remote"])
def test_a_principals_host_sessions_share_its_stateful_upstream(gateway: Gateway, server: str) -> None:
    a, b = HttpHost(gateway, "alice"), HttpHost(gateway, "alice")  # one principal, two host sessions
    assert _text(a.call(f"{server}.remember", key="k", value="from A")) == (False, "remembered k")
    assert _text(b.call(f"{server}.recall", key="k")) == (False, "from A")  # the same process / session
    # another principal never shares it
    missed, text = _text(HttpHost(gateway, "bob").call(f"{server}.recall", key="k"))
    assert missed and "nothing remembered" in text
    a.end()
    # a session that ends leaves its principal's upstreams to its other sessions
    assert _text(b.call(f"{server}.recall", key="k")) == (False, "from A")
    b.end()


@pytest.mark.parametrize("server", ["own", "remote_own"])
def test_a_per_session_server_keeps_one_per_host_session(gateway: Gateway, server: str) -> None:
    a, b = HttpHost(gateway, "alice"), HttpHost(gateway, "alice")  # one principal, two host sessions
    assert _text(a.call(f"{server}.remember", key="k", value="from A")) == (False, "remembered k")
    assert _text(a.call(f"{server}.recall", key="k")) == (False, "from A")
    # host B has its own process / upstream session: A's note is not there
    missed, text = _text(b.call(f"{server}.recall", key="k"))
    assert missed and "nothing remembered" in text
    assert _text(b.call(f"{server}.remember", key="k", value="from B")) == (False, "remembered k")
    assert _text(a.call(f"{server}.recall", key="k")) == (False, "from A")
    a.end()
    # a session that ends takes its upstreams with it; B's go on
    assert _text(b.call(f"{server}.recall", key="k")) == (False, "from B")
    b.end()


def test_a_stateless_upstream_is_shared(gateway: Gateway) -> None:
    """The stateless SDK server keeps its notes per process: one connection serves every host."""
    a, b = HttpHost(gateway, "alice"), HttpHost(gateway, "bob")
    assert _text(a.call("shared.remember", key="s", value="for all"))[0] is False
    assert _text(b.call("shared.recall", key="s")) == (False, "for all")
    assert _text(modern_call(gateway, "bob", "shared.recall", key="s")) == (False, "for all")


def test_2026_requests_keep_stateful_upstreams_per_principal(gateway: Gateway) -> None:
    assert _text(modern_call(gateway, "alice", "sdk.remember", key="p", value="alice's"))[0] is False
    assert _text(modern_call(gateway, "alice", "sdk.recall", key="p")) == (False, "alice's")  # a later request
    missed, text = _text(modern_call(gateway, "bob", "sdk.recall", key="p"))
    assert missed and "nothing remembered" in text
    # an initialize-era session of the same principal shares it (not with a per_session server)
    session = HttpHost(gateway, "alice")
    assert _text(session.call("sdk.recall", key="p")) == (False, "alice's")
    assert _text(modern_call(gateway, "alice", "own.remember", key="q", value="alice's"))[0] is False
    missed, text = _text(session.call("own.recall", key="q"))
    assert missed and "nothing remembered" in text
