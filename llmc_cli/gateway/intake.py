"""How the gateway's HTTP handler takes each request from its connection: the TLS handshake on
a TLS port, the parser (request_parser.py), whole-request deadlines (admission.Arrivals) and the
admitted request's slot (admission.py); and whether the host of an open stream has gone."""

from __future__ import annotations

import select
import socket
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

from llmc_cli.gateway.admission import Admission, Arrivals, Ticket
from llmc_cli.gateway.hosts import REQUEST_SECONDS
from llmc_cli.gateway.request_parser import BadRequest, Request, RequestHeaders, RequestParser


class Intake(BaseHTTPRequestHandler):
    """A connection's requests as the handler sees them: parsed (request_parser.py), within their
    deadlines, admitted (admission.py), over TLS when the port speaks it."""

    protocol_version = "HTTP/1.1"
    timeout: ClassVar[float] = REQUEST_SECONDS  # to send a whole request, head and body (--request-timeout)
    arrivals: ClassVar[Arrivals]  # set on the subclass serve() makes
    admission: ClassVar[Admission]  # likewise
    late = False  # cut off by `arrivals`: nothing more is read or answered on this connection
    ticket: Ticket | None = None  # the request being answered was admitted (admission.py)
    admitted_before = False  # a request of this connection was admitted: it waits as a kept-alive one
    requests: RequestParser  # the connection's requests (setup)
    parsed: Request  # the one being answered
    peer_subject: dict[str, str] | None = None  # its verified TLS client certificate's subject

    def handle_one_request(self) -> None:
        # The first request's head must come within the pending deadline: a connection that has
        # shown nobody's token yet gets seconds, not the --request-timeout an admitted one gets.
        first = min(self.timeout, self.admission.pending_seconds)
        self.arrivals.expect(self, self.timeout if self.admitted_before else first)
        try:
            self.serve_one()
        except TimeoutError:  # a read past the socket's timeout: the client is gone
            self.close_connection = True
        finally:
            self.arrivals.arrived(self)
            self.release()

    def release(self) -> None:
        """The admitted request stops counting against its principal. Called before its final reply
        is written: a host that reads the reply and at once sends its next request must find the
        slot free (max_requests = 1 means one at a time, not one per round trip)."""
        if self.ticket is not None:
            self.admission.done(self.ticket, keep=not self.close_connection)
            self.ticket = None

    def admit(self, principal: str | None, max_requests: int) -> None:
        """Count this request against its principal's share and the gateway's (raises Refused);
        a POST's body then has --request-timeout to arrive."""
        self.ticket = self.admission.admit(self.connection, principal, max_requests)
        self.admitted_before = True
        if self.command == "POST":
            self.arrivals.expect(self, self.timeout)

    def cut_off(self) -> None:
        self.late = True
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed

    def handle(self) -> None:
        """Serve the connection's requests; on a TLS port, after its handshake (a plain HTTP
        request there is answered 400 in plain HTTP, saying to use https)."""
        if getattr(self.server, "tls", None) is not None and not self._tls_handshake():
            return
        super().handle()

    def _tls_handshake(self) -> bool:
        import ssl

        sock = self.connection
        sock.settimeout(min(self.timeout, self.admission.pending_seconds))  # a silent client is no host
        try:
            first = socket.socket.recv(sock, 1, socket.MSG_PEEK)  # the raw bytes, before any TLS
            if first and first != b"\x16":  # not a TLS handshake record: someone speaking plain HTTP
                body = b"This port speaks HTTPS (TLS): use an https:// URL.\n"
                head = f"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                socket.socket.sendall(sock, head.encode("ascii") + body)
                return False
            if not first:
                return False
            sock.do_handshake()
        except (OSError, ssl.SSLError):
            return False  # no TLS client, an unknown certificate, or gone: nothing to answer
        finally:
            sock.settimeout(self.timeout)
        from llmc_cli.config.tls_subject import subject_of

        self.peer_subject = subject_of(sock.getpeercert())
        return True

    def tls_subject(self) -> dict[str, str] | None:
        """The verified client certificate's subject (mutual TLS), or None."""
        return self.peer_subject or None

    def setup(self) -> None:
        super().setup()
        self.requests = RequestParser(self.rfile)
        # Headers and body go out in separate writes; with Nagle's algorithm the body would wait
        # for the client's delayed ACK (~40 ms) on a kept-alive connection.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # no access log on stderr: request lines carry session ids

    def serve_one(self) -> None:
        """Parse the connection's next request (request_parser.py) and answer it: a request the
        parser refused or that is past its limits with its error, then the connection closes."""
        self.command = self.requestline = ""  # send_error reads these before a request is known
        self.request_version = "HTTP/1.1"
        self.close_connection = True
        try:
            request = self.requests.next_request()
        except BadRequest as exc:
            self.request_version = f"HTTP/{exc.version}"
            self.send_error(exc.status, exc.message)
            return
        if request is None:
            return  # the client left, or was cut off, before a whole head: no answer
        self.parsed = request
        if not self._take(request):
            return
        answer = getattr(self, "do_" + self.command, None)
        if answer is None:
            self.send_error(501, f"Unsupported method ({self.command!r})")
            return
        answer()
        self.wfile.flush()
        if not self.requests.served(request):
            self.close_connection = True

    def _take(self, request: Request) -> bool:
        """The parsed head as http.server's handler holds it (command, path, request_version,
        headers, close_connection), and what the parser leaves to a server (RFC 9112 2.3, 3.2,
        9.3; RFC 9110 10.1.1). False: refused, the error sent."""
        self.command = request.method
        self.path = b"".join(request.target).decode("latin-1")
        self.request_version = f"HTTP/{request.version}"
        self.requestline = f"{self.command} {self.path} {self.request_version}"
        if request.version == "0.9":  # a request line without a version: a bare `GET /path`, body alone in reply
            if self.command != "GET":
                self.request_version = "HTTP/1.1"
                self.send_error(400, f"Bad request syntax ({self.command} {self.path!r})")
                return False
        elif request.version not in ("1.0", "1.1"):
            self.request_version = "HTTP/1.1"
            self.send_error(505, f"Invalid HTTP version ({request.version})")
            return False
        if self.path.startswith("//"):
            self.path = "/" + self.path.lstrip("/")
        if self.command != "POST":
            self.arrivals.arrived(self)  # no body to wait for (the endpoint reads none but a POST's)
        headers = RequestHeaders(request.fields)
        if len(headers.get_all("Host") or []) > 1:  # RFC 9112 3.2: MUST be 400; which one would count?
            self.send_error(400, "More than one Host header")
            return False
        self.headers = headers  # type: ignore[assignment]  # http.server's own parse is not used
        connection = (headers.get("Connection") or "").lower()
        self.close_connection = request.version != "1.1"
        if connection == "close":
            self.close_connection = True
        elif connection == "keep-alive" and request.version != "0.9":
            self.close_connection = False
        if (headers.get("Expect") or "").lower() == "100-continue" and request.version == "1.1":
            return self.handle_expect_100()
        return True

    def read_body(self) -> bytes:
        """The request's body as the parser framed it: whole, or what came before the client
        stopped sending (or was cut off)."""
        return self.requests.body(self.parsed)

    # -- responses -------------------------------------------------------------------------------

    def _hung_up(self) -> bool:
        """Whether the host closed the connection: a stream it dropped ends within a second, so
        the request stops counting against its principal (admission.py), not at the next write."""
        poller = select.poll()  # not select.select: a gateway's descriptors may pass FD_SETSIZE
        try:
            poller.register(self.connection, select.POLLIN)
            if not poller.poll(0):
                return False
            if getattr(self.server, "tls", None) is None:
                return bool(self.connection.recv(1, socket.MSG_PEEK) == b"")
            return self._tls_closed()
        except OSError:
            return True

    def _tls_closed(self) -> bool:
        """Whether a TLS connection with bytes waiting has ended (close_notify or EOF); a host
        sends nothing else on a stream's connection."""
        import ssl

        self.connection.settimeout(0.0)
        try:
            return bool(self.connection.recv(1) == b"")
        except ssl.SSLWantReadError:
            return False
        finally:
            self.connection.settimeout(self.timeout)
