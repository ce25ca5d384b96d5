"""The wire under HttpChannel (llmc_cli/mcp/transports/http11.py: httpx2 over a socket and llhttp)
against servers that behave and servers that do not: keep-alive reuse, a connection the server
closed while idle, replies cut short or not read whole, framing a client must refuse (lengths,
codings, chunk sizes, folds, endless trailers), interim replies, streamed events, a stop from
another thread, TLS verified against a CA from the environment, and a proxy from the environment.
Real sockets on loopback.

Why the layer exists (its CPU per request against httpx2's own transport and http.client) is
measured by bench/http_wire_bench.py; the gateway's throughput by bench/gateway_ab.py.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from llmc_cli.errors import ConnectionFailed, TimeoutExpired
from llmc_cli.mcp.transports.http_channel import HttpChannel, proxied
from tests.helpers import serving

BODY = b'{"jsonrpc":"2.0","id":1,"result":{}}'
REQUEST = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'


def read_request(conn: socket.socket) -> bytes | None:
    """One request's head and body off `conn`; None at end of input."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return head


def reply(body: bytes = BODY, *, extra: bytes = b"", length: int | None = None) -> bytes:
    size = len(body) if length is None else length
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n" % (size, extra)) + body


class RawServer:
    """Accepts connections on loopback and hands each to `serve(conn, number)` on its own thread;
    counts connections and requests."""

    def __init__(self, serve: Callable[[RawServer, socket.socket, int], None]) -> None:
        self.serve = serve
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.requests = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            conn.settimeout(10)
            threading.Thread(target=self._serve, args=(conn, self.connections), daemon=True).start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        with conn:
            try:
                self.serve(self, conn, number)
            except OSError:
                pass

    def next_request(self, conn: socket.socket) -> bool:
        if read_request(conn) is None:
            return False
        self.requests += 1
        return True

    def close(self) -> None:
        self.stop.set()
        self.listener.close()
        self.thread.join(5)


@pytest.fixture
def servers() -> Iterator[Callable[[Callable[[RawServer, socket.socket, int], None]], RawServer]]:
    started: list[RawServer] = []

    def start(serve: Callable[[RawServer, socket.socket, int], None]) -> RawServer:
        started.append(RawServer(serve))
        return started[-1]

    yield start
    for server in started:
        server.close()


def channel(url: str, timeout: float = 10) -> HttpChannel:
    return HttpChannel(url, None, timeout=timeout, auth=None, connect_timeout=5)


def post(ch: HttpChannel, body: bytes = REQUEST) -> bytes:
    response = ch.request("POST", ch.url, {"Content-Type": "application/json"}, body=body)
    return ch.read_message(response)


def keep_alive(server: RawServer, conn: socket.socket, number: int) -> None:
    while server.next_request(conn):
        conn.sendall(reply())


def test_sequential_requests_share_one_connection(servers: Any) -> None:
    server = servers(keep_alive)
    ch = channel(server.url)
    try:
        assert [post(ch) for _ in range(5)] == [BODY] * 5
    finally:
        ch.close_client()
    assert (server.connections, server.requests) == (1, 5)


def test_a_connection_the_server_closed_while_idle_is_not_reused(servers: Any) -> None:
    """The server closes each connection after one reply while advertising keep-alive. Sending
    the next request into it would lose the request (a POST is not retried: a tools/call must not
    run twice), so the closed connection is noticed before it is used."""

    def one_then_close(server: RawServer, conn: socket.socket, number: int) -> None:
        if server.next_request(conn):
            conn.sendall(reply())

    server = servers(one_then_close)
    ch = channel(server.url)
    try:
        for _ in range(4):
            assert post(ch) == BODY
            time.sleep(0.05)  # the server's FIN arrives while the connection is idle
    finally:
        ch.close_client()
    assert (server.connections, server.requests) == (4, 4)


def test_connection_close_in_the_reply_opens_a_new_connection(servers: Any) -> None:
    def close_each(server: RawServer, conn: socket.socket, number: int) -> None:
        if server.next_request(conn):
            conn.sendall(reply(extra=b"Connection: close\r\n"))
            time.sleep(0.5)  # still open: only the header says it will close

    server = servers(close_each)
    ch = channel(server.url)
    try:
        assert [post(ch) for _ in range(3)] == [BODY] * 3
    finally:
        ch.close_client()
    assert (server.connections, server.requests) == (3, 3)


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_reply_cut_short_is_an_error_not_a_shorter_reply(servers: Any, framing: str) -> None:
    def cut(server: RawServer, conn: socket.socket, number: int) -> None:
        if server.next_request(conn):
            if framing == "chunked":
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n" % (len(BODY), BODY)
                )
            else:
                conn.sendall(reply(length=len(BODY) + 100))
            conn.shutdown(socket.SHUT_WR)

    server = servers(cut)
    ch = channel(server.url)
    try:
        with pytest.raises(ConnectionFailed, match="reply cut off"):
            post(ch)
    finally:
        ch.close_client()


def test_a_reply_not_read_whole_is_not_taken_for_the_next(servers: Any) -> None:
    """Only the first bytes of a long reply are read (an error body); the rest must not be
    read as the next request's reply."""
    long = b"x" * 200_000

    def replies(server: RawServer, conn: socket.socket, number: int) -> None:
        while server.next_request(conn):
            conn.sendall(reply(long if server.requests == 1 else BODY))

    server = servers(replies)
    ch = channel(server.url)
    try:
        first = ch.request("POST", ch.url, {}, body=REQUEST)
        assert ch.read_body(first, 10) == b"x" * 10
        assert post(ch) == BODY
    finally:
        ch.close_client()
    assert server.connections == 2


def test_chunked_events_arrive_as_they_are_sent(servers: Any) -> None:
    """The second event is sent only once the client has the first: a transport that waited for
    the whole body would hang here."""
    got_first = threading.Event()

    def stream(server: RawServer, conn: socket.socket, number: int) -> None:
        if not server.next_request(conn):
            return
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        for data in (b"data: one\n\n", b"data: two\n\n"):
            conn.sendall(b"%x\r\n%s\r\n" % (len(data), data))
            got_first.wait(10)
        conn.sendall(b"0\r\n\r\n")

    server = servers(stream)
    ch = channel(server.url)
    try:
        response = ch.request("POST", ch.url, {}, body=REQUEST)
        seen = []
        for event in ch.read_events(response):
            seen.append(event.data)
            got_first.set()
        assert seen == ["one", "two"]
    finally:
        ch.close_client()


def test_stop_all_wakes_a_read_blocked_on_a_silent_stream(servers: Any) -> None:
    def silent(server: RawServer, conn: socket.socket, number: int) -> None:
        if server.next_request(conn):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
            server.stop.wait(10)

    server = servers(silent)
    ch = channel(server.url)
    response = ch.request("GET", ch.url, {}, read_timeout=None)
    ended = threading.Event()

    def read() -> None:
        for _ in ch.read_events(response):
            pass
        ended.set()

    threading.Thread(target=read, daemon=True).start()
    time.sleep(0.2)
    assert not ended.is_set()
    ch.stop_all()
    assert ended.wait(5)
    ch.close_client()


@pytest.mark.parametrize(
    "answer",
    [
        b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 200 + b"\r\n",
        b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70_000 + b"\r\n\r\n",
    ],
    ids=["not-http", "too-many-headers", "header-line-too-long"],
)
def test_a_reply_that_is_not_http_is_a_connection_failure(servers: Any, answer: bytes) -> None:
    def lie(server: RawServer, conn: socket.socket, number: int) -> None:
        if server.next_request(conn):
            conn.sendall(answer)

    server = servers(lie)
    ch = channel(server.url)
    try:
        with pytest.raises(ConnectionFailed, match="cannot reach"):
            post(ch)
    finally:
        ch.close_client()


def test_a_server_that_never_answers_times_out(servers: Any) -> None:
    def mute(server: RawServer, conn: socket.socket, number: int) -> None:
        server.next_request(conn)
        server.stop.wait(10)

    server = servers(mute)
    ch = channel(server.url, timeout=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutExpired):
            post(ch)
    finally:
        ch.close_client()
    assert time.monotonic() - started < 5


def test_a_gzip_reply_is_decoded(servers: Any) -> None:
    import gzip

    def gzipped(server: RawServer, conn: socket.socket, number: int) -> None:
        while server.next_request(conn):
            conn.sendall(reply(gzip.compress(BODY), extra=b"Content-Encoding: gzip\r\n"))

    server = servers(gzipped)
    ch = channel(server.url)
    try:
        assert post(ch) == BODY
    finally:
        ch.close_client()


class Answer(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    targets: list[str]  # the request target of each request: absolute-form when sent to a proxy
    peers: set[int]  # client ports: one per connection

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.targets.append(self.path)
        self.peers.add(self.client_address[1])
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[ThreadingHTTPServer]:
    with serving(type("Handler", (Answer,), {"targets": [], "peers": set()})) as httpd:
        yield httpd


def self_signed(tmp: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made here (no CA in the system knows it)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "llmc test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp / "cert.pem", tmp / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


def test_https_is_verified_against_the_ca_the_environment_names(
    http_server: ThreadingHTTPServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert_file, key_file = self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    http_server.socket = context.wrap_socket(http_server.socket, server_side=True)
    url = f"https://127.0.0.1:{http_server.server_address[1]}/mcp"

    untrusted = channel(url)
    with pytest.raises(ConnectionFailed, match="CERTIFICATE_VERIFY_FAILED"):
        post(untrusted)
    untrusted.close_client()

    monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))
    trusted = channel(url)
    try:
        assert [post(trusted) for _ in range(3)] == [BODY] * 3
    finally:
        trusted.close_client()
    assert len(http_server.RequestHandlerClass.peers) == 1  # type: ignore[attr-defined]  # one handshake, kept alive


def test_a_proxy_from_the_environment_is_used(http_server: ThreadingHTTPServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP_PROXY names the test server as the proxy for an upstream that does not exist: the
    request reaches the proxy in absolute form. NO_PROXY exempts a host: then no proxy."""
    proxy = f"http://127.0.0.1:{http_server.server_address[1]}"
    upstream = "http://upstream.invalid:9/mcp"
    monkeypatch.setenv("HTTP_PROXY", proxy)
    monkeypatch.delenv("http_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert proxied(upstream)
    ch = channel(upstream)
    try:
        assert post(ch) == BODY
    finally:
        ch.close_client()
    assert http_server.RequestHandlerClass.targets == [upstream]  # type: ignore[attr-defined]

    monkeypatch.setenv("NO_PROXY", "localhost,.invalid")
    assert not proxied(upstream)
    assert not proxied("https://127.0.0.1:1/mcp")  # HTTP_PROXY is for http:// only


def test_interim_replies_before_the_reply_are_skipped(servers: Any) -> None:
    """RFC 9110 15.2: a client must parse 1xx replies it did not ask for (103 Early Hints from a
    CDN, 102 Processing); the reply is what follows. A server sending nothing but interim replies
    is refused, not waited on."""

    def early_hints(server: RawServer, conn: socket.socket, number: int) -> None:
        while server.next_request(conn):
            if server.requests == 1:
                conn.sendall(
                    b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
                    b"HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n" + reply()
                )
            else:
                conn.sendall(b"HTTP/1.1 103 Early Hints\r\n\r\n" * 100)

    server = servers(early_hints)
    ch = channel(server.url)
    try:
        assert post(ch) == BODY
        with pytest.raises(ConnectionFailed, match="interim"):
            post(ch)
    finally:
        ch.close_client()


def test_a_reply_sent_before_the_request_was_read_whole_is_read(servers: Any) -> None:
    """A server refusing a body too large answers after the head and closes: the request's send
    fails (the peer reset the connection), and the reply that explains it is read all the same."""

    def too_large(server: RawServer, conn: socket.socket, number: int) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(65536)
        server.requests += 1
        conn.sendall(b"HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Length: 9\r\n\r\ntoo large")

    server = servers(too_large)
    ch = channel(server.url)
    try:
        for _ in range(3):
            response = ch.request("POST", ch.url, {}, body=b"x" * 8_000_000)
            assert (response.status_code, ch.read_body(response)) == (413, b"too large")
    finally:
        ch.close_client()
    assert server.connections == server.requests == 3


@pytest.mark.parametrize(
    "lengths",
    [
        b"Content-Length: 5\r\nContent-Length: 37\r\n",
        b"Content-Length: 37, 5\r\n",
        b"Content-Length: abc\r\n",
        b"Content-Length: +37\r\n",
        b"Content-Length: 3_7\r\n",
        b"Content-Length: -1\r\n",
        # RFC 9110 8.6 lets a recipient refuse or collapse lengths that agree; llhttp refuses
        b"Content-Length: %d\r\nContent-Length: %d\r\n" % (len(BODY), len(BODY)),
        b"Content-Length: %d, %d\r\n" % (len(BODY), len(BODY)),
    ],
    ids=[
        "two-lengths",
        "a-list-that-differs",
        "not-a-number",
        "plus-sign",
        "underscore",
        "negative",
        "repeated-alike",
        "a-list-alike",
    ],
)
def test_a_reply_whose_length_cannot_be_trusted_is_refused(servers: Any, lengths: bytes) -> None:
    """RFC 9112 6.3: a Content-Length that is not one number is an unrecoverable error. Read
    as http.client reads it (the first, or none: read until the server closes) the reply is
    cut, or waits for a close that never comes, and what is left is taken for the next reply."""

    def lying(server: RawServer, conn: socket.socket, number: int) -> None:
        while server.next_request(conn):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + lengths + b"\r\n" + BODY)

    server = servers(lying)
    ch = channel(server.url, timeout=2)
    try:
        with pytest.raises(ConnectionFailed, match="Content-Length"):
            post(ch)
    finally:
        ch.close_client()


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Api-Key": "k\r\nX-Injected: 1"},
        {"X-Api-Key": "k\nX-Injected: 1"},
        {"X-Api-Key": "k\x00"},
        {"X Injected": "1"},
        {"X-Injected:": "1"},
    ],
    ids=["crlf-in-value", "lf-in-value", "nul-in-value", "space-in-name", "colon-in-name"],
)
def test_a_header_that_would_split_the_request_is_refused_unsent(servers: Any, headers: dict[str, str]) -> None:
    """A configured header (or one built from a tool's arguments) holding a line break would
    add header fields, or a whole request, of the value's choosing: refused before anything is
    sent, as h11 refused it."""
    server = servers(keep_alive)
    ch = HttpChannel(server.url, headers, timeout=5, auth=None, connect_timeout=5)
    try:
        with pytest.raises(ConnectionFailed):
            post(ch)
    finally:
        ch.close_client()
    assert server.requests == 0


@pytest.mark.parametrize(
    "answer", [b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n", b"HTTP/1.1 204 No Content\r\n\r\n"], ids=["202", "204"]
)
def test_replies_without_a_body_keep_the_connection(servers: Any, answer: bytes) -> None:
    """What a notification gets (202, no body): the connection serves the next request."""

    def empty(server: RawServer, conn: socket.socket, number: int) -> None:
        while server.next_request(conn):
            conn.sendall(answer)

    server = servers(empty)
    ch = channel(server.url)
    try:
        for _ in range(3):
            assert ch.read_body(ch.request("POST", ch.url, {}, body=REQUEST), 0) == b""
    finally:
        ch.close_client()
    assert (server.connections, server.requests) == (1, 3)


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n Folded: first\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Note: one\r\n \t two\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nNo-Colon\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n",
        b"HTTP/2 200\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n",
    ],
    ids=["coding-before-chunked", "fold-first", "fold", "no-colon", "space-in-name", "bare-cr", "http2", "head-cut-short"],
)
def test_a_reply_head_that_is_not_http_1_1_is_refused(servers: Any, answer: bytes) -> None:
    def lie(server: RawServer, conn: socket.socket, number: int) -> None:
        if server.next_request(conn):
            conn.sendall(answer)
            conn.shutdown(socket.SHUT_WR)

    server = servers(lie)
    ch = channel(server.url, timeout=2)
    try:
        with pytest.raises(ConnectionFailed):
            post(ch)
    finally:
        ch.close_client()


def test_repeated_fields_reach_the_caller(servers: Any) -> None:
    """A repeated field stays repeated (two Set-Cookie)."""

    def folded(server: RawServer, conn: socket.socket, number: int) -> None:
        while server.next_request(conn):
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nX-Note: one two \r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
            )

    server = servers(folded)
    ch = channel(server.url)
    try:
        response = ch.request("POST", ch.url, {}, body=REQUEST)
        assert response.headers["x-note"] == "one two"
        assert response.headers.get_list("set-cookie") == ["a=1", "b=2"]
        assert response.reason_phrase == "OK"
        ch.read_body(response)
    finally:
        ch.close_client()


def test_endless_trailer_fields_are_refused(servers: Any) -> None:
    """A chunked body, then trailer fields without end: refused after a bounded number, while
    the server is still sending (the read never ends otherwise: each line comes in time)."""

    def trailers(server: RawServer, conn: socket.socket, number: int) -> None:
        if server.next_request(conn):
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"%x\r\n%s\r\n0\r\n" % (len(BODY), BODY)
            )
            for _ in range(10_000):
                if server.stop.is_set():
                    return
                conn.sendall(b"X-Trailer: more\r\n")
                time.sleep(0.001)

    server = servers(trailers)
    ch = channel(server.url, timeout=5)
    started = time.monotonic()
    try:
        with pytest.raises(ConnectionFailed, match="trailer"):
            post(ch)
    finally:
        ch.close_client()
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    "size",
    [b"0x%x" % len(BODY), b"+%x" % len(BODY), b"%x_" % len(BODY), b"-1", b"", b"1%016x" % len(BODY)],
    ids=["0x", "plus-sign", "underscore", "negative", "empty", "past-64-bits"],
)
def test_a_chunk_size_that_is_not_hexadecimal_is_refused(servers: Any, size: bytes) -> None:
    """RFC 9112 7.1: chunk-size is 1*HEXDIG. The first three are the body's true size in
    spellings Python's int(x, 16) takes (and http.client with it)."""

    def chunks(server: RawServer, conn: socket.socket, number: int) -> None:
        if server.next_request(conn):
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"%s\r\n%s\r\n0\r\n\r\n" % (size, BODY)
            )

    server = servers(chunks)
    ch = channel(server.url, timeout=2)
    try:
        with pytest.raises(ConnectionFailed, match="reply cut off"):
            post(ch)
    finally:
        ch.close_client()
