"""The gateway's toolboxes (one per profile a principal is served) and each principal's upstream
connections: shared by its host sessions and its 2026-07-28 requests, never by another
principal's, within its `[serve] max_upstreams`, closed after `upstream_idle_timeout` unused.
Plain objects: no HTTP here."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from llmc_cli.catalog import Catalog
from llmc_cli.config.profiles import load_profile
from llmc_cli.errors import ConnectionFailed
from llmc_cli.gateway.connection import GatewayConnection
from llmc_cli.gateway.principals import Principal
from llmc_cli.gateway.toolbox import Toolbox
from llmc_cli.services.catalogs import authenticated

Key = tuple[str, str | None]  # (profile, principal or None)


class Member(Protocol):
    """A host session as the pools see it: its connection, and when it was last used."""

    connection: GatewayConnection
    last_used: float


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


class Upstreams:
    """Toolboxes per profile and upstream connections per principal. `sessions` lists the live
    host sessions (the least recently used idle ones give up their own upstream connections
    when their principal is at its max_upstreams)."""

    def __init__(self, toolbox: Toolbox, sessions: Callable[[], list[Member]]) -> None:
        self.served = toolbox.profile
        self.toolboxes: dict[str, Toolbox] = {toolbox.profile.name: toolbox}
        self.pools: dict[Key, PrincipalUpstreams] = {}
        self._held_by: dict[GatewayConnection, Key] = {}  # a session's connection -> its principal's
        self._sessions = sessions
        self.lock = threading.Lock()
        if not authenticated(toolbox.profile):
            # Without principals every host is the same one and uses the connections the gateway
            # starts for its tool lists: those count in its max_upstreams like a principal's own,
            # and each (re)start of one is admitted (a crashed server's next start included).
            key: Key = (toolbox.profile.name, None)
            self.pools[key] = PrincipalUpstreams(toolbox, toolbox.catalog)
            pool = toolbox.catalog.pool
            pool.options = pool.options._replace(admit=lambda server: self._admit(key, server))

    def profile_of(self, principal: Principal | None) -> str:
        """The profile a principal is served now (the principals are re-read when the served
        profile's file changes), by the name its toolbox is kept under."""
        return principal.profile if principal and principal.profile else self.served.name

    def serves(self, connection: GatewayConnection, principal: Principal | None) -> bool:
        """Whether a connection is of the profile its principal is served now."""
        return self.toolboxes.get(self.profile_of(principal)) is connection.toolbox

    def toolbox_for(self, principal: Principal | None) -> Toolbox:
        name = self.profile_of(principal)
        with self.lock:
            if name not in self.toolboxes:
                served = self.toolboxes[self.served.name]
                toolbox = Toolbox(
                    load_profile(name),
                    on_stderr=served.on_stderr,
                    note=served.note,
                    require_sandbox=True,
                    serve=self.served.profile.serve,
                )
                toolbox.warm_up()
                self.toolboxes[name] = toolbox
            return self.toolboxes[name]

    def _pool(self, toolbox: Toolbox, principal: str | None, *, session: bool) -> PrincipalUpstreams:
        """The principal's upstream connections (made on first use), marked as used now; with
        `session`, one more live host session uses them."""
        key = (toolbox.profile.name, principal)
        with self.lock:
            pool = self.pools.get(key)
            if pool is None:
                # Without principals (a gateway that asks for none) every host is the same one:
                # its connections are the shared ones the gateway warmed up at start (made in
                # __init__), so a first call pays no second start and no server runs twice. A
                # principal has its own.
                anonymous = principal is None and toolbox is self.toolboxes[self.served.name]
                catalog = toolbox.catalog if anonymous else toolbox.host_upstreams(admit=lambda server: self._admit(key, server))
                pool = self.pools[key] = PrincipalUpstreams(toolbox, catalog)
            pool.last_used = time.monotonic()
            if session:
                pool.sessions += 1
            return pool

    @contextlib.contextmanager
    def _admit(self, key: Key, server: str) -> Iterator[None]:
        """Around the start of a principal's new upstream connection (counted while it starts):
        within the profile's `max_upstreams`, after closing those of its least recently used
        host sessions that have nothing in flight if need be; else refused."""
        pool = self.pools[key]
        limit = pool.toolbox.profile.profile.serve.max_upstreams
        if not self._reserve(pool, limit):
            idle = sorted(
                (
                    s
                    for s in self._sessions()
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

    def reap(self, listening: set[Catalog]) -> None:
        """Close the upstream connections of a principal no live host session, open listen
        stream (`listening`: their upstreams) or request has used for `[serve]
        upstream_idle_timeout` seconds (they start again on next use)."""
        now = time.monotonic()
        with self.lock:
            idle = [
                pool
                for pool in self.pools.values()
                if pool.sessions == 0
                and pool.catalog is not pool.toolbox.catalog  # the shared ones stay, as they always did
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
        pool = self._pool(toolbox, name, session=False)
        return GatewayConnection(toolbox, transport="http", principal=name, upstreams=pool.catalog)

    def session_connection(self, principal: Principal | None) -> GatewayConnection:
        """A host session's connection: its principal's upstream connections, and its own to the
        servers marked `per_session`."""
        toolbox = self.toolbox_for(principal)
        name = principal.name if principal else None
        key = (toolbox.profile.name, name)
        pool = self._pool(toolbox, name, session=True)
        upstreams = pool.catalog
        if toolbox.per_session:
            upstreams = toolbox.host_upstreams(pool.catalog, toolbox.per_session, lambda server: self._admit(key, server))
        connection = GatewayConnection(toolbox, transport="http", principal=name, upstreams=upstreams)
        with self.lock:
            if upstreams is not pool.catalog:
                pool.members.add(upstreams)
            self._held_by[connection] = key
        return connection

    def close_connection(self, connection: GatewayConnection) -> None:
        """End a session's connection and the upstream connections it owned; its principal's
        are kept for its other sessions (reaped once none uses them)."""
        connection.close()
        with self.lock:
            key = self._held_by.pop(connection, None)
            pool = self.pools.get(key) if key is not None else None
            if pool is not None:
                pool.sessions -= 1
                pool.last_used = time.monotonic()
                pool.members.discard(connection.upstreams)
        if pool is not None and connection.upstreams is not pool.catalog:
            connection.upstreams.close()

    def status(self, profile: str | None = None) -> dict[str, object]:
        """The servers of each toolbox loaded (only `profile`'s when one is named)."""
        with self.lock:
            toolboxes = dict(self.toolboxes)
        return {
            name: {"servers": toolbox.catalog.status()}
            for name, toolbox in toolboxes.items()
            if profile is None or name == profile
        }

    def close(self) -> None:
        for pool in list(self.pools.values()):
            pool.catalog.close()
        for toolbox in list(self.toolboxes.values()):
            toolbox.close()  # the outcomes still waiting are written
