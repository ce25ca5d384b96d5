"""One host's connection to the gateway: mcp/server.py's dual-era core (initialize, discover,
pagination, cancellation, requests to the client) with the toolbox's methods behind it.

The connection says who is asking (the host's clientInfo, capabilities, transport, principal and
clearance) and hands each method to the part that answers it: host_reads.py HostReads the lists,
resources/read, prompts/get and completion/complete; tool_calls.py ToolCalls tools/call (policy,
audit, confirmation by the host's user) and the cancellation of calls in flight upstream;
listening.py Subscriptions resources/subscribe and subscriptions/listen. They see the connection
only through a Protocol of what they use, so the imports go one way: from here to them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING

from llmc_cli import __version__
from llmc_cli.gateway.host_reads import HostReads
from llmc_cli.gateway.listening import Subscriptions
from llmc_cli.gateway.tool_calls import ToolCalls
from llmc_cli.gateway.toolbox import Toolbox
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.messages import JSON, JSONObject, RequestId, object_at
from llmc_cli.mcp.server import McpServer, RequestError, Send
from llmc_cli.mcp.versions import META_PREFIX as META
from llmc_cli.mcp.workers import shared

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog
    from llmc_cli.services.calls import Conclusions

PAGE_SIZE = 100


# The HTTP peer (address, port) of the request being handled on this thread, set by the HTTP
# handler around dispatch, for the request's SERVER span.
HTTP_PEER: ContextVar[tuple[str, int] | None] = ContextVar("llmc_gateway_http_peer", default=None)


class GatewayConnection(McpServer):
    pooled = frozenset(
        {
            "tools/list",
            "resources/list",
            "resources/templates/list",
            "resources/read",
            "prompts/list",
            "prompts/get",
            "completion/complete",
        }
    )

    def __init__(
        self, toolbox: Toolbox, *, transport: str = "stdio", principal: str | None = None, upstreams: Catalog | None = None
    ) -> None:
        profile = toolbox.profile.name
        # Calls run on threads every connection shares: a 2026-07-28 host gets a connection per
        # request, which would otherwise start a pool (and a thread) for each.
        super().__init__(
            "llmc-gateway",
            __version__,
            [],
            page_size=PAGE_SIZE,
            on_close=self._forget,
            shared_workers=shared("llmc-gateway-call"),
            instructions=f"llmc gateway for profile {profile}: the tools of its servers, named "
            "SERVER.TOOL; every call is checked by the profile's policy and audited.",
        )
        self.toolbox = toolbox
        self.cache_scope = os.urandom(16).hex()  # whose cached results a per_session server's are (services Invocation)
        # The upstream connections this host's requests use (Toolbox.host_upstreams for an HTTP
        # session; the shared ones otherwise); whoever made them closes them.
        self.upstreams = upstreams or toolbox.catalog
        self.transport = transport
        self.principal = principal
        self.clearance = toolbox.clearance_of(principal)  # servers above it: not offered, listed or called
        # What only the toolbox and the principal or clearance decide (the served profile's
        # [serve] is read once, at start): looked up once per connection, not for every request
        # (gateway/served.py pipeline); again only if what it was looked up for changed.
        self._conclusions = (self.clearance, toolbox.conclusions(self.clearance))
        self._rate_share = (principal, toolbox.rate_share(principal))
        self._identity: tuple[JSONObject, str | None, str | None, JSONObject] | None = None  # host_identity's, of the handshake
        self.on_initialize: Callable[[], None] | None = None  # after the handshake, before its result is sent
        self.reads = HostReads(self)
        self.calls = ToolCalls(self)
        self.subscriptions = Subscriptions(self)
        toolbox.subscribers.connections.add(self)

    def span_attributes(self, params: JSONObject) -> dict[str, object]:
        attributes = super().span_attributes(params)
        if self.transport == "http":
            attributes.update({"network.transport": "tcp", "network.protocol.name": "http"})
            peer = HTTP_PEER.get()
            if peer is not None:
                attributes.update({"client.address": peer[0], "client.port": peer[1]})
        # No mcp.session.id: a gateway session's id is all an unauthenticated host needs to use
        # that session, and traces are read by more people than may act as the host.
        return attributes

    def _forget(self) -> None:
        self.subscriptions.close()
        self.toolbox.subscribers.forget(self)

    def _capabilities(self) -> JSONObject:
        resources: JSONObject = {"listChanged": True, **({"subscribe": True} if self.toolbox.subscribers.can_subscribe() else {})}
        return {
            "tools": {"listChanged": True},
            "resources": resources,
            "prompts": {"listChanged": True},
            "completions": {},
            "logging": {},
        }

    # -- who is asking -----------------------------------------------------------------------------

    @property
    def conclusions(self) -> Conclusions:
        """What this host's calls conclude alike with every host of its clearance (Toolbox.conclusions)."""
        known = self._conclusions
        if known[0] != self.clearance:
            known = self._conclusions = (self.clearance, self.toolbox.conclusions(self.clearance))
        return known[1]

    @property
    def rate_share(self) -> tuple[str, int] | None:
        """Its principal's own calls per minute (Toolbox.rate_share)."""
        known = self._rate_share
        if known[0] != self.principal:
            known = self._rate_share = (self.principal, self.toolbox.rate_share(self.principal))
        return known[1]

    def host_capabilities(self, params: JSONObject, modern: str | None) -> JSONObject:
        if modern:
            caps = object_at(params, "_meta").get(META + "clientCapabilities")
            return caps if isinstance(caps, dict) else {}
        return self.client_capabilities

    def host_identity(self, params: JSONObject, modern: str | None) -> JSONObject:
        """What the audit trail records of the host: its clientInfo (what it says it is), the
        transport and, over HTTP, the principal its token proved. A 2026-07-28 request says its
        clientInfo itself; an initialize-era one, the connection's handshake did, so that is made
        once per handshake: the same object while the handshake's clientInfo (the very object),
        its version and the principal are the same (the transport never changes). Callers only
        read it (the audit masks a copy of it into each record)."""
        if modern:
            return self._identity_of(object_at(params, "_meta").get(META + "clientInfo"), modern)
        known = self._identity
        info, version, principal = self.client_info, self.legacy_version, self.principal
        if known is None or known[0] is not info or known[1] != version or known[2] != principal:
            known = self._identity = (info, version, principal, self._identity_of(info, version))
        return known[3]

    def _identity_of(self, info: JSON, version: str | None) -> JSONObject:
        info = info if isinstance(info, dict) else {}
        out: JSONObject = {
            "name": str(info.get("name", ""))[:200],
            "version": str(info.get("version", ""))[:100],
            "transport": self.transport,
            "protocolVersion": version,
        }
        if self.principal:
            out["principal"] = self.principal
        return out

    # -- methods -----------------------------------------------------------------------------------

    def _dispatch(self, method: str, params: JSONObject, modern: str | None) -> JSONObject:
        if method in HostReads.METHODS:
            return self.reads.answer(method, params, modern)
        if method in ("resources/subscribe", "resources/unsubscribe") and not modern:
            return self.subscriptions.subscribe(method, params)  # 2026-07-28: subscriptions/listen
        if method == "logging/setLevel":
            return {}  # upstream log messages are relayed as they come
        out = super()._dispatch(method, params, modern)
        if method == "initialize" and self.on_initialize is not None:
            self.on_initialize()  # the HTTP gateway shares the session with its other replicas
        return out

    def _request(self, msg_id: RequestId | None, method: str, params: JSON, send: Send) -> None:
        if method != "subscriptions/listen":
            super()._request(msg_id, method, params, send)
            return
        try:  # a request that stays open: answered only when the connection ends first
            if not isinstance(params, dict):
                raise RequestError(jsonrpc.INVALID_PARAMS, "params must be an object")
            if not self._era(method, params):
                raise RequestError(jsonrpc.METHOD_NOT_FOUND, f"method not found: {method} (2026-07-28 only)")
            if msg_id is None:
                raise RequestError(jsonrpc.INVALID_REQUEST, "a request's id must be a string or a number")
            self.subscriptions.listen(msg_id, params, send)
        except RequestError as exc:
            send(jsonrpc.error(msg_id, exc.code, exc.message, exc.data))

    def _list_tools(self, params: JSONObject, modern: str | None) -> JSONObject:
        return self.reads.tools(params, modern)

    def _start_call(self, msg_id: RequestId | None, params: JSONObject, modern: str | None, send: Send) -> None:
        name = params.get("name")
        if not isinstance(name, str):
            raise RequestError(jsonrpc.INVALID_PARAMS, "tools/call needs a tool name")
        if not isinstance(params.get("arguments", {}), dict):
            raise RequestError(jsonrpc.INVALID_PARAMS, "arguments must be an object")
        self.run_in_pool(msg_id, lambda: self.calls.call(msg_id, params, modern, send), modern, send, name)

    def _notification(self, message: JSONObject) -> None:
        super()._notification(message)
        if message["method"] == "notifications/cancelled":
            params = object_at(message, "params")
            cancelled = params.get("requestId")
            cancelled = cancelled if isinstance(cancelled, (int, str)) else None
            self.subscriptions.cancelled(cancelled)
            self.calls.cancel(cancelled, str(params.get("reason") or "cancelled by the host"))
