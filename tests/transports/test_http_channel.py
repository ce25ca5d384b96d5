"""HttpChannel gives each request in flight its own httpx2 client (one connection each, so the
pool never probes a crowd of idle sockets per request); what the shared client used to give the
whole channel must still be the channel's: cookies, and every connection closed with it. A real
HTTP server on loopback (the standard library's), no mocks."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from llmc_cli.errors import ConnectionFailed
from llmc_cli.mcp.transports.http_channel import MAX_IDLE_CLIENTS, HttpChannel
from tests.helpers import free_port, serving


class Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[str | None]  # the Cookie header of each request, in order
    peers: set[int]  # client ports: one per connection

    def do_GET(self) -> None:
        self.seen.append(self.headers.get("Cookie"))
        self.peers.add(self.client_address[1])
        self.send_response(200)
        if self.path == "/login":  # what a load balancer's affinity does
            self.send_header("Set-Cookie", "affinity=replica-2; Path=/")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    with serving(type("Handler", (Recorder,), {"seen": [], "peers": set()})) as httpd:
        yield httpd


def url(httpd: ThreadingHTTPServer, path: str) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}{path}"


def test_a_cookie_set_on_one_request_goes_with_every_later_one(server: ThreadingHTTPServer) -> None:
    """The affinity cookie arrives on a response still open (its client is busy), so the next
    request runs on another client: it must carry the cookie all the same, as must a third once
    both are back."""
    channel = HttpChannel(url(server, "/mcp"), None, timeout=10, auth=None, connect_timeout=5)
    try:
        first = channel.request("GET", url(server, "/login"), {})
        second = channel.request("GET", url(server, "/mcp"), {})  # `first` still open: another client
        assert channel.read_body(second) == b"ok" and channel.read_body(first) == b"ok"
        assert channel.read_body(channel.request("GET", url(server, "/mcp"), {})) == b"ok"
    finally:
        channel.close_client()
    assert server.RequestHandlerClass.seen == [None, "affinity=replica-2", "affinity=replica-2"]  # type: ignore[attr-defined]
    assert len(server.RequestHandlerClass.peers) == 2  # type: ignore[attr-defined]  # two clients, connections reused


def test_clients_are_reused_and_the_idle_ones_bounded(server: ThreadingHTTPServer) -> None:
    """Many requests in flight at once open as many connections; once they are done at most
    MAX_IDLE_CLIENTS stay open for reuse, and a later request reuses one instead of connecting."""
    channel = HttpChannel(url(server, "/mcp"), None, timeout=10, auth=None, connect_timeout=5)
    try:
        many = MAX_IDLE_CLIENTS + 5
        open_responses = [channel.request("GET", url(server, "/mcp"), {}) for _ in range(many)]
        for response in open_responses:
            channel.read_body(response)
        assert len(server.RequestHandlerClass.peers) == many  # type: ignore[attr-defined]
        assert len(channel._idle) == MAX_IDLE_CLIENTS and len(channel._clients) == MAX_IDLE_CLIENTS
        channel.read_body(channel.request("GET", url(server, "/mcp"), {}))
        assert len(server.RequestHandlerClass.peers) == many  # type: ignore[attr-defined]  # no new connection
    finally:
        channel.close_client()
    assert not channel._clients and not channel._idle and not channel._leases


def test_a_request_that_fails_gives_its_client_back() -> None:
    port = free_port()  # nothing listens there
    channel = HttpChannel(f"http://127.0.0.1:{port}/mcp", None, timeout=5, auth=None, connect_timeout=2)
    try:
        for _ in range(3):
            with pytest.raises(ConnectionFailed):
                channel.request("GET", f"http://127.0.0.1:{port}/mcp", {})
        assert not channel._leases and len(channel._clients) == 1  # the one client, reused each time
    finally:
        channel.close_client()
