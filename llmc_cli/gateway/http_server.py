"""The HTTP gateway's server: uvicorn with httptools (the MCP SDK's own stack) serving asgi.py's
app, through protocol.py's connection deadlines and limits; optional TLS (--tls-cert/--tls-key,
and mutual TLS with --tls-client-ca); a clean stop on SIGINT, SIGTERM or SIGHUP, by our handlers
(uvicorn's own are off: they re-raise the signal after shutdown, and know no SIGHUP). Imported
only when `llmc serve --http` starts (run.py), uvicorn with it."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import shutil
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from types import FrameType
from typing import TYPE_CHECKING, Any

import uvicorn

from llmc_cli import interrupts
from llmc_cli.config.files import private_temp_dir
from llmc_cli.errors import ConnectionFailed, LlmcError, UsageError
from llmc_cli.gateway.access import is_loopback_host, parse_address
from llmc_cli.gateway.admission import MAX_PENDING, PENDING_SECONDS
from llmc_cli.gateway.asgi import GatewayApp
from llmc_cli.gateway.forward import Front, Private, WorkerSlot
from llmc_cli.gateway.hosts import CLOSE_SECONDS, IDLE_SECONDS, MAX_CONNECTIONS, REQUEST_SECONDS, HttpGateway
from llmc_cli.gateway.http import ENDPOINT
from llmc_cli.gateway.protocol import GatewayProtocol
from llmc_cli.gateway.status import gather_status
from llmc_cli.gateway.supervisor import supervise
from llmc_cli.gateway.toolbox import Toolbox
from llmc_cli.model import clean_line

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


class _Deadline:
    """A TLS handshake must end within the deadline a request's head has (min(pending, request
    seconds)), not the event loop's 60 s. uvicorn has no setting for it, and a connection counts
    toward its limits only once the handshake is done: a client that opens connections and never
    says hello held each for a minute, uncounted."""

    handshake_seconds: float

    async def create_server(self, *args: Any, **kwargs: Any) -> asyncio.Server:
        if kwargs.get("ssl") is not None:
            kwargs.setdefault("ssl_handshake_timeout", self.handshake_seconds)
        return await super().create_server(*args, **kwargs)  # type: ignore[misc, no-any-return]


class _Loop(_Deadline, asyncio.SelectorEventLoop):
    """asyncio's own event loop, with the handshake deadline."""

    def __init__(self, handshake_seconds: float) -> None:
        super().__init__()
        self.handshake_seconds = handshake_seconds


def _new_loop(handshake_seconds: float) -> asyncio.AbstractEventLoop:
    """uvloop's event loop (libuv) when the PyPI package uvloop is installed (the `fast` extra),
    else asyncio's; both with the handshake deadline. uvloop takes a third off the event loop's
    share of a call (bench/RESULTS.md); nothing else changes (the same uvicorn, protocol and app)."""
    if os.environ.get("LLMC_EVENT_LOOP") != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:

            class UvLoop(_Deadline, uvloop.Loop):  # type: ignore[misc]
                pass

            loop = UvLoop()
            loop.handshake_seconds = handshake_seconds
            return loop
    return _Loop(handshake_seconds)


class Running:
    """A gateway listening (start_server), served by serve_forever (in any thread) until stop();
    then close(). One of several workers (forward.py) also serves its private socket."""

    def __init__(
        self, server: uvicorn.Server, sock: socket.socket, gateway: HttpGateway, app: GatewayApp, handshake_seconds: float
    ) -> None:
        self.server, self.sock, self.gateway, self.app = server, sock, gateway, app
        self.port: int = sock.getsockname()[1]
        self.loop: Any = None  # the event loop serve_forever runs
        self.private: tuple[uvicorn.Server, socket.socket, Front] | None = None
        self.handshake_seconds = handshake_seconds

    def serve_forever(self) -> None:
        async def serve() -> None:
            self.loop = asyncio.get_running_loop()
            if self.private is None:
                await self.server.serve(sockets=[self.sock])
                return
            server, sock, _ = self.private
            await asyncio.gather(self.server.serve(sockets=[self.sock]), server.serve(sockets=[sock]))

        if gc.get_freeze_count():  # the llmc entry froze its start-up (__main__.py): the gateway's too
            # The toolbox, policy and server built since live as long as the process; frozen, the
            # collector's full passes under load no longer walk them (one took ~20 ms, bench/RESULTS.md).
            gc.freeze()
        with asyncio.Runner(loop_factory=lambda: _new_loop(self.handshake_seconds)) as runner:
            runner.run(serve())

    def stop(self) -> None:
        """From another thread: open listen streams get their `complete`, the rest of the replies
        in flight end, and serve_forever returns."""
        self.gateway.drain()
        if self.loop is not None and not self.loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop ended meanwhile
                self.loop.call_soon_threadsafe(self.app.stop)
                if self.private is not None:
                    self.loop.call_soon_threadsafe(self.private[2].stop)
        self.server.should_exit = True
        if self.private is not None:
            self.private[0].should_exit = True

    def close(self) -> None:
        self.sock.close()
        if self.private is not None:
            self.private[1].close()
        self.gateway.close()
        self.app.pool.shutdown()


def bind(host: str, port: int, address: str, *, reuse_port: bool = False) -> socket.socket:
    """The listening socket (port 0: a free one), bound before the server starts. `reuse_port`:
    one of a group on the same port (SO_REUSEPORT), among which the kernel spreads new
    connections (--workers: a socket per worker)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and
    # with Nagle's algorithm a reply's body (uvicorn writes it apart from the head) waits for the
    # client's delayed ACK, ~40 ms per request.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConnectionFailed(f"cannot listen on {address}: {exc.strerror or exc}") from None
    sock.listen(128)  # hosts connecting at once are queued, not reset
    return sock


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
    sock: socket.socket | None = None,
    slot: WorkerSlot | None = None,
    announce: bool = True,
) -> Running:
    """Listen on `address` with the gateway's threads running; requests are served once
    serve_forever runs (in any thread: tests run it in one of theirs). A worker of several
    (`slot`) serves the socket its supervisor bound (`sock`) and a private one of its own
    (forward.py); `announce`: say where it listens (one worker says it for all)."""
    host, port = parse_address(address)
    try:
        context = tls.context() if tls is not None else None
        gateway = HttpGateway(toolbox, host, port, idle_seconds=idle_seconds, session_suffix=slot.suffix if slot else "")
    except LlmcError:
        toolbox.close()
        raise
    toolbox.warm_up()  # upstreams start while the host connects, counted in max_upstreams
    try:
        sock = sock if sock is not None else bind(host, port, address)
        private = _private_socket(slot) if slot is not None else None
    except LlmcError:
        gateway.close()
        raise
    app = GatewayApp(gateway, max_requests=max_connections, request_seconds=request_seconds)
    limits = (max_connections, max_pending, request_seconds, pending_seconds)
    front: Any = app
    if slot is not None:
        front = Front(
            app, slot, request_seconds=request_seconds, pending_seconds=pending_seconds, status=gather_status(app, slot)
        )
    server = _uvicorn_server(_config(front, context, *limits))
    say = log or (lambda message: print(f"llmc serve: {clean_line(message)}", file=sys.stderr, flush=True))
    if announce:
        _announce(gateway, toolbox, sock.getsockname()[1], tls, say)
    threading.Thread(target=gateway.expire_idle, daemon=True, name="llmc-gateway-idle").start()
    gateway.start_sharing(say)
    running = Running(server, sock, gateway, app, min(pending_seconds, request_seconds))
    if slot is not None and private is not None:
        running.private = (_uvicorn_server(_config(Private(app), None, *limits)), private, front)
    return running


def _config(
    app: Any,
    context: ssl.SSLContext | None,
    max_connections: int,
    max_pending: int,
    request_seconds: float,
    pending_seconds: float,
) -> uvicorn.Config:
    config = uvicorn.Config(
        app,
        http=partial(GatewayProtocol, pending_seconds=pending_seconds, request_seconds=request_seconds),  # type: ignore[arg-type]
        lifespan="off",
        ws="none",  # no WebSocket: an Upgrade request is served as plain HTTP
        interface="asgi3",
        proxy_headers=False,  # X-Forwarded-* do not change who asks
        server_header=False,
        headers=[("server", "llmc-gateway")],
        access_log=False,  # request lines carry session ids
        log_level="error",
        log_config=None,
        limit_concurrency=max_connections + max_pending,  # past that, 503 from uvicorn
        timeout_keep_alive=max(1, int(request_seconds)),  # a kept-alive connection's wait for its next request
        timeout_graceful_shutdown=int(CLOSE_SECONDS),
    )
    config.load()
    config.ssl = context
    return config


def _private_socket(slot: WorkerSlot) -> socket.socket:
    """The worker's Unix socket in the supervisor's 0700 directory (a previous process's
    replaced: a restarted worker takes its place)."""
    path = slot.socket_path(slot.index)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
    except OSError as exc:
        sock.close()
        raise ConnectionFailed(f"cannot listen on {path}: {exc.strerror or exc}") from None
    sock.listen(128)
    return sock


def _uvicorn_server(config: uvicorn.Config) -> uvicorn.Server:
    """uvicorn's server, its signal handling left to serve(): one way to stop."""

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return Server(config)


def serve(toolbox: Toolbox, address: str, **options: Any) -> None:
    """Serve until SIGINT, SIGTERM or SIGHUP; then end sessions and stop the upstream servers
    (exit 0). `options`: start_server's."""
    on_ready = options.pop("on_ready", None)
    running = start_server(toolbox, address, **options)
    signalled = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        if not signalled.is_set():  # once: a repeated signal changes nothing
            signalled.set()
            threading.Thread(target=running.stop, daemon=True).start()

    for signum in interrupts.SIGNAL_EXIT_CODES:  # SIGHUP too: a closed terminal must not orphan the upstreams
        signal.signal(signum, stop)
    if on_ready is not None:
        on_ready()  # listening: a supervisor may count this worker as serving
    try:
        running.serve_forever()
    finally:
        running.close()
        if signalled.is_set():
            interrupts.ignore_further()


def serve_workers(
    count: int,
    address: str,
    worker: Callable[[WorkerSlot, bool, socket.socket, Callable[[], None]], None],
    log: Callable[[str], None],
) -> None:
    """`count` worker processes (supervisor.py) serving `address`, each through `worker(slot,
    first, sock, ready)`. This process binds a listening socket per worker, all on the one port
    (SO_REUSEPORT: the kernel spreads new connections over them by address hash; one shared
    socket would hand a burst of connections to whichever worker wakes first), and keeps them
    open: a restarted worker takes over its socket and the connections waiting in it. The
    workers' private sockets live in a 0700 directory of this process's, removed when the last
    worker has gone."""
    host, port = parse_address(address)
    socks = [bind(host, port, address, reuse_port=True)]
    try:
        socks.extend(bind(host, socks[0].getsockname()[1], address, reuse_port=True) for _ in range(count - 1))
    except LlmcError:
        for sock in socks:
            sock.close()
        raise
    parent = os.getpid()
    rundir = str(private_temp_dir("llmc-gateway-", longest=90))  # a Unix socket's path: at most 107 bytes
    try:
        supervise(count, lambda index, first, ready: worker(WorkerSlot(index, count, rundir), first, socks[index], ready), log)
    finally:
        if os.getpid() == parent:  # a worker returns through here too: the directory is the parent's
            for sock in socks:
                sock.close()
            shutil.rmtree(rundir, ignore_errors=True)


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
