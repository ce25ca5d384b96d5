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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from llmc_cli.catalog import Catalog
from llmc_cli.config.profiles import LoadedProfile
from llmc_cli.errors import ConfigError, ConnectionFailed, LlmcError, UsageError
from llmc_cli.gateway.admission import Refused
from llmc_cli.gateway.connection import GatewayConnection
from llmc_cli.gateway.principals import Principal, principals_of
from llmc_cli.gateway.toolbox import Toolbox
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.messages import JSONObject, RequestId, object_at

if TYPE_CHECKING:
    from llmc_cli.store.state import HostSessions

MAX_SESSIONS = 256  # the gateway's; each principal's own is smaller (principals.MAX_SESSIONS)
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


def is_loopback_host(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def add_principal_hint(served: LoadedProfile) -> str:
    """The command that adds a principal to the served profile."""
    import shlex

    # A profile loaded by path is named by its path: `-p NAME` would not find it.
    named = served.path is None or served.path.parent.name == "profiles"
    return f"`llmc serve token create NAME -p {shlex.quote(served.name if named else str(served.path))}`"


def check_auth(served: LoadedProfile, host: str) -> None:
    """Refuse a gateway that would let everybody in off loopback (UsageError), or nobody at all
    (ConfigError), before anything starts; each message says what to do."""
    serve = served.profile.serve
    create = add_principal_hint(served)
    if not serve.auth_required() and not is_loopback_host(host):
        said = 'says [serve] auth = "none"' if serve.auth == "none" else "has no principals"
        raise UsageError(
            f"--http {host}: a non-loopback address needs inbound authentication, and the profile "
            f"{said}; add a principal with {create}"
        )
    if serve.auth_required() and not principals_of(served) and serve.oauth is None:
        raise ConfigError(
            f"profile {served.name}: no principal can reach this gateway: add one with {create}, "
            f'or set [serve] auth = "none" (loopback only)'
        )


MAX_RESUMABLE = 16  # a session's newest call streams that a host may resume (Last-Event-ID)


@dataclass
class ResumableStream:
    """A tools/call's SSE stream in a session: every event it carried (event k is events[k-1], its
    id `STREAM-k`), and the replies still to come. Whoever owns it (the POST that opened it, or the
    GET that resumed it) writes the events; a host whose stream broke resumes it with GET and
    Last-Event-ID, and the call goes on meanwhile (initialize era: a broken stream is no cancel)."""

    msg_id: RequestId | None
    replies: queue.SimpleQueue[JSONObject]
    events: list[JSONObject] = field(default_factory=list)
    owner: int = 0  # the thread writing it now
    done: bool = False  # its final reply is among the events
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class HostSession:
    connection: GatewayConnection  # its upstreams: its principal's, and its own to per_session servers
    principal: str | None
    last_used: float = field(default_factory=time.monotonic)
    stream: queue.Queue[JSONObject | None] | None = None  # the GET stream's messages
    last_shared: float = field(default_factory=time.monotonic)  # when the shared store last saw it used
    shared: bool = False  # in the shared store (saved after its initialize, or resumed from it)
    streams: dict[str, ResumableStream] = field(default_factory=dict)  # stream id -> stream, oldest first
    requests: int = 0  # POSTs of it being answered now

    def keep_stream(self, stream_id: str, stream: ResumableStream) -> None:
        self.streams[stream_id] = stream
        while len(self.streams) > MAX_RESUMABLE:
            del self.streams[next(iter(self.streams))]


@dataclass
class PrincipalUpstreams:
    """One principal's upstream connections, shared by its host sessions and its 2026-07-28
    requests (never by another principal's), and the connections of its host sessions to the
    servers marked `per_session` (`members`)."""

    toolbox: Toolbox  # of the principal's profile: its [serve] limits
    catalog: Catalog
    sessions: int = 0  # live host sessions using it
    last_used: float = field(default_factory=time.monotonic)
    members: set[Catalog] = field(default_factory=set)
    starting: int = 0  # connections admitted and starting now

    def held(self) -> int:
        return self.catalog.pool.held() + sum(member.pool.held() for member in list(self.members)) + self.starting


def _stamp(profile: LoadedProfile) -> tuple[int, int, int] | None:
    """What changes when the profile file is rewritten (in place or by rename)."""
    if profile.path is None:
        return None
    try:
        st = os.stat(profile.path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


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
        check_auth(served, host)
        # Whether requests need a token: decided by the profile at start, and a profile re-read
        # later may make it so but never undo it (an edit or a revoke never opens the door).
        self.require_auth = served.profile.serve.auth_required()
        self.host, self.port = host, port
        self.allowed_hosts = {h.lower() for h in served.profile.serve.allowed_hosts}
        self.allowed_origins = {o.rstrip("/").lower() for o in served.profile.serve.allowed_origins}
        self.idle_seconds = idle_seconds
        self.sessions: dict[str, HostSession] = {}
        # (profile, principal or None) -> its upstream connections
        self.principal_upstreams: dict[tuple[str, str | None], PrincipalUpstreams] = {}
        self._held_by: dict[GatewayConnection, tuple[str, str | None]] = {}  # a session's -> its principal's
        from llmc_cli import services

        self.shared: HostSessions | None = services.host_sessions(toolbox.state, idle_seconds)
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
                    profile = load_profile(str(self.served.path))
                    self.principals = principals_of(profile)
                    self.require_auth = self.require_auth or profile.profile.serve.auth_required()
                    if self.require_auth and not self.principals and self.oauth is None:
                        print(
                            f"llmc serve: {self.served.name}: no principal can reach this gateway now: add one "
                            f"with {add_principal_hint(self.served)}",
                            file=sys.stderr,
                            flush=True,
                        )
                except LlmcError as exc:
                    print(
                        f"llmc serve: {self.served.name}: principals not re-read, the old ones stay: {exc.message}",
                        file=sys.stderr,
                        flush=True,
                    )
                self._principals_stamp = stamp
            return self.principals

    def auth_required(self) -> bool:
        """Whether a request needs a token (a gateway whose principals were all revoked lets
        nobody in rather than everybody); off loopback always."""
        return self.require_auth or not is_loopback_host(self.host)

    def host_allowed(self, header: str | None) -> bool:
        if not header:
            return False
        name = urlsplit("//" + header).hostname or ""
        return (
            name.lower() in LOOPBACK_NAMES
            or is_loopback_host(name)
            or header.lower() in self.allowed_hosts
            or name.lower() in self.allowed_hosts
        )

    def origin_allowed(self, origin: str | None) -> bool:
        if origin is None:
            return True  # not a browser: DNS rebinding needs one
        parts = urlsplit(origin)
        return is_loopback_host(parts.hostname or "") or origin.rstrip("/").lower() in self.allowed_origins

    def toolbox_for(self, principal: Principal | None) -> Toolbox:
        name = principal.profile if principal and principal.profile else self.served.name
        with self.lock:
            if name not in self.toolboxes:
                from llmc_cli.config.profiles import load_profile

                served = self.toolboxes[self.served.name]
                toolbox = Toolbox(
                    load_profile(name),
                    on_stderr=served.on_stderr,
                    note=served.note,
                    require_sandbox=True,
                    serve=self.served.profile.serve,
                )
                toolbox.catalog.pool.warm_up()
                self.toolboxes[name] = toolbox
            return self.toolboxes[name]

    # -- upstream connections per principal ----------------------------------------------------

    def _upstreams_of(self, toolbox: Toolbox, principal: str | None, *, session: bool) -> PrincipalUpstreams:
        """The principal's upstream connections (made on first use), marked as used now; with
        `session`, one more live host session uses them."""
        key = (toolbox.profile.name, principal)
        with self.lock:
            pool = self.principal_upstreams.get(key)
            if pool is None:
                pool = self.principal_upstreams[key] = PrincipalUpstreams(
                    toolbox, toolbox.host_upstreams(admit=lambda server: self._admit(key, server))
                )
            pool.last_used = time.monotonic()
            if session:
                pool.sessions += 1
            return pool

    @contextlib.contextmanager
    def _admit(self, key: tuple[str, str | None], server: str) -> Iterator[None]:
        """Around the start of a principal's new upstream connection (counted while it starts):
        within the profile's `max_upstreams`, after closing those of its least recently used
        host sessions that have nothing in flight if need be; else refused."""
        pool = self.principal_upstreams[key]
        limit = pool.toolbox.profile.profile.serve.max_upstreams
        if not self._reserve(pool, limit):
            with self.lock:
                idle = sorted(
                    (
                        s
                        for s in self.sessions.values()
                        if s.connection.upstreams in pool.members
                        and s.connection.upstreams.pool.held()
                        and not s.connection.upstreams.pool.busy()
                    ),
                    key=lambda s: s.last_used,
                )
            for session in idle:
                session.connection.upstreams.release()
                if self._reserve(pool, limit):
                    break
            else:
                who = f"principal {key[1]}" if key[1] else "the hosts without a principal"
                raise ConnectionFailed(
                    f"{server}: {who} already holds {limit} upstream connections, the most "
                    f"allowed ([serve] max_upstreams); they are freed as its host sessions end"
                )
        try:
            yield
        finally:
            with self.lock:
                pool.starting -= 1

    def _reserve(self, pool: PrincipalUpstreams, limit: int) -> bool:
        """Count one more connection starting, if the principal is below its limit."""
        with self.lock:
            if pool.held() >= limit:
                return False
            pool.starting += 1
            return True

    def reap_upstreams(self) -> None:
        """Close the upstream connections of a principal no live host session, open listen
        stream or request has used for `[serve] upstream_idle_timeout` seconds (they start again
        on next use)."""
        now = time.monotonic()
        with self.lock:
            listening = {c.upstreams for c in self.listening}
            idle = [
                pool
                for pool in self.principal_upstreams.values()
                if pool.sessions == 0
                and pool.catalog not in listening
                and pool.catalog.pool.held()
                and now - pool.last_used > pool.toolbox.profile.profile.serve.upstream_idle_timeout
                and not pool.catalog.pool.busy()
            ]
        for pool in idle:
            pool.catalog.release()

    def stateless_connection(self, principal: Principal | None) -> GatewayConnection:
        """A connection for one 2026-07-28 request. That era has no host sessions (state lives in
        handles a server mints into tool arguments): its requests use their principal's upstream
        connections, which its host sessions share."""
        toolbox = self.toolbox_for(principal)
        name = principal.name if principal else None
        pool = self._upstreams_of(toolbox, name, session=False)
        return GatewayConnection(toolbox, transport="http", principal=name, upstreams=pool.catalog)

    def _host_session_connection(self, principal: Principal | None, name: str | None) -> GatewayConnection:
        """A host session's connection: its principal's upstream connections, and its own to the
        servers marked `per_session`."""
        toolbox = self.toolbox_for(principal)
        key = (toolbox.profile.name, name)
        pool = self._upstreams_of(toolbox, name, session=True)
        upstreams = pool.catalog
        if toolbox.per_session:
            upstreams = toolbox.host_upstreams(pool.catalog, toolbox.per_session, lambda server: self._admit(key, server))
        connection = GatewayConnection(toolbox, transport="http", principal=name, upstreams=upstreams)
        with self.lock:
            if upstreams is not pool.catalog:
                pool.members.add(upstreams)
            self._held_by[connection] = key
        return connection

    def _close_connection(self, connection: GatewayConnection) -> None:
        """End a session's connection and the upstream connections it owned; its principal's
        are kept for its other sessions (reaped once none uses them)."""
        connection.close()
        with self.lock:
            key = self._held_by.pop(connection, None)
            pool = self.principal_upstreams.get(key) if key is not None else None
            if pool is not None:
                pool.sessions -= 1
                pool.last_used = time.monotonic()
                pool.members.discard(connection.upstreams)
        if pool is not None and connection.upstreams is not pool.catalog:
            connection.upstreams.close()

    # -- sessions (initialize era) -------------------------------------------------------------

    def _room_for(self, principal: Principal | None) -> str | None:
        """Called with the lock held, before a session of `principal` is added: the session to
        end for it, or None. Within its max_sessions it gets one while the gateway has room;
        when the gateway is full, the principal holding the most sessions (more than this one
        will) gives up one, so nobody crowds the others out; at its own max_sessions one of its
        own ends. Refused (raised): every session there is answering a request."""
        name = principal.name if principal else None
        quota = principal.max_sessions if principal else MAX_SESSIONS
        held: dict[str | None, list[str]] = {}
        for session_id, session in self.sessions.items():
            held.setdefault(session.principal, []).append(session_id)
        mine = held.get(name, [])
        if len(mine) >= quota:
            victim = self._first_to_end(mine)
            if victim is None:
                raise Refused(
                    429,
                    f"Too Many Requests: principal {name} has {quota} sessions (its max_sessions), "
                    "each answering a request; end one (DELETE) or try again later",
                )
            return victim
        if len(self.sessions) < MAX_SESSIONS:
            return None
        for other in sorted(held, key=lambda p: len(held[p]), reverse=True):
            if len(held[other]) <= len(mine) + 1:
                break
            victim = self._first_to_end(held[other])
            if victim is not None:
                return victim
        raise Refused(503, "Service Unavailable: too many sessions; try again later")

    def _first_to_end(self, session_ids: list[str]) -> str | None:
        """The session to end for room: the least recently used of those with no stream open,
        else of those whose host only listens on its GET stream; never one answering a request."""
        sessions = self.sessions
        idle = [session_id for session_id in session_ids if not sessions[session_id].requests]
        return min(idle, key=lambda sid: (sessions[sid].stream is not None, sessions[sid].last_used), default=None)

    def open_host_session(self, principal: Principal | None) -> tuple[str, HostSession]:
        """A new session (raises Refused when the principal or the gateway has no room)."""
        connection = self._host_session_connection(principal, principal.name if principal else None)
        try:
            with self.lock:
                victim = self._room_for(principal)
                ended = self.sessions.pop(victim) if victim is not None else None
                session_id = secrets.token_urlsafe(32)
                session = self.sessions[session_id] = HostSession(connection, principal.name if principal else None)
        except Refused:
            self._close_connection(connection)
            raise
        if victim is not None and ended is not None:
            self._finish(victim, ended, forget=True)  # its host gets 404 for it from now on
        connection.attach(lambda message: self._to_stream(session, message))
        if self.shared is not None:
            # Shared before the initialize result leaves, so the host's next request may reach any replica.
            connection.on_initialize = lambda: self._share(session_id, session)
        return session_id, session

    def _share(self, session_id: str, session: HostSession) -> None:
        assert self.shared is not None
        connection = session.connection
        try:
            self.shared.save(
                session_id,
                {
                    "principal": session.principal,
                    "protocolVersion": connection.legacy_version,
                    "clientInfo": connection.client_info,
                    "clientCapabilities": connection.client_capabilities,
                },
            )
        except LlmcError as exc:
            from llmc_cli.mcp.server import RequestError

            self.end_host_session(session_id)  # not resumable elsewhere: no session at all
            raise RequestError(jsonrpc.INTERNAL_ERROR, f"cannot start a session: {exc.message}") from None
        session.shared = True

    def find_host_session(self, session_id: str, principal: Principal | None) -> HostSession | None:
        with self.lock:
            session = self.sessions.get(session_id)
        held = session is not None
        if session is None and self.shared is not None:
            session = self._resume(session_id, principal)  # read from the store just now
        # A session belongs to the principal that opened it: another token cannot ride on it.
        if session is None or session.principal != (principal.name if principal else None):
            return None
        session.last_used = time.monotonic()
        if held and self.shared is not None and session.shared and not self._still_shared(session_id, session):
            self.end_host_session(session_id)  # the host ended it through another replica
            return None
        return session

    def _still_shared(self, session_id: str, session: HostSession) -> bool:
        """Whether a session held here is still open for the other replicas: checked with every
        request (a DELETE through another replica holds at once, whatever its notice to this
        replica's listener is doing), and marked as used every idle_seconds/4."""
        assert self.shared is not None
        try:
            if session.last_used - session.last_shared > self.idle_seconds / 4:
                session.last_shared = session.last_used
                return self.shared.resume(session_id) is not None  # keeps it alive for the other replicas
            return self.shared.exists(session_id)
        except LlmcError:
            return True  # the database is down: the request goes on here, its calls refuse as they need it

    def _resume(self, session_id: str, principal: Principal | None) -> HostSession | None:
        """A session another replica opened, from the shared store: a new connection with its
        handshake (version, client info and capabilities); what ran in the old one is gone."""
        assert self.shared is not None
        try:
            record = self.shared.resume(session_id)
        except LlmcError:
            return None  # cannot tell: the host hears 404 and starts a new session
        owner = principal.name if principal else None
        if record is None or record.get("principal") != owner:
            return None
        connection = self._host_session_connection(principal, owner)
        version = record.get("protocolVersion")
        connection.legacy_version = version if isinstance(version, str) else None
        connection.client_info = object_at(record, "clientInfo")
        connection.client_capabilities = object_at(record, "clientCapabilities")
        victim = ended = None
        with self.lock:
            if session_id not in self.sessions:
                try:
                    victim = self._room_for(principal)
                except Refused:
                    victim = session_id  # no room: not resumed
                else:
                    ended = self.sessions.pop(victim) if victim is not None else None
            existing = self.sessions.get(session_id)
            resumed = existing is None and victim != session_id
            if resumed:
                session = self.sessions[session_id] = HostSession(connection, owner, shared=True)
        if not resumed:
            self._close_connection(connection)  # takes the lock itself
            return existing  # resumed by a concurrent request, or no room
        if victim is not None and ended is not None:
            self._finish(victim, ended, forget=True)
        connection.attach(lambda message: self._to_stream(session, message))
        return session

    @contextlib.contextmanager
    def in_use(self, session: HostSession | None) -> Iterator[None]:
        """Around a request of the session: a session answering one is not idle (not ended to
        make room for another)."""
        if session is None:
            yield
            return
        with self.lock:
            session.requests += 1
        try:
            yield
        finally:
            with self.lock:
                session.requests -= 1

    def end_host_session(self, session_id: str, *, forget: bool = False) -> None:
        """End a session here; `forget`: everywhere (the host's DELETE), not just on this replica
        (idle here, or this replica stopping: another may still serve it)."""
        with self.lock:
            session = self.sessions.pop(session_id, None)
        if session is not None or forget:
            self._finish(session_id, session, forget=forget)

    def _finish(self, session_id: str, session: HostSession | None, *, forget: bool) -> None:
        """End a session taken out of `sessions`."""
        if forget and self.shared is not None:
            try:
                self.shared.forget(session_id)
            except LlmcError:
                pass  # it expires there by itself
        if session is not None:
            if session.stream is not None:
                session.stream.put(None)
            self._close_connection(session.connection)

    @staticmethod
    def _to_stream(session: HostSession, message: JSONObject) -> None:
        if session.stream is not None:  # no GET stream open: a notification nobody listens for
            session.stream.put(message)

    def start_sharing(self, log: Callable[[str], None]) -> None:
        """With a shared store: this replica's lease, and the listener that ends here at once the
        sessions a host ended through another replica."""
        if self.shared is None:
            return

        def held() -> list[str]:
            with self.lock:
                return [sid for sid, session in self.sessions.items() if session.shared]

        self.shared.start(self.stopped, held, self.end_host_session, log)

    def ready(self) -> bool:
        """What /readyz says: serving, and the state database (when there is one) answers."""
        return not self.stopped.is_set() and (self.shared is None or self.shared.ready())

    def expire_idle(self) -> None:
        """End sessions nobody used for idle_seconds, and close upstream connections no session
        uses (reap_upstreams); runs until the server stops."""
        reap = self.served.profile.serve.upstream_idle_timeout
        while not self.stopped.wait(min(30.0, max(0.5, min(self.idle_seconds, reap) / 4))):
            cutoff = time.monotonic() - self.idle_seconds
            with self.lock:
                idle = [sid for sid, s in self.sessions.items() if s.last_used < cutoff and s.stream is None]
            for session_id in idle:
                self.end_host_session(session_id)
            self.reap_upstreams()

    def status(self) -> dict[str, Any]:
        with self.lock:
            sessions = len(self.sessions)
        return {
            "status": "ok",
            "profile": self.served.name,
            "sessions": sessions,
            "profiles": {name: {"servers": toolbox.catalog.status()} for name, toolbox in self.toolboxes.items()},
            "auth": self.auth_mode(),
        }

    def auth_mode(self) -> str:
        """How requests authenticate: bearer, oauth, bearer+oauth, or none (open)."""
        if not self.auth_required():
            return "none"
        bearer = bool(self.principals) or self.oauth is None  # no principal now: bearer tokens, none valid
        return "+".join(m for m, on in (("bearer", bearer), ("oauth", self.oauth is not None)) if on)

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
            self.end_host_session(session_id)
        for pool in self.principal_upstreams.values():
            pool.catalog.close()
        for toolbox in self.toolboxes.values():
            toolbox.close()  # the outcomes still waiting are written
        if self.shared is not None:
            self.shared.stop()
