"""HTTP sessions that outlive one invocation: a legacy Streamable HTTP server's Mcp-Session-Id
is remembered in the state directory, the next `llmc` continues that session (the server's
per-session state is still there), a 404 starts a new one with a warning, and `llmc session
forget` ends it. The server is the SDK test server with `--legacy`: remember/recall keep values
per session."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import stat
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2
import pytest

from llmc_cli.mcp.client import connect
from llmc_cli.model import ServerSpec
from llmc_cli.store import client_stores
from tests.helpers import PEERS, free_port, llmc
from tests.transports.conftest import http_server

pytestmark = pytest.mark.usefixtures("isolated_dirs")


def remembered(state: os.PathLike[str] | str) -> dict:
    with open(os.path.join(state, "servers.json"), encoding="utf-8") as fh:
        return json.load(fh)


def session_id(url: str) -> str:
    return remembered(os.environ["LLMC_STATE_DIR"])[ServerSpec(name="s", url=url).cache_key()]["session"]["id"]


def call(url: str, tool: str, *pairs: str):
    return llmc("call", tool, *pairs, "--url", url, "--yes", timeout=60)


def test_the_next_invocation_continues_the_session(sdk_legacy):
    assert call(sdk_legacy, "remember", "key=colour", "value=teal").returncode == 0
    first = session_id(sdk_legacy)
    proc = call(sdk_legacy, "recall", "key=colour")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["content"][0]["text"] == "teal" and "warnings" not in out
    assert session_id(sdk_legacy) == first
    # A bearer token: private file, never on stdout or stderr.
    path = os.path.join(os.environ["LLMC_STATE_DIR"], "servers.json")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert first not in proc.stdout + proc.stderr


SLOW_404_SECONDS = 2.5  # longer than the transport waits for a request's reply before returning


@contextlib.contextmanager
def slow_404_proxy(upstream_port: int) -> Iterator[int]:
    """A reverse proxy that answers a POST's 404 only after SLOW_404_SECONDS (a slow server or
    network), passes everything else through, and offers no standalone GET stream."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            self._forward("POST")

        def do_DELETE(self) -> None:
            self._forward("DELETE")

        def _forward(self, method: str) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
            conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=30)
            try:
                conn.request(method, self.path, body=body, headers=headers)
                reply = conn.getresponse()
                data = reply.read()  # a POST's SSE reply ends with the answer: whole is fine here
                if reply.status == 404:
                    threading.Event().wait(SLOW_404_SECONDS)
                self.send_response(reply.status)
                for k, v in reply.getheaders():
                    if k.lower() not in ("transfer-encoding", "content-length", "connection", "date", "server"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            finally:
                conn.close()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.mark.parametrize("slow", [False, True], ids=["prompt-404", "slow-404"])
def test_a_session_the_server_lost_is_replaced_and_the_caller_is_told(tmp_path, slow):
    port = free_port()
    argv = [sys.executable, str(PEERS / "sdk_server.py"), "streamable-http", "--port", str(port), "--legacy"]
    with contextlib.ExitStack() as stack:
        url = f"http://127.0.0.1:{stack.enter_context(slow_404_proxy(port)) if slow else port}/mcp"
        with http_server(argv, port):
            assert call(url, "remember", "key=k", "value=v").returncode == 0
            old = session_id(url)
        stack.enter_context(http_server(argv, port))  # a restarted server knows no sessions: 404
        proc = call(url, "recall", "key=k")
        assert proc.returncode == 1  # the value is gone: a tool error
        out = json.loads(proc.stdout)
        assert out["isError"] and "nothing remembered" in out["content"][0]["text"]
        assert len(out["warnings"]) == 1 and "state kept by the server" in out["warnings"][0]
        assert proc.stderr.count("llmc: warning:") == 1
        new = session_id(url)
        assert new != old
        # The new session is the one remembered: the next call continues it, without a warning.
        assert call(url, "remember", "key=k", "value=w").returncode == 0
        proc = call(url, "recall", "key=k")
        assert json.loads(proc.stdout)["content"][0]["text"] == "w" and "warning" not in proc.stderr
        assert session_id(url) == new


def test_forget_ends_the_session_at_the_server(sdk_legacy):
    assert call(sdk_legacy, "remember", "key=a", "value=1").returncode == 0
    old = session_id(sdk_legacy)
    proc = llmc("session", "forget", "--url", sdk_legacy)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(r["url"], r["forgotten"]) for r in rows] == [(sdk_legacy, True)]
    assert old not in proc.stdout and rows[0]["session"].startswith(old[:6])
    entry = remembered(os.environ["LLMC_STATE_DIR"])[ServerSpec(name="s", url=sdk_legacy).cache_key()]
    assert "session" not in entry and entry["era"] == "legacy"  # the era is still known
    # The server was told (DELETE): the old id is unknown to it now.
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    reply = httpx2.post(
        sdk_legacy,
        json=ping,
        timeout=10,
        headers={"Mcp-Session-Id": old, "MCP-Protocol-Version": "2025-11-25", "Accept": "application/json, text/event-stream"},
    )
    assert reply.status_code == 404
    # The next invocation starts afresh, without a warning: forgetting was the user's choice.
    proc = call(sdk_legacy, "recall", "key=a")
    assert proc.returncode == 1 and "warning" not in proc.stderr
    assert session_id(sdk_legacy) != old


def test_forget_by_profile_server_leaves_the_others(sdk_legacy, tmp_path):
    port = free_port()
    other = f"http://127.0.0.1:{port}/mcp"
    argv = [sys.executable, str(PEERS / "sdk_server.py"), "streamable-http", "--port", str(port), "--legacy"]
    assert llmc("servers", "add", "mem", "--url", sdk_legacy).returncode == 0
    with http_server(argv, port):
        assert llmc("call", "mem.remember", "key=x", "value=1", "--yes").returncode == 0
        assert call(other, "remember", "key=y", "value=2").returncode == 0
        proc = llmc("session", "forget", "-s", "mem")
        assert proc.returncode == 0, proc.stderr
        assert [json.loads(line)["server"] for line in proc.stdout.splitlines()] == ["mem"]
        assert json.loads(call(other, "recall", "key=y").stdout)["content"][0]["text"] == "2"
        proc = llmc("session", "forget")  # all that are left
        assert [json.loads(line)["url"] for line in proc.stdout.splitlines()] == [other]
        assert llmc("session", "forget").stdout == ""  # nothing left to forget


def test_sessionless_servers_remember_nothing(sdk_stateful, sdk_stateless):
    for url in (sdk_stateful, sdk_stateless):
        assert call(url, "echo", "message=hi").returncode == 0
        assert "session" not in remembered(os.environ["LLMC_STATE_DIR"])[ServerSpec(name="s", url=url).cache_key()]


def test_a_session_keeper_holds_one_http_session_for_every_caller(sdk_legacy):
    assert llmc("servers", "add", "mem", "--url", sdk_legacy).returncode == 0
    started = llmc("session", "start", "web", "-s", "mem")
    try:
        assert started.returncode == 0, started.stderr
        assert llmc("call", "mem.remember", "key=shell", "value=zsh", "--session", "web", "--yes").returncode == 0
        proc = llmc("call", "mem.recall", "key=shell", "--yes", env={"LLMC_SESSION": "web"})
        assert json.loads(proc.stdout)["content"][0]["text"] == "zsh"
    finally:
        llmc("session", "stop", "--all")


def test_the_client_api_resumes_without_a_handshake(sdk_legacy):
    spec = ServerSpec("mem", url=sdk_legacy, timeout=20)
    with connect(spec, stores=client_stores()) as first:
        first.call_tool("remember", {"key": "k", "value": "api"})
        sid = first.transport.session_id
    with connect(spec, stores=client_stores()) as second:
        assert (second.era, second.transport.session_id) == ("legacy", sid)
        assert second.server_info["name"] == "llmc-test-server"
        assert second.call_tool("recall", {"key": "k"})["content"][0]["text"] == "api"
