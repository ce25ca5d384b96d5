"""What the gateway's HTTP request handlers share: who may ask (Host, Origin, principals), a
toolbox per profile, and the initialize-era host sessions (their connections, the GET stream's
queue, idle expiry, sharing with other replicas through a state database)."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import queue
import secrets
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Protocol
from urllib.parse import urlsplit

from llmc_cli.catalog import Catalog
from llmc_cli.config.profiles import LoadedProfile
from llmc_cli.errors import LlmcError, UsageError
from llmc_cli.gateway.connection import GatewayConnection
from llmc_cli.gateway.principals import Principal, principals_of
from llmc_cli.gateway.toolbox import Toolbox
from llmc_cli.mcp import jsonrpc

MAX_SESSIONS = 256
MAX_CONNECTIONS = 1024  # HTTP connections served at once (a thread each): sessions' streams and calls
REQUEST_SECONDS = 30.0  # for a whole request to arrive, and for a kept-alive connection's next one
IDLE_SECONDS = 1800.0
CLOSE_SECONDS = 5.0  # on shutdown, how long open listen streams get to write their `complete`
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}


def parse_address(text: str) -> tuple[str, int]:
    """'[HOST:]PORT' -> (host, port); the host defaults to 127.0.0.1, IPv6 in brackets."""
    host, port = "127.0.0.1", text
    if text.startswith("["):
        host, _, port = text[1:].partition("]")
        port = port.removeprefix(":")
    elif ":" in text:
        host, _, port = text.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) <= 65535 or not host:
        raise UsageError(f"--http {text}: expected [HOST:]PORT, e.g. 127.0.0.1:8765")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


MAX_RESUMABLE = 16  # a session's newest call streams that a host may resume (Last-Event-ID)


@dataclass
class ResumableStream:
    """A tools/call's SSE stream in a session: every event it carried (event k is events[k-1], its
    id `STREAM-k`), and the replies still to come. Whoever owns it (the POST that opened it, or the
    GET that resumed it) writes the events; a host whose stream broke resumes it with GET and
    Last-Event-ID, and the call goes on meanwhile (initialize era: a broken stream is no cancel)."""

    msg_id: Any
    replies: "queue.SimpleQueue[dict[str, Any]]"
    events: list[dict[str, Any]] = field(default_factory=list)
    owner: int = 0  # the thread writing it now
    done: bool = False  # its final reply is among the events
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class HostSession:
    connection: GatewayConnection  # its upstreams are the session's own (Toolbox.host_upstreams)
    principal: str | None
    last_used: float = field(default_factory=time.monotonic)
    stream: "queue.Queue[dict[str, Any] | None] | None" = None  # the GET stream's messages
    last_shared: float = field(default_factory=time.monotonic)  # when the shared store last saw it used
    streams: dict[str, ResumableStream] = field(default_factory=dict)  # stream id -> stream, oldest first

    def keep_stream(self, stream_id: str, stream: ResumableStream) -> None:
        self.streams[stream_id] = stream
        while len(self.streams) > MAX_RESUMABLE:
            del self.streams[next(iter(self.streams))]


def _stamp(profile: LoadedProfile) -> tuple[int, int, int] | None:
    """What changes when the profile file is rewritten (in place or by rename)."""
    if profile.path is None:
        return None
    try:
        st = os.stat(profile.path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


class SharedSessions(Protocol):
    """Initialize-era sessions shared by the replicas of a gateway (services.host_sessions): what
    a replica needs to go on serving a session it did not open (its handshake and principal).
    Failures are LlmcError (a state database that is down)."""

    def save(self, session_id: str, record: dict[str, Any]) -> None: ...

    def resume(self, session_id: str) -> dict[str, Any] | None:
        """The record, marked as used now; None when unknown or idle too long."""

    def forget(self, session_id: str) -> None: ...


class HttpGateway:
    """What the request handlers share: toolboxes per profile, principals, sessions."""

    def __init__(self, toolbox: Toolbox, host: str, port: int, *, idle_seconds: float = IDLE_SECONDS) -> None:
        served = toolbox.profile
        self.served = served
        self.toolboxes: dict[str, Toolbox] = {served.name: toolbox}
        self.principals = principals_of(served)
        self._principals_stamp = _stamp(served)
        self.oauth = None
        if served.profile.serve.oauth is not None:
            from llmc_cli.gateway.oauth_rs import ResourceServer

            self.oauth = ResourceServer(served.profile.serve.oauth)
        if not self.principals and self.oauth is None and not is_loopback(host):
            raise UsageError(f"--http {host}: a non-loopback address needs inbound authentication; add "
                             f"principals with `llmc serve -p {served.name} token create NAME`")
        self.host, self.port = host, port
        self.allowed_hosts = {h.lower() for h in served.profile.serve.allowed_hosts}
        self.allowed_origins = {o.rstrip("/").lower() for o in served.profile.serve.allowed_origins}
        self.idle_seconds = idle_seconds
        self.sessions: dict[str, HostSession] = {}
        # (profile, principal) -> the upstream connections of its 2026-07-28 requests
        self.principal_upstreams: dict[tuple[str, str], Catalog] = {}
        from llmc_cli import services

        self.shared: SharedSessions | None = services.host_sessions(served, idle_seconds)
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        # The connections of the 2026-07-28 listen streams open now: when the gateway stops, each
        # stream gets its `complete` result before the process ends (basic/patterns/subscriptions.mdx,
        # Graceful Closure), so the host knows to listen again rather than suspect a failure.
        self.listening: set[GatewayConnection] = set()
        self._drained = threading.Condition(self.lock)

    # -- who may ask ---------------------------------------------------------------------------

    def current_principals(self) -> list[Principal]:
        """The principals as the profile file says now: a token revoked or rotated (`llmc serve
        token revoke/create`, or an edit) counts from the next request, without a restart. A stat
        per request; the file is re-read only when it changed. A profile broken mid-edit keeps
        the principals it had (said once on stderr) until it is valid again."""
        stamp = _stamp(self.served)
        if stamp == self._principals_stamp:
            return self.principals
        with self.lock:
            if stamp != self._principals_stamp:
                from llmc_cli.config.profiles import load_profile

                try:
                    self.principals = principals_of(load_profile(str(self.served.path)))
                except LlmcError as exc:
                    print(f"llmc serve: {self.served.name}: principals not re-read, the old ones stay: {exc.message}",
                          file=sys.stderr, flush=True)
                self._principals_stamp = stamp
            return self.principals

    def auth_required(self, principals: list[Principal]) -> bool:
        """Tokens are needed with principals or OAuth, and always off loopback (a gateway whose
        principals were all revoked lets nobody in rather than everybody)."""
        return bool(principals) or self.oauth is not None or not is_loopback(self.host)

    def host_allowed(self, header: str | None) -> bool:
        if not header:
            return False
        name = urlsplit("//" + header).hostname or ""
        return name.lower() in LOOPBACK_NAMES or is_loopback(name) or header.lower() in self.allowed_hosts \
            or name.lower() in self.allowed_hosts

    def origin_allowed(self, origin: str | None) -> bool:
        if origin is None:
            return True  # not a browser: DNS rebinding needs one
        parts = urlsplit(origin)
        return is_loopback(parts.hostname or "") or origin.rstrip("/").lower() in self.allowed_origins

    def toolbox_for(self, principal: Principal | None) -> Toolbox:
        name = principal.profile if principal and principal.profile else self.served.name
        with self.lock:
            if name not in self.toolboxes:
                from llmc_cli.config.profiles import load_profile

                toolbox = Toolbox(load_profile(name), serve=self.served.profile.serve)
                toolbox.catalog.warm_up()
                self.toolboxes[name] = toolbox
            return self.toolboxes[name]

    # -- sessions (initialize era) -------------------------------------------------------------

    def stateless_connection(self, principal: Principal | None) -> GatewayConnection:
        """A connection for one 2026-07-28 request. That era has no host sessions (state lives in
        handles a server mints into tool arguments), so the nearest thing to a host is its
        principal: each one gets its own connections to the upstreams that keep state, kept
        while the gateway runs; requests without a principal share the toolbox's own."""
        toolbox = self.toolbox_for(principal)
        upstreams = None
        if principal is not None:
            key = (toolbox.profile.name, principal.name)
            with self.lock:
                upstreams = self.principal_upstreams.get(key)
                if upstreams is None:
                    upstreams = self.principal_upstreams[key] = toolbox.host_upstreams()
        return GatewayConnection(toolbox, transport="http", principal=principal.name if principal else None,
                                 upstreams=upstreams)

    def _session_connection(self, principal: Principal | None, name: str | None) -> GatewayConnection:
        toolbox = self.toolbox_for(principal)
        return GatewayConnection(toolbox, transport="http", principal=name, upstreams=toolbox.host_upstreams())

    @staticmethod
    def _close_connection(connection: GatewayConnection) -> None:
        """End a session's connection and the upstream connections it owned."""
        connection.close()
        if connection.upstreams is not connection.toolbox.catalog:
            connection.upstreams.close()

    def open_session(self, principal: Principal | None) -> tuple[str, HostSession] | None:
        connection = self._session_connection(principal, principal.name if principal else None)
        with self.lock:
            if len(self.sessions) >= MAX_SESSIONS:
                self._close_connection(connection)
                return None
            session_id = secrets.token_urlsafe(32)
            session = self.sessions[session_id] = HostSession(connection, principal.name if principal else None)
        connection.attach(lambda message: self._to_stream(session, message))
        if self.shared is not None:
            # Shared before the initialize result leaves, so the host's next request may reach any replica.
            connection.on_initialize = lambda: self._share(session_id, session)
        return session_id, session

    def _share(self, session_id: str, session: HostSession) -> None:
        assert self.shared is not None
        connection = session.connection
        try:
            self.shared.save(session_id, {"principal": session.principal, "protocolVersion": connection.legacy_version,
                                          "clientInfo": connection.client_info,
                                          "clientCapabilities": connection.client_capabilities})
        except LlmcError as exc:
            from llmc_cli.server.protocol import RequestError

            self.end_session(session_id)  # not resumable elsewhere: no session at all
            raise RequestError(jsonrpc.INTERNAL_ERROR, f"cannot start a session: {exc.message}") from None

    def find_session(self, session_id: str, principal: Principal | None) -> HostSession | None:
        with self.lock:
            session = self.sessions.get(session_id)
        if session is None and self.shared is not None:
            session = self._resume(session_id, principal)
        # A session belongs to the principal that opened it: another token cannot ride on it.
        if session is None or session.principal != (principal.name if principal else None):
            return None
        session.last_used = time.monotonic()
        if self.shared is not None and session.last_used - session.last_shared > self.idle_seconds / 4:
            session.last_shared = session.last_used
            try:
                kept = self.shared.resume(session_id)  # keeps it alive for the other replicas
            except LlmcError:
                kept = {}  # the database is down: the request goes on here, its calls refuse if they need it
            if kept is None:  # the host ended it through another replica
                self.end_session(session_id)
                return None
        return session

    def _resume(self, session_id: str, principal: Principal | None) -> HostSession | None:
        """A session another replica opened, from the shared store: a new connection with its
        handshake (version, client info and capabilities); what ran in the old one is gone."""
        assert self.shared is not None
        try:
            record = self.shared.resume(session_id)
        except LlmcError:
            return None  # cannot tell: the host hears 404 and starts a new session
        if record is None or record.get("principal") != (principal.name if principal else None):
            return None
        connection = self._session_connection(principal, record["principal"])
        connection.legacy_version = record.get("protocolVersion")
        connection.client_info = record.get("clientInfo") or {}
        connection.client_capabilities = record.get("clientCapabilities") or {}
        with self.lock:
            if session_id in self.sessions or len(self.sessions) >= MAX_SESSIONS:
                self._close_connection(connection)
                return self.sessions.get(session_id)  # resumed by a concurrent request, or too many
            session = self.sessions[session_id] = HostSession(connection, record["principal"])
        connection.attach(lambda message: self._to_stream(session, message))
        return session

    def end_session(self, session_id: str, *, forget: bool = False) -> None:
        """End a session here; `forget`: everywhere (the host's DELETE), not just on this replica
        (idle here, or this replica stopping: another may still serve it)."""
        if forget and self.shared is not None:
            try:
                self.shared.forget(session_id)
            except LlmcError:
                pass  # it expires there by itself
        with self.lock:
            session = self.sessions.pop(session_id, None)
        if session is not None:
            if session.stream is not None:
                session.stream.put(None)
            self._close_connection(session.connection)

    @staticmethod
    def _to_stream(session: HostSession, message: dict[str, Any]) -> None:
        if session.stream is not None:  # no GET stream open: a notification nobody listens for
            session.stream.put(message)

    def expire_idle(self) -> None:
        """End sessions nobody used for idle_seconds; runs until the server stops."""
        while not self.stopped.wait(min(30.0, max(0.5, self.idle_seconds / 4))):
            cutoff = time.monotonic() - self.idle_seconds
            with self.lock:
                idle = [sid for sid, s in self.sessions.items() if s.last_used < cutoff and s.stream is None]
            for session_id in idle:
                self.end_session(session_id)

    def status(self) -> dict[str, Any]:
        with self.lock:
            sessions = len(self.sessions)
        return {"status": "ok", "profile": self.served.name, "sessions": sessions,
                "profiles": {name: {"servers": toolbox.catalog.status()} for name, toolbox in self.toolboxes.items()},
                "auth": self.auth_mode()}

    def auth_mode(self) -> str:
        return "+".join(m for m, on in (("bearer", self.principals), ("oauth", self.oauth)) if on) or "none"

    @contextlib.contextmanager
    def listen_stream(self, connection: GatewayConnection) -> Iterator[None]:
        """Around the answer to subscriptions/listen: the stream is known until it ends."""
        with self.lock:
            self.listening.add(connection)
        try:
            yield
        finally:
            with self.lock:
                self.listening.discard(connection)
                self._drained.notify_all()

    def close(self) -> None:
        self.stopped.set()
        with self.lock:
            streams = list(self.listening)
        for connection in streams:
            connection.subscriptions.close()  # its handler writes the `complete` result and returns
        with self.lock:
            self._drained.wait_for(lambda: not self.listening, timeout=CLOSE_SECONDS)
        for session_id in list(self.sessions):
            self.end_session(session_id)
        for upstreams in self.principal_upstreams.values():
            upstreams.close()
        for toolbox in self.toolboxes.values():
            toolbox.close()
