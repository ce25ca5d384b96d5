"""What one host connection listens for: initialize-era `resources/subscribe`, and 2026-07-28
`subscriptions/listen` streams (basic/patterns/subscriptions.mdx), and the delivery of upstream
changes to them.

A listen request stays open: its acknowledgment goes first, then every notification it asked for
carries its request id under `_meta` subscriptionId; it ends when the host cancels it (HTTP:
drops the stream; stdio: notifications/cancelled) and, when the connection closes first, with a
`complete` result. Resource URIs are honoured where the upstream offers resources/subscribe (the
toolbox subscribes there while any host listens); list changes of every upstream are relayed.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from llmc_cli.errors import LlmcError, RpcError
from llmc_cli.gateway.host import Host
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.messages import JSON, JSONObject, RequestId
from llmc_cli.mcp.server import RequestError, Send
from llmc_cli.mcp.versions import META_PREFIX as META

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog
    from llmc_cli.gateway.host_reads import HostReads
    from llmc_cli.gateway.toolbox import Toolbox

SUBSCRIPTION = META + "subscriptionId"
FLAGS = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}


class ListeningHost(Host, Protocol):
    """What a host's subscriptions (listening.py) use of its connection."""

    @property
    def toolbox(self) -> Toolbox: ...

    @property
    def upstreams(self) -> Catalog: ...

    @property
    def channel(self) -> Send | None: ...

    @property
    def legacy_version(self) -> str | None: ...

    @property
    def reads(self) -> HostReads: ...  # routes names as reads do: what a host may not read, it may not watch

    @property
    def clearance(self) -> str | None: ...  # what it may watch: no server above it


@dataclass
class Listen:
    send: Send
    methods: set[str]  # the list_changed notifications it asked for
    resources: set[tuple[str, str]] = field(default_factory=set)  # (server, upstream URI)


class Subscriptions:
    def __init__(self, connection: ListeningHost) -> None:
        self.connection = connection
        self.subscribed: set[tuple[str, str]] = set()  # resources/subscribe (initialize era)
        self.listens: dict[RequestId, Listen] = {}  # subscriptions/listen request id -> what it asked for
        # A listen's acknowledgment and its registration are one step to close(): a gateway
        # stopping between them would otherwise find no listen to complete, and the stream would
        # end without its `complete` result.
        self.lock = threading.Lock()
        self.closed = False

    # -- initialize era ------------------------------------------------------------------------

    def subscribe(self, method: str, params: JSONObject) -> JSONObject:
        """resources/(un)subscribe; updates reach the connection's channel."""
        toolbox = self.connection.toolbox
        if method == "resources/subscribe":  # what the policy hides cannot be watched either
            route = self.connection.reads.readable_route(params.get("uri"), "resource")
        else:
            route = self.connection.reads.route(params.get("uri"), "resource")
        try:
            if method == "resources/subscribe":
                toolbox.subscribers.subscribe(self.connection, *route)
                self.subscribed.add(route)
            else:
                self.subscribed.discard(route)
                self._release(route)
        except RpcError as exc:
            raise RequestError(exc.code or jsonrpc.INTERNAL_ERROR, exc.message, exc.data) from None
        except LlmcError as exc:
            raise RequestError(jsonrpc.INTERNAL_ERROR, exc.message) from None
        return {}

    # -- 2026-07-28 ----------------------------------------------------------------------------

    def listen(self, msg_id: RequestId, params: JSONObject, send: Send) -> None:
        """Open a listen stream: acknowledge what is honoured, then relay it until cancelled."""
        wanted = params.get("notifications")
        wanted = wanted if isinstance(wanted, dict) else {}
        honored: JSONObject = {flag: True for flag in FLAGS if wanted.get(flag) is True}
        listen = Listen(send, {FLAGS[flag] for flag in honored})
        uris = wanted.get("resourceSubscriptions")
        if isinstance(uris, list):
            subscribed: list[JSON] = []
            honored["resourceSubscriptions"] = subscribed
            connection = self.connection
            for uri in uris:
                route = connection.toolbox.routes.route_uri(uri)
                if route is None or not connection.toolbox.listing.readable(
                    "resource", *route, connection.upstreams, connection.clearance
                ):
                    continue  # unknown, hidden by the policy, or above the host's clearance: not honoured
                try:
                    self.connection.toolbox.subscribers.subscribe(self.connection, *route)
                except LlmcError:
                    continue  # the upstream offers no subscriptions (or is down): not honoured
                listen.resources.add(route)
                subscribed.append(uri)
        with self.lock:
            send(
                jsonrpc.notification(
                    "notifications/subscriptions/acknowledged", {"_meta": {SUBSCRIPTION: msg_id}, "notifications": honored}
                )
            )
            if not self.closed:
                self.listens[msg_id] = listen  # after the acknowledgment: nothing may come before it
                return
        # The connection ended (or the gateway stops) while the listen was being opened.
        send(_complete(msg_id))
        for route in listen.resources:
            self._release(route)

    def cancelled(self, msg_id: RequestId | None) -> None:
        """The host cancelled a listen request: it gets no reply (cancellation.mdx)."""
        listen = self.listens.pop(msg_id, None) if msg_id is not None else None
        if listen is not None:
            for route in listen.resources:
                self._release(route)

    def close(self) -> None:
        """The connection ends: its open listens end gracefully (and the toolbox forgets it)."""
        with self.lock:
            self.closed = True
            listens, self.listens = self.listens, {}
        for msg_id, listen in listens.items():
            try:
                listen.send(_complete(msg_id))
            except OSError:
                pass  # the host is gone already

    # -- delivery ------------------------------------------------------------------------------

    def changed(self, method: str) -> None:
        """An upstream's list changed: on the initialize-era channel, and to listens that asked."""
        if self.connection.channel is not None and self.connection.legacy_version is not None:
            self.connection.channel(jsonrpc.notification(method))
        for msg_id, listen in list(self.listens.items()):
            if method in listen.methods:
                listen.send(jsonrpc.notification(method, {"_meta": {SUBSCRIPTION: msg_id}}))

    def updated(self, server: str, params: JSONObject) -> None:
        """An upstream resource changed: to the channel if subscribed there, and to listens on it."""
        route = (server, str(params.get("uri")))
        exposed = {**params, "uri": self.connection.toolbox.routes.expose(*route)}
        if route in self.subscribed and self.connection.channel is not None:
            self.connection.channel(jsonrpc.notification("notifications/resources/updated", exposed))
        for msg_id, listen in list(self.listens.items()):
            if route in listen.resources:
                listen.send(jsonrpc.notification("notifications/resources/updated", {**exposed, "_meta": {SUBSCRIPTION: msg_id}}))

    def _release(self, route: tuple[str, str]) -> None:
        """Unsubscribe upstream unless this connection still wants the resource elsewhere."""
        if route not in self.subscribed and not any(route in listen.resources for listen in self.listens.values()):
            self.connection.toolbox.subscribers.unsubscribe(self.connection, *route)


def _complete(msg_id: RequestId) -> JSONObject:
    """The result that ends a listen stream gracefully (subscriptions.mdx, Graceful Closure)."""
    return jsonrpc.result(msg_id, {"resultType": "complete", "_meta": {SUBSCRIPTION: msg_id}})
