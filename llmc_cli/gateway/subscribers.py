"""The upstream side of what hosts listen for, shared by every host connection of a toolbox: a
resource is subscribed upstream while at least one host is subscribed to it (an upstream
connection may be shared), an upstream's resource update reaches the hosts subscribed to it
through that connection, and an upstream's list change reaches the host connections that may see
that server through that connection.

A 2026-07-28 upstream announces changes only on a `subscriptions/listen` stream the client opens
(gateway/upstream_listen.py): the gateway opens one on each new connection to such an upstream
(`connected`). Always, not on a host's first listen: the gateway's own listings (a host's
tools/list is served from them) go stale without it. The resources hosts watch through that
connection join its filter (a new stream), as they would be subscribed to upstream in the older
era. What arrives reaches the hosts through the same hooks, and the same fan-out below."""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

from llmc_cli import policy
from llmc_cli.errors import LlmcError, RpcError
from llmc_cli.gateway.relay import forward
from llmc_cli.gateway.upstream_listen import UpstreamListen
from llmc_cli.guard.clearance import cleared
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.messages import object_at
from llmc_cli.mcp.versions import MODERN_VERSIONS
from llmc_cli.model import JSONObject

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog
    from llmc_cli.config.profiles import LoadedProfile
    from llmc_cli.gateway.host import Host
    from llmc_cli.mcp.session import ClientSession

LIST_CHANGED = ("notifications/tools/list_changed", "notifications/resources/list_changed", "notifications/prompts/list_changed")


class Subscribers:
    def __init__(self, catalog: Catalog, profile: LoadedProfile) -> None:
        self.catalog = catalog  # the shared upstream connections
        self.profile = profile  # whose clearances and policy say which hosts hear of which server
        self.connections: weakref.WeakSet[Host] = weakref.WeakSet()  # every open host connection: for list_changed
        self._lock = threading.Lock()
        # (upstream catalog, server, upstream URI) -> the host connections subscribed to it: an
        # upstream connection may be shared, so it is subscribed while at least one host is
        self._subscribers: dict[tuple[Catalog, str, str], set[Host]] = {}
        # each 2026-07-28 upstream connection's listen stream (gone with the connection)
        self._listens: weakref.WeakKeyDictionary[ClientSession, UpstreamListen] = weakref.WeakKeyDictionary()

    def connected(self, server: str, session: ClientSession) -> None:
        """A new upstream connection (catalog/pool.py on_connected): one of 2026-07-28 is listened
        to, for its list changes and the resources hosts still watch through it (a connection
        reclaimed while idle, started again). Not waited for: it runs under the server's lock."""
        if session.era != "modern":
            return
        listen = self._listens[session] = UpstreamListen(session)
        listen.open(lambda: self._watched(server, session), wait=False)

    def _watched(self, server: str, session: ClientSession) -> list[str]:
        """The URIs hosts watch on this connection of the server."""
        with self._lock:
            keys = list(self._subscribers)
        return sorted(uri for upstreams, name, uri in keys if name == server and upstreams.pool.sessions.get(server) is session)

    def can_subscribe(self) -> bool:
        """Whether some upstream offers resources/subscribe: an initialize-era one that declares it
        (2026-07-28 upstreams have subscriptions/listen instead, which llmc's client does not
        speak yet; one that cannot start offers nothing)."""

        def offers(server: str) -> bool:
            session = self.catalog.session(server)
            if session.protocol_version in MODERN_VERSIONS:
                listen = self._listens.get(session)
                return listen is not None and listen.offers_updates
            return object_at(session.capabilities, "resources").get("subscribe") is True

        per_server, _failures = self.catalog.each(offers)
        return any(per_server.values())

    def subscribe(self, connection: Host, server: str, uri: str) -> None:
        """A host subscribes to an upstream resource; RpcError/LlmcError as the upstream refused."""
        key = (connection.upstreams.serving(server), server, uri)
        with self._lock:
            first = key not in self._subscribers
            self._subscribers.setdefault(key, set()).add(connection)
        if first:
            try:
                session = key[0].session(server)
                if session.era != "modern":
                    forward("resources/subscribe", server, {"uri": uri}, key[0])
                elif uri not in self._listen(server, session):
                    raise RpcError(f"{server}: the server does not watch {uri} for changes", jsonrpc.INVALID_PARAMS)
            except LlmcError:
                with self._lock:
                    self._subscribers.pop(key, None)
                raise

    def unsubscribe(self, connection: Host, server: str, uri: str) -> None:
        key = (connection.upstreams.serving(server), server, uri)
        with self._lock:
            hosts = self._subscribers.get(key)
            if hosts is None or connection not in hosts:
                return
            hosts.discard(connection)
            last = not hosts
            if last:
                del self._subscribers[key]
        if last:
            try:
                session = key[0].pool.sessions.get(server)  # none: it ended, and its stream with it
                if session is not None and session.era == "modern":
                    self._listen(server, session)
                elif session is not None:
                    forward("resources/unsubscribe", server, {"uri": uri}, key[0])
            except LlmcError:
                pass  # the upstream may be gone: nothing is subscribed there any more either way

    def _listen(self, server: str, session: ClientSession) -> list[str]:
        """The connection's stream, anew for the URIs now watched on it: those it honours."""
        listen = self._listens.get(session)
        if listen is None:  # it was connected before the gateway listened (cannot be): no updates
            return []
        return listen.open(lambda: self._watched(server, session))

    def forget(self, connection: Host) -> None:
        """A host connection closed: it hears no more list changes, and its subscriptions end with it."""
        self.connections.discard(connection)
        with self._lock:
            keys = [key for key, hosts in self._subscribers.items() if connection in hosts]
        for _upstreams, server, uri in keys:
            self.unsubscribe(connection, server, uri)

    def resource_updated(self, params: JSONObject, source: Catalog) -> None:
        """An upstream's resource changed: every host subscribed to it through that catalog's
        connections hears, under its name there. The hook does not say which server sent it, so a
        URI two servers share reaches the subscribers of both (they re-read; nothing is revealed
        that a read would not)."""
        uri = params.get("uri")
        with self._lock:
            targets = [
                (server, host)
                for (upstreams, server, u), hosts in self._subscribers.items()
                if u == uri and upstreams is source
                for host in hosts
            ]
        for server, host in targets:
            host.subscriptions.updated(server, params)

    def list_changed(self, server: str, method: str, source: Catalog) -> None:
        """A server's list changed on `source`'s connection. A host hears it only if it may see
        that server (within its clearance; a server the policy denies as a whole shows nothing)
        and, for a principal's or a host session's own connection, only if that connection
        serves it: one principal's upstream does not signal another's hosts. A change on the
        shared connections is what every host's listing is made of: all the others hear it."""
        profile = self.profile.profile
        if method not in LIST_CHANGED or policy.whole_server_denial(server, profile.policy) is not None:
            return
        for connection in list(self.connections):
            if cleared(profile, server, connection.clearance) and self._served(connection, server, source):
                connection.subscriptions.changed(method)

    def _served(self, connection: Host, server: str, source: Catalog) -> bool:
        """Whether `source` serves this server to the host: the shared connections serve every
        host's listing; a host's or principal's own only those it serves. Judged on the server's
        reader thread: a root that cannot say (its connection failed) counts as not serving."""
        if source is self.catalog:
            return True
        try:
            return connection.upstreams.serving(server) is source
        except LlmcError:
            return False
