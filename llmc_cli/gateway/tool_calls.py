"""One host's tools/call through the gateway, and its calls in flight upstream (for cancellation).

Every call goes through the services pipeline (policy, audit with the host's identity, rate
limits, argument rules, the lock, inspection). The caller behind a host is a model, so
confirmations apply: the host's user is asked by elicitation when the host can be asked
(initialize era: a request on the connection; 2026-07-28: an input_required result the host
answers by retrying), and otherwise the call is refused with a tool error that says how to
pre-approve it.

connection.py holds a ToolCalls per connection and starts its calls on the pool; this module sees
the connection only as a CallingHost, so the import goes one way.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol

from llmc_cli import services
from llmc_cli.errors import Cancelled, DriftError, InputRequired, LlmcError, PolicyDenied, RpcError
from llmc_cli.gateway import confirmation
from llmc_cli.gateway.host import Host
from llmc_cli.gateway.relay import HostCall, own_result
from llmc_cli.gateway.served import ServedHost, pipeline
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.messages import JSONObject, RequestId, object_at
from llmc_cli.mcp.server import RequestError, Send
from llmc_cli.mcp.versions import META_PREFIX as META
from llmc_cli.model import Tool, ToolCall
from llmc_cli.services.calls import unstarted_denial

if TYPE_CHECKING:
    from llmc_cli.services.calls import Invocation


class CallingHost(ServedHost, Host, Protocol):
    """What a host's tool calls use of its connection: what every part answering a host does,
    Host's (the relay takes the connection itself as the owner of the upstream's messages about
    a call, and asks the host through it), and what confirmation needs."""

    @property
    def principal(self) -> str | None: ...

    @property
    def legacy_version(self) -> str | None: ...

    def host_capabilities(self, params: JSONObject, modern: str | None) -> JSONObject: ...


class ToolCalls:
    def __init__(self, connection: CallingHost) -> None:
        self.connection = connection
        # Guards only the table below (calls run on pool threads; a cancellation comes on another).
        self._lock = threading.Lock()
        self._upstream: dict[RequestId | None, tuple[str, str]] = {}  # host request id -> (server, our progress token)

    def call(self, msg_id: RequestId | None, params: JSONObject, modern: str | None, send: Send) -> JSONObject:
        """A tools/call whose name and arguments the connection has checked, on a pool thread."""
        name = str(params["name"])  # checked by the connection's _start_call (search.unwrap: by search)
        connection = self.connection
        toolbox = connection.toolbox
        if toolbox.serve.tool_search and name.startswith("llmc"):
            from llmc_cli.gateway import search

            answer = search.answer(
                toolbox, name, params, connection.clearance
            )  # a result, the named tool's call, or None: not llmc's
            if isinstance(answer, search.Call):
                return self.call(msg_id, answer.params, modern, send)  # the named tool's own path
            if answer is not None:
                return answer
        route = toolbox.routes.route(name, clearance=connection.clearance)
        if route is None:
            raise RequestError(jsonrpc.INVALID_PARAMS, f"Unknown tool: {name}")
        capabilities = connection.host_capabilities(params, modern)
        can_ask = "elicitation" in capabilities
        round_state: dict[str, bool] = {}
        calls = pipeline(
            connection,
            params,
            modern,
            interactive=can_ask,
            confirm=lambda c, t: self._confirm(c, params, modern, send, round_state),
        )
        tool = self._tool(name, route, calls.context)
        if isinstance(tool, dict):
            return tool
        call = ToolCall(route[0], route[1], dict(object_at(params, "arguments")))
        confirmed, answers = confirmation.rounds_so_far(toolbox.states, connection.principal, call, params, modern)
        round_state["confirmed"] = confirmed
        meta = object_at(params, "_meta")
        level = meta.get(META + "logLevel")
        host_call = HostCall(
            connection, send, meta.get("progressToken"), capabilities, modern, level if isinstance(level, str) else None, answers
        )
        try:
            with toolbox.relay.hosting(host_call) as token:
                with self._lock:
                    self._upstream[msg_id] = (call.server, token)
                try:
                    # a tool is found only for a route _tool cleared under this pipeline's invocation
                    request = services.ToolRequest.of(call, meta={"progressToken": token}, tool=tool, cleared=tool is not None)
                    result = calls.run(request).tool_result
                finally:
                    with self._lock:
                        self._upstream.pop(msg_id, None)
        except confirmation.InputRound as exc:
            return exc.result
        except InputRequired as exc:  # the upstream asks the host (2026-07-28): a round for the host
            state = toolbox.states.pack(call, bool(round_state["confirmed"]), answers, principal=connection.principal)
            return {"resultType": "input_required", "inputRequests": exc.requests, "requestState": state}
        except PolicyDenied as exc:
            # hidden, or its server above the host's clearance (tool None: not looked up), as a
            # read answers: as if it did not exist, whatever the spelling (the audit has the rule)
            if tool is None or not toolbox.listing.visible(tool):
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

    def _tool(self, name: str, route: tuple[str, str], context: Invocation) -> Tool | JSONObject | None:
        """The routed tool; None when its server is above the host's clearance or the policy
        denies the call by its name (its server is not started to look: the pipeline denies and
        records the call, by the same conclusions of `context`, the call's); a tool error when
        the server is down."""
        connection = self.connection
        toolbox = connection.toolbox
        if unstarted_denial(context, *route) is not None:
            return None
        toolbox.outages.revive(route[0], connection.upstreams)
        try:
            tool = connection.upstreams.find_tool(*route)
        except LlmcError as exc:  # the server is down: the model may try something else
            return _tool_error(f"{name} is unavailable: {exc.message}")
        if tool is None:
            raise RequestError(jsonrpc.INVALID_PARAMS, f"Unknown tool: {name}")
        return tool

    def cancel(self, msg_id: RequestId | None, reason: str) -> None:
        """The host cancelled its request: if it is a call in flight, cancel it upstream too."""
        with self._lock:
            upstream = self._upstream.get(msg_id)
        if upstream is not None:
            server, token = upstream
            try:
                self.connection.upstreams.session(server).cancel(token, reason)
            except LlmcError:
                pass

    def _confirm(self, call: ToolCall, params: JSONObject, modern: str | None, send: Send, round_state: dict[str, bool]) -> bool:
        """Ask the host's user about this exact call (services.authorize calls this)."""
        connection = self.connection
        if modern:
            return confirmation.in_rounds(connection.toolbox.states, connection.principal, call, params, round_state)
        return confirmation.by_elicitation(
            call, connection.legacy_version, lambda q: connection.ask_client("elicitation/create", q, send)
        )


def _tool_error(text: str) -> JSONObject:
    return {"content": [{"type": "text", "text": text}], "isError": True}
