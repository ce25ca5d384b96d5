"""The HTTP gateway's server: the standard library's threading server with admission
(admission.py), whole-request deadlines, optional TLS (--tls-cert/--tls-key, and mutual TLS with
--tls-client-ca), and a clean stop on SIGINT, SIGTERM or SIGHUP."""

from __future__ import annotations

import signal
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from types import FrameType
from typing import TYPE_CHECKING, Any

from llmc_cli import interrupts
from llmc_cli.errors import LlmcError, UsageError
from llmc_cli.gateway.access import is_loopback_host, parse_address
from llmc_cli.gateway.admission import MAX_PENDING, PENDING_SECONDS, Admission, Arrivals
from llmc_cli.gateway.hosts import IDLE_SECONDS, MAX_CONNECTIONS, REQUEST_SECONDS, HttpGateway
from llmc_cli.gateway.http import ENDPOINT, Handler
from llmc_cli.gateway.toolbox import Toolbox

if TYPE_CHECKING:
    import ssl


@dataclass(frozen=True)
class Tls:
    """PEM files: the server's certificate chain and key, and the CAs whose client certificates
    it requires (mutual TLS), if any."""

    cert: str
    key: str
    client_ca: str | None = None

    def context(self) -> ssl.SSLContext:
        """The server's TLS context (TLS 1.2 or newer, HTTP/1.1 by ALPN); UsageError naming the
        file that cannot be used."""
        import ssl

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.set_alpn_protocols(["http/1.1"])
        try:
            context.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as exc:
            raise UsageError(f"--tls-cert {self.cert} / --tls-key {self.key}: cannot use them: {_reason(exc)}") from None
        if self.client_ca is not None:
            try:
                context.load_verify_locations(cafile=self.client_ca)
            except (OSError, ssl.SSLError) as exc:
                raise UsageError(f"--tls-client-ca {self.client_ca}: cannot use it: {_reason(exc)}") from None
            context.verify_mode = ssl.CERT_REQUIRED
        return context


def _reason(exc: Exception) -> str:
    return str(getattr(exc, "strerror", None) or getattr(exc, "reason", None) or exc)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # hosts connecting at once are queued, not reset
    admission: Admission
    tls: ssl.SSLContext | None = None

    def get_request(self) -> tuple[Any, Any]:
        """An accepted connection; with TLS wrapped for it, its handshake left to its own thread
        (ReplyWriter.handle), so a slow or silent client never holds up the accepting loop."""
        sock, address = self.socket.accept()
        if self.tls is not None:
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def process_request(self, request: Any, client_address: Any) -> None:
        """A thread per connection, from the pending pool until a request of it is admitted
        (admission.py): the pool bounds the threads that connections nobody vouches for hold."""
        self.admission.connected(request)
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread started (out of threads)
            self.admission.closed(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.admission.closed(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A peer that hung up (a load balancer's health check resets its connection) or broke
        off TLS is not an error worth a traceback; anything else still gets socketserver's report."""
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)) or _tls_error(sys.exc_info()[1]):
            return
        super().handle_error(request, client_address)


def _tls_error(exc: BaseException | None) -> bool:
    ssl = sys.modules.get("ssl")
    return ssl is not None and isinstance(exc, ssl.SSLError)


class Running:
    """A gateway listening (start_server), served by serve_forever until stop(); then close()."""

    def __init__(self, httpd: _Server, gateway: HttpGateway, arrivals: Arrivals) -> None:
        self.httpd, self.gateway, self.arrivals = httpd, gateway, arrivals
        self.port: int = httpd.server_address[1]

    def serve_forever(self) -> None:
        self.httpd.serve_forever(poll_interval=0.5)

    def stop(self) -> None:
        """From another thread: serve_forever returns."""
        self.httpd.shutdown()

    def close(self) -> None:
        self.arrivals.stop()
        self.httpd.server_close()
        self.gateway.close()


def start_server(
    toolbox: Toolbox,
    address: str,
    *,
    idle_seconds: float = IDLE_SECONDS,
    max_connections: int = MAX_CONNECTIONS,
    request_seconds: float = REQUEST_SECONDS,
    max_pending: int = MAX_PENDING,
    pending_seconds: float = PENDING_SECONDS,
    tls: Tls | None = None,
    log: Callable[[str], None] | None = None,
) -> Running:
    """Listen on `address` with the gateway's threads running; requests are served once
    serve_forever runs (in any thread: tests run it in one of theirs)."""
    host, port = parse_address(address)
    try:
        context = tls.context() if tls is not None else None
        gateway = HttpGateway(toolbox, host, port, idle_seconds=idle_seconds)
    except LlmcError:
        toolbox.close()
        raise
    arrivals = Arrivals()
    admission = Admission(max_connections, max_pending, pending_seconds)
    handler = type(
        "GatewayHandler",
        (Handler,),
        {"gateway": gateway, "timeout": request_seconds, "arrivals": arrivals, "admission": admission},
    )
    server_class: type[_Server] = _Server
    if ":" in host:
        server_class = type("_Server6", (_Server,), {"address_family": socket.AF_INET6})
    try:
        httpd = server_class((host, port), handler)
    except OSError as exc:
        gateway.close()
        from llmc_cli.errors import ConnectionFailed

        raise ConnectionFailed(f"cannot listen on {address}: {exc.strerror or exc}") from None
    httpd.admission = admission
    httpd.tls = context
    say = log or (lambda message: print(f"llmc serve: {message}", file=sys.stderr, flush=True))
    _announce(gateway, toolbox, httpd.server_address[1], tls, say)
    threading.Thread(target=gateway.expire_idle, daemon=True, name="llmc-gateway-idle").start()
    gateway.start_sharing(say)
    threading.Thread(target=arrivals.run, daemon=True, name="llmc-gateway-arrivals").start()
    return Running(httpd, gateway, arrivals)


def serve(toolbox: Toolbox, address: str, **options: Any) -> None:
    """Serve until SIGINT, SIGTERM or SIGHUP; then end sessions and stop the upstream servers
    (exit 0). `options`: start_server's."""
    running = start_server(toolbox, address, **options)
    signalled = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        if not signalled.is_set():  # once: a repeated signal changes nothing
            signalled.set()
            threading.Thread(target=running.stop, daemon=True).start()

    for signum in interrupts.SIGNAL_EXIT_CODES:  # SIGHUP too: a closed terminal must not orphan the upstreams
        signal.signal(signum, stop)
    try:
        running.serve_forever()
    finally:
        running.close()
        if signalled.is_set():
            interrupts.ignore_further()


def _announce(gateway: HttpGateway, toolbox: Toolbox, port: int, tls: Tls | None, say: Callable[[str], None]) -> None:
    """The line that says where the gateway listens and how hosts authenticate; and one more
    when tokens would cross a network in the clear."""
    host = gateway.host
    shown = f"[{host}]" if ":" in host else host
    mode = gateway.door.auth_mode()
    if mode == "none":
        mode = (
            "none, loopback only"
            if toolbox.profile.profile.serve.auth == "none"
            else 'none: any local process may call; add a principal, or say [serve] auth = "none"'
        )
    if tls is not None and tls.client_ca is not None:
        mode += "; TLS client certificates required"
    scheme = "https" if tls is not None else "http"
    say(f"profile {toolbox.profile.name}: {scheme}://{shown}:{port}{ENDPOINT} (inbound auth: {mode})")
    if tls is None and not is_loopback_host(host) and not toolbox.profile.profile.serve.behind_proxy:
        say(
            f"warning: {host} is not a loopback address and this is plain HTTP: tokens and tool results cross "
            "the network unencrypted; give --tls-cert and --tls-key, or put a TLS proxy in front and say "
            "[serve] behind_proxy = true"
        )
