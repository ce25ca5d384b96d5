"""The gateway's core, with no HTTP in it: who may ask (access.py's Door), a toolbox per profile
and each principal's upstream connections (upstreams.py), and the initialize-era host sessions
(sessions.py): opened, found, shared with other replicas through a state database, expired,
ended, and what /status says of them. The HTTP adapter (http.py) turns requests into these
calls; tests drive them in process."""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from llmc_cli import services
from llmc_cli.errors import LlmcError
from llmc_cli.gateway.access import Door, parse_address
from llmc_cli.gateway.admission import Refused
from llmc_cli.gateway.connection import GatewayConnection
from llmc_cli.gateway.principals import Principal
from llmc_cli.gateway.sessions import UNSTARTED_SHARE, HostLog, HostSession, room_for
from llmc_cli.gateway.toolbox import Toolbox
from llmc_cli.gateway.upstreams import Upstreams
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.messages import object_at
from llmc_cli.mcp.server import RequestError

if TYPE_CHECKING:
    from llmc_cli.store.state import HostSessions

__all__ = ["HttpGateway", "parse_address"]

MAX_CONNECTIONS = 1024  # requests admitted at once (a worker thread each): sessions' streams and calls
REQUEST_SECONDS = 30.0  # for a whole request to arrive, and for a kept-alive connection's next one
IDLE_SECONDS = 1800.0
CLOSE_SECONDS = 5.0  # on shutdown, how long open listen streams get to write their `complete`


class HttpGateway:
    """What the request handlers share: the door, toolboxes and upstreams, host sessions."""

    def __init__(
        self, toolbox: Toolbox, host: str, port: int, *, idle_seconds: float = IDLE_SECONDS, session_suffix: str = ""
    ) -> None:
        served = toolbox.profile
        self.session_suffix = session_suffix  # names the worker that holds a session (forward.py)
        self.served = served
        self.door = Door(served, host)
        self.host, self.port = host, port
        self.idle_seconds = idle_seconds
        self.sessions: dict[str, HostSession] = {}
        self.lock = threading.Lock()

        def listed() -> list[Any]:
            with self.lock:
                return list(self.sessions.values())

        self.upstreams = Upstreams(toolbox, listed)
        self.log = HostLog(toolbox.note)
        self.shared: HostSessions | None = services.host_sessions(toolbox.state, idle_seconds)
        self.stopped = threading.Event()
        # The connections of the 2026-07-28 listen streams open now: when the gateway stops, each
        # stream gets its `complete` result before the process ends (basic/patterns/subscriptions.mdx,
        # Graceful Closure), so the host knows to listen again rather than suspect a failure.
        self.listening: set[GatewayConnection] = set()
        self._drained = threading.Condition(self.lock)

    # -- sessions (initialize era) -------------------------------------------------------------

    def open_host_session(self, principal: Principal | None) -> tuple[str, HostSession]:
        """A new session (raises Refused when the principal or the gateway has no room)."""
        connection = self.upstreams.session_connection(principal)
        try:
            with self.lock:
                victim = room_for(self.sessions, principal)
                ended = self.sessions.pop(victim) if victim is not None else None
                session_id = secrets.token_urlsafe(32) + self.session_suffix
                session = self.sessions[session_id] = HostSession(connection, principal.name if principal else None)
        except Refused:
            self.upstreams.close_connection(connection)
            raise
        if victim is not None and ended is not None:
            self._finish(victim, ended, forget=True, why="ended to make room")  # its host gets 404 for it from now on
        connection.attach(session.send)

        def initialized() -> None:
            self.log.opened(session)
            if self.shared is not None:
                # Shared before the initialize result leaves, so the host's next request may reach any replica.
                self._share(session_id, session)

        connection.on_initialize = initialized
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
        if not self.upstreams.serves(session.connection, principal):
            # The principal is served another profile since the session opened (an edit of the
            # served profile's principals): its policy must not go on under the old one. The
            # host hears 404 and starts a session under the new one.
            self.end_host_session(session_id, forget=True, why="its principal's profile changed")
            return None
        session.last_used = time.monotonic()
        if (
            held
            and self.shared is not None
            and session.shared
            and not still_shared(self.shared, session_id, session, self.idle_seconds)
        ):
            self.end_host_session(session_id, why="ended through another replica")
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
        owner = principal.name if principal else None
        if record is None or record.get("principal") != owner:
            return None
        connection = self.upstreams.session_connection(principal)
        version = record.get("protocolVersion")
        connection.legacy_version = version if isinstance(version, str) else None
        connection.client_info = object_at(record, "clientInfo")
        connection.client_capabilities = object_at(record, "clientCapabilities")
        victim = ended = None
        with self.lock:
            if session_id not in self.sessions:
                try:
                    victim = room_for(self.sessions, principal)
                except Refused:
                    victim = session_id  # no room: not resumed
                else:
                    ended = self.sessions.pop(victim) if victim is not None else None
            existing = self.sessions.get(session_id)
            resumed = existing is None and victim != session_id
            if resumed:
                session = self.sessions[session_id] = HostSession(connection, owner, shared=True, stage="listed")
        if not resumed:
            self.upstreams.close_connection(connection)
            return existing  # resumed by a concurrent request, or no room
        if victim is not None and ended is not None:
            self._finish(victim, ended, forget=True, why="ended to make room")
        connection.attach(session.send)
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

    def end_host_session(self, session_id: str, *, forget: bool = False, why: str = "ended") -> None:
        """End a session here; `forget`: everywhere (the host's DELETE), not just on this replica
        (idle here, or this replica stopping: another may still serve it)."""
        with self.lock:
            session = self.sessions.pop(session_id, None)
        if session is not None or forget:
            self._finish(session_id, session, forget=forget, why=why)

    def _finish(self, session_id: str, session: HostSession | None, *, forget: bool, why: str) -> None:
        """End a session taken out of `sessions`."""
        if forget and self.shared is not None:
            try:
                self.shared.forget(session_id)
            except LlmcError:
                pass  # it expires there by itself
        if session is not None:
            if session.stream is not None:
                session.stream.put(None)
            self.upstreams.close_connection(session.connection)
            self.log.ended(session, why)

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
        """End sessions unused for their idle limit (a share of idle_seconds by how far each got,
        sessions.py), and close upstream connections no session uses; runs until the server stops."""
        reap = self.served.profile.serve.upstream_idle_timeout
        shortest = min(self.idle_seconds * UNSTARTED_SHARE, reap)
        while not self.stopped.wait(min(30.0, max(0.2, shortest / 4))):
            now = time.monotonic()
            with self.lock:
                idle = [
                    (sid, s.stage)
                    for sid, s in self.sessions.items()
                    if s.stream is None and not s.requests and now - s.last_used > s.idle_limit(self.idle_seconds)
                ]
                listening = {c.upstreams for c in self.listening}
            for session_id, stage in idle:
                why = "never got past initialize" if stage == "unstarted" else f"idle ({stage})"
                self.end_host_session(session_id, why=why)
            self.upstreams.reap(listening)

    def status(self, principal: Principal | None) -> dict[str, Any]:
        """What GET /status says: a principal sees its own sessions and its profile's servers only
        (no principal: a gateway without auth, on loopback, shows everything)."""
        name = principal.name if principal else None
        now = time.monotonic()
        with self.lock:
            mine = [s for s in self.sessions.values() if principal is None or s.principal == name]
        profile = None
        if principal is not None:
            profile = principal.profile or self.served.name
        return {
            "status": "ok",
            "profile": self.served.name if principal is None else profile,
            "principal": name,
            "sessions": len(mine),
            "hosts": [s.describe(now) for s in sorted(mine, key=lambda s: s.opened)],
            "profiles": self.upstreams.status(profile),
            "auth": self.door.auth_mode(),
        }

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

    def drain(self) -> None:
        """Stop: open listen streams get their `complete` result (up to CLOSE_SECONDS), sessions'
        GET streams end. The server still runs, to write them."""
        self.stopped.set()
        with self.lock:
            streams = list(self.listening)
        for connection in streams:
            connection.subscriptions.close()  # its handler writes the `complete` result and returns
        with self.lock:
            self._drained.wait_for(lambda: not self.listening, timeout=CLOSE_SECONDS)

    def close(self) -> None:
        if not self.stopped.is_set():
            self.drain()
        for session_id in list(self.sessions):
            self.end_host_session(session_id, why="the gateway stopped")
        self.upstreams.close()
        if self.shared is not None:
            self.shared.stop()


def still_shared(shared: HostSessions, session_id: str, session: HostSession, idle_seconds: float) -> bool:
    """Whether a session held here is still open for the other replicas: checked with every
    request (a DELETE through another replica holds at once, whatever its notice to this
    replica's listener is doing), and marked as used every idle_seconds/4."""
    try:
        if session.last_used - session.last_shared > idle_seconds / 4:
            session.last_shared = session.last_used
            return shared.resume(session_id) is not None  # keeps it alive for the other replicas
        return shared.exists(session_id)
    except LlmcError:
        return True  # the database is down: the request goes on here, its calls refuse as they need it
