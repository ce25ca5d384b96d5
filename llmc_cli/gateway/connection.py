"""One host's connection to the gateway: mcp/server.py's dual-era core (initialize, discover,
pagination, cancellation, requests to the client) with the toolbox's methods behind it.

Every tools/call, resources/read and prompts/get goes through the services pipeline (policy,
audit with the host's identity, rate limits, argument rules, the lock, inspection).
The caller behind a host is a model, so confirmations apply: the host's user is asked by
elicitation when the host can be asked (initialize era: a request on the connection;
2026-07-28: an input_required result the host answers by retrying), and otherwise the call is
refused with a tool error that says how to pre-approve it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING

from llmc_cli import __version__, services
from llmc_cli.errors import Cancelled, DriftError, InputRequired, LlmcError, PolicyDenied, RpcError
from llmc_cli.gateway import confirmation
from llmc_cli.gateway.listening import Subscriptions
from llmc_cli.gateway.relay import HostCall, forward, own_result
from llmc_cli.gateway.toolbox import Toolbox
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.messages import JSON, JSONObject, RequestId, object_at
from llmc_cli.mcp.server import McpServer, RequestError, Send
from llmc_cli.mcp.versions import META_PREFIX as META
from llmc_cli.mcp.workers import shared
from llmc_cli.model import ToolCall
from llmc_cli.services.reads import Read

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog
    from llmc_cli.policy import ReadKind

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
        self._upstream: dict[RequestId | None, tuple[str, str]] = {}  # host request id -> (server, our progress token)
        self.on_initialize: Callable[[], None] | None = None  # after the handshake, before its result is sent
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

    def host_capabilities(self, params: JSONObject, modern: str | None) -> JSONObject:
        if modern:
            caps = object_at(params, "_meta").get(META + "clientCapabilities")
            return caps if isinstance(caps, dict) else {}
        return self.client_capabilities

    def host_identity(self, params: JSONObject, modern: str | None) -> JSONObject:
        """What the audit trail records of the host: its clientInfo (what it says it is), the
        transport and, over HTTP, the principal its token proved."""
        info = object_at(params, "_meta").get(META + "clientInfo") if modern else self.client_info
        info = info if isinstance(info, dict) else {}
        out: JSONObject = {
            "name": str(info.get("name", ""))[:200],
            "version": str(info.get("version", ""))[:100],
            "transport": self.transport,
            "protocolVersion": modern or self.legacy_version,
        }
        if self.principal:
            out["principal"] = self.principal
        return out

    # -- methods -----------------------------------------------------------------------------------

    def _dispatch(self, method: str, params: JSONObject, modern: str | None) -> JSONObject:
        toolbox = self.toolbox
        if method == "resources/list":
            return self._listing(
                self.page(
                    "resources",
                    toolbox.listing.gather(method, "resources", "uri", "resources", self.upstreams, self.clearance),
                    params,
                ),
                modern,
            )
        if method == "resources/templates/list":
            items = toolbox.listing.gather(
                method, "resourceTemplates", "uriTemplate", "resources", self.upstreams, self.clearance
            )
            return self._listing(self.page("resourceTemplates", items, params), modern)
        if method == "prompts/list":
            return self._listing(
                self.page(
                    "prompts",
                    toolbox.listing.gather(method, "prompts", "name", "prompts", self.upstreams, self.clearance),
                    params,
                ),
                modern,
            )
        if method == "resources/read":
            server, uri = self.route(params.get("uri"), "resource", modern)
            result = self._read(Read(server, "resource", uri), params, modern)
            contents = result.get("contents")
            if isinstance(contents, list):
                result["contents"] = [
                    {**c, "uri": toolbox.routes.expose(server, str(c.get("uri", "")))} if isinstance(c, dict) else c
                    for c in contents
                ]
            return self._listing(result, modern)  # cacheable in 2026-07-28, like the lists
        if method == "prompts/get":
            server, name = self.route(params.get("name"), "prompt", modern)
            arguments = params.get("arguments") or {}
            if not (isinstance(arguments, dict) and all(isinstance(v, str) for v in arguments.values())):
                raise RequestError(jsonrpc.INVALID_PARAMS, "prompts/get arguments must be an object of strings")
            strings = {key: value for key, value in arguments.items() if isinstance(value, str)}  # all are
            return self._read(Read(server, "prompt", name, strings), params, modern)
        if method in ("resources/subscribe", "resources/unsubscribe") and not modern:
            return self.subscriptions.subscribe(method, params)  # 2026-07-28: subscriptions/listen
        if method == "completion/complete":
            return self._complete(params)
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

    @staticmethod
    def _listing(out: JSONObject, modern: str | None) -> JSONObject:
        if modern:  # depends on the profile and the upstreams' state: not cacheable, not shared
            out.update(ttlMs=0, cacheScope="private")
        return out

    def _list_tools(self, params: JSONObject, modern: str | None) -> JSONObject:
        if self.toolbox.serve.tool_search:
            from llmc_cli.gateway import search  # tool search: loaded when the profile asks for it

            tools = search.listing(self.toolbox, self.clearance)
        else:
            tools = [self.toolbox.listing.describe(t) for t in self.toolbox.listing.tools(self.clearance)]
        return self._listing(self.page("tools", tools, params), modern)

    def route(self, name: JSON, what: str, modern: str | None = None) -> tuple[str, str]:
        """A namespaced name -> (server, its name there); RequestError for an unknown one."""
        route = (
            self.toolbox.routes.route_prompt(name, self.upstreams) if what == "prompt" else self.toolbox.routes.route_uri(name)
        )
        if route is None:
            raise _unknown(what, name, modern)
        return route

    def readable_route(self, name: JSON, kind: ReadKind, modern: str | None = None) -> tuple[str, str]:
        """route(), and the same error for what the policy hides (what a read of it would be refused)."""
        what = "prompt" if kind == "prompt" else "resource"
        server, rest = self.route(name, what, modern)
        if not self.toolbox.listing.readable(kind, server, rest, self.upstreams, self.clearance):
            raise _unknown(what, name, modern)
        return server, rest

    def _read(self, request: Read, params: JSONObject, modern: str | None) -> JSONObject:
        """A host's resources/read or prompts/get, through services.read (policy, audit with the
        host's identity, rate limits). What the policy denies is answered as what does not exist:
        the spec's error for an unknown resource or prompt, as for a name no server has."""
        toolbox = self.toolbox
        calls = services.host_calls(
            self.upstreams,
            toolbox.profile,
            toolbox.state,
            audit=toolbox.audit,
            masker=toolbox.masker,
            client=self.host_identity(params, modern),
            host_session=self.cache_scope,
            clearance=self.clearance,
        )
        toolbox.outages.revive(request.server, self.upstreams)
        try:
            return own_result(calls.run(request).raw)
        except PolicyDenied as exc:
            retry = exc.details.get("retryAfter")
            if retry is not None:  # a rate limit: the host may try again later
                raise RequestError(jsonrpc.INTERNAL_ERROR, exc.message, {"retryAfter": retry}) from None
            if exc.details.get("rule") == "invalid_text":
                raise RequestError(jsonrpc.INVALID_PARAMS, exc.message) from None
            raise _unknown(request.kind, toolbox.routes.shown(request.kind, request.server, request.name), modern) from None
        except RpcError as exc:  # the upstream refused the request itself: the host hears the same
            raise RequestError(exc.code or jsonrpc.INTERNAL_ERROR, exc.message, exc.data) from None
        except LlmcError as exc:
            raise RequestError(jsonrpc.INTERNAL_ERROR, exc.message) from None

    def _upstream_request(self, method: str, server: str, params: JSONObject) -> JSONObject:
        try:
            return forward(method, server, params, self.upstreams)
        except RpcError as exc:
            raise RequestError(exc.code or jsonrpc.INTERNAL_ERROR, exc.message, exc.data) from None
        except LlmcError as exc:
            raise RequestError(jsonrpc.INTERNAL_ERROR, exc.message) from None

    def _complete(self, params: JSONObject) -> JSONObject:
        ref = params.get("ref")
        if not isinstance(ref, dict):
            raise RequestError(jsonrpc.INVALID_PARAMS, "completion/complete needs a ref")
        field = "uri" if ref.get("type") == "ref/resource" else "name"
        server, rest = self.readable_route(ref.get(field), "prompt" if field == "name" else "template")
        forwarded = {k: v for k, v in params.items() if k in ("argument", "context")}
        return self._upstream_request("completion/complete", server, {**forwarded, "ref": {**ref, field: rest}})

    # -- tools/call --------------------------------------------------------------------------------

    def _start_call(self, msg_id: RequestId | None, params: JSONObject, modern: str | None, send: Send) -> None:
        name = params.get("name")
        if not isinstance(name, str):
            raise RequestError(jsonrpc.INVALID_PARAMS, "tools/call needs a tool name")
        if not isinstance(params.get("arguments", {}), dict):
            raise RequestError(jsonrpc.INVALID_PARAMS, "arguments must be an object")
        self.run_in_pool(msg_id, lambda: self._call(msg_id, params, modern, send), modern, send, name)

    def _call(self, msg_id: RequestId | None, params: JSONObject, modern: str | None, send: Send) -> JSONObject:
        name = str(params["name"])  # checked by _start_call (search.unwrap: by search)
        toolbox = self.toolbox
        if toolbox.serve.tool_search and name.startswith("llmc"):
            from llmc_cli.gateway import search

            answer = search.answer(toolbox, name, params, self.clearance)  # a result, the named tool's call, or None: not llmc's
            if isinstance(answer, search.Call):
                return self._call(msg_id, answer.params, modern, send)  # the named tool's own path
            if answer is not None:
                return answer
        route = toolbox.routes.route(name)
        if route:
            toolbox.outages.revive(route[0], self.upstreams)
        try:
            tool = self.upstreams.find_tool(*route) if route else None
        except LlmcError as exc:  # the server is down: the model may try something else
            return _tool_error(f"{name} is unavailable: {exc.message}")
        if route is None or tool is None:
            raise RequestError(jsonrpc.INVALID_PARAMS, f"Unknown tool: {name}")
        call = ToolCall(route[0], route[1], dict(object_at(params, "arguments")))
        capabilities = self.host_capabilities(params, modern)
        can_ask = "elicitation" in capabilities
        confirmed, answers = confirmation.rounds_so_far(self.toolbox.states, self.principal, call, params, modern)
        round_state = {"confirmed": confirmed}
        calls = services.host_calls(
            self.upstreams,
            toolbox.profile,
            toolbox.state,
            audit=toolbox.audit,
            masker=toolbox.masker,
            client=self.host_identity(params, modern),
            host_session=self.cache_scope,
            interactive=can_ask,
            confirm=lambda c, t: self._confirm(c, params, modern, send, round_state),
            clearance=self.clearance,
        )
        meta = object_at(params, "_meta")
        level = meta.get(META + "logLevel")
        host_call = HostCall(
            self, send, meta.get("progressToken"), capabilities, modern, level if isinstance(level, str) else None, answers
        )
        try:
            with toolbox.relay.hosting(host_call) as token:
                with self._lock:
                    self._upstream[msg_id] = (call.server, token)
                try:
                    result = calls.run(services.ToolRequest.of(call, meta={"progressToken": token})).tool_result
                finally:
                    with self._lock:
                        self._upstream.pop(msg_id, None)
        except confirmation.InputRound as exc:
            return exc.result
        except InputRequired as exc:  # the upstream asks the host (2026-07-28): a round for the host
            state = self.toolbox.states.pack(call, bool(round_state["confirmed"]), answers, principal=self.principal)
            return {"resultType": "input_required", "inputRequests": exc.requests, "requestState": state}
        except PolicyDenied as exc:
            if not toolbox.listing.visible(tool):  # hidden: as if it did not exist, whatever the spelling
                raise RequestError(jsonrpc.INVALID_PARAMS, f"Unknown tool: {name}") from None
            return _tool_error(confirmation.denial_text(exc, call, can_ask))
        except DriftError as exc:
            raise RequestError(jsonrpc.INVALID_PARAMS, f"Unknown tool: {name} ({exc.message})") from None
        except Cancelled as exc:
            return _tool_error(exc.message)  # the host cancelled: this reply is dropped
        except RpcError as exc:  # the upstream refused the request itself: the host hears the same
            raise RequestError(exc.code or jsonrpc.INTERNAL_ERROR, exc.message, exc.data) from None
        except LlmcError as exc:
            return _tool_error(f"{name} failed: {exc.message}")
        return own_result(result.to_json())

    def _confirm(self, call: ToolCall, params: JSONObject, modern: str | None, send: Send, round_state: dict[str, bool]) -> bool:
        """Ask the host's user about this exact call (services.authorize calls this)."""
        if modern:
            return confirmation.in_rounds(self.toolbox.states, self.principal, call, params, round_state)
        return confirmation.by_elicitation(call, self.legacy_version, lambda q: self.ask_client("elicitation/create", q, send))

    def _notification(self, message: JSONObject) -> None:
        super()._notification(message)
        if message["method"] == "notifications/cancelled":
            params = object_at(message, "params")
            cancelled = params.get("requestId")
            cancelled = cancelled if isinstance(cancelled, (int, str)) else None
            self.subscriptions.cancelled(cancelled)
            with self._lock:
                upstream = self._upstream.get(cancelled)
            if upstream is not None:
                server, token = upstream
                try:
                    self.upstreams.session(server).cancel(token, str(params.get("reason") or "cancelled by the host"))
                except LlmcError:
                    pass


def _unknown(what: str, name: JSON, modern: str | None) -> RequestError:
    """The spec's error for a resource or prompt that does not exist (or that the policy hides):
    a resource's is -32002 before 2026-07-28 and -32602 since, with the URI as data."""
    if what == "resource":
        return RequestError(
            jsonrpc.INVALID_PARAMS if modern else jsonrpc.RESOURCE_NOT_FOUND, f"Resource not found: {name}", {"uri": name}
        )
    return RequestError(jsonrpc.INVALID_PARAMS, f"Unknown {what}: {name}")


def _tool_error(text: str) -> JSONObject:
    return {"content": [{"type": "text", "text": text}], "isError": True}
