"""How the client answers what a server sends on its own: the hooks a caller hands to a ClientSession,
and the answers to server->client requests (ping, roots/list, elicitation/create,
sampling/createMessage), whichever era they arrive in."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import field

from llmc_cli.errors import RpcError
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.messages import JSON, JSONObject, ProgressToken, object_at, request_id
from llmc_cli.model import dataclass

# While a hook runs, which of the caller's requests in flight the server's message belongs to (a
# client serving many users, the gateway, answers by it): the progress tokens the caller gave
# them (None for a request it gave none). One when the message is tied to a request; every
# request in flight on the connection when nothing says which; none when it belongs to none.
# Set by the session (mcp/session.py: ClientSession._owners).
RELATED_TOKENS: ContextVar[tuple[ProgressToken | None, ...]] = ContextVar("llmc_related_tokens", default=())


@dataclass
class ClientHooks:
    """How the client reacts to what a server sends on its own. All optional.

    Each hook gets the `params` of what the server sent as it arrived (a JSONObject: the shapes
    in mcp/messages.py, e.g. ProgressNotificationParams, LoggingMessageNotificationParams, are
    what a well-behaved server sends, not what was checked) and reads them defensively."""

    on_progress: Callable[[JSONObject], None] | None = None
    on_log: Callable[[JSONObject], None] | None = None
    # (server name, method): a notifications/*/list_changed of the named server
    on_list_changed: Callable[[str, str], None] | None = None
    on_resource_updated: Callable[[JSONObject], None] | None = None  # notifications/resources/updated params
    # elicitation/create params -> ElicitResult ({"action": "accept"|"decline"|"cancel", ...})
    elicit: Callable[[JSONObject], JSONObject] | None = None
    # sampling/createMessage params -> CreateMessageResult; None: declined with a clear error
    sample: Callable[[JSONObject], JSONObject] | None = None
    roots: list[JSONObject] = field(default_factory=list)
    # roots/list answered at the moment it is asked (a gateway asks its host); None: `roots`
    list_roots: Callable[[], list[JSONObject]] | None = None
    # Something the user must hear that is no error: the server lost state the caller may rely
    # on (an HTTP session it ended, a server restarted inside a session keeper).
    on_notice: Callable[[str], None] | None = None
    # notifications/subscriptions/acknowledged params: a subscriptions/listen stream is open (2026-07-28)
    on_acknowledged: Callable[[JSONObject], None] | None = None


def accept_defaults(params: JSONObject) -> JSONObject:
    """Answer a form elicitation with the defaults its schema declares (headless use)."""
    if params.get("mode", "form") != "form":
        return {"action": "decline"}
    properties = object_at(object_at(params, "requestedSchema"), "properties")
    content: JSONObject = {k: v["default"] for k, v in properties.items() if isinstance(v, dict) and "default" in v}
    return {"action": "accept", "content": content}


def decline(params: JSONObject) -> JSONObject:
    return {"action": "decline"}


def answer_server_request(hooks: ClientHooks, method: str | None, params: JSONObject) -> JSONObject:
    """The client's answer to a server->client request (initialize era: a request on the wire;
    2026-07-28: one entry of an input_required result)."""
    if method == "ping":
        return {}
    if method == "roots/list":
        roots: list[JSON] = list(hooks.list_roots() if hooks.list_roots else hooks.roots)
        return {"roots": roots}
    if method == "elicitation/create":
        return (hooks.elicit or decline)(params)
    if method == "sampling/createMessage":
        if hooks.sample is None:
            raise RpcError("sampling is not enabled for this client (set [llm] allow_sampling)", code=-1)
        return hooks.sample(params)
    raise RpcError(f"method not found: {method}", code=jsonrpc.METHOD_NOT_FOUND)


def with_input_responses(hooks: ClientHooks, params: JSONObject, result: JSONObject) -> JSONObject:
    """A request's params for its next round (2026-07-28 multi round-trip requests): the answers
    to the `inputRequests` of its `input_required` result, and the result's `requestState`."""
    params = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
    requests = result.get("inputRequests")
    if isinstance(requests, dict):
        # asked in this request's own result: it is the one they belong to
        token = object_at(params, "_meta").get("progressToken")
        related = RELATED_TOKENS.set((token if isinstance(token, (str, int)) and not isinstance(token, bool) else None,))
        try:
            params["inputResponses"] = {
                key: answer_server_request(hooks, m if isinstance(m := r.get("method"), str) else None, object_at(r, "params"))
                for key, r in requests.items()
                if isinstance(r, dict)
            }
        finally:
            RELATED_TOKENS.reset(related)
    if "requestState" in result:
        params["requestState"] = result["requestState"]
    return params


def notified(hooks: ClientHooks, server: str, method: str, params: JSONObject) -> None:
    """A server's notification, told to the hook that hears its kind (the session moved a
    request's deadline on progress first)."""
    if method == "notifications/progress":
        if hooks.on_progress:
            hooks.on_progress(params)
    elif method == "notifications/message":
        if hooks.on_log:
            hooks.on_log(params)
    elif method.endswith("/list_changed"):
        if hooks.on_list_changed:
            hooks.on_list_changed(server, method)
    elif method == "notifications/resources/updated" and hooks.on_resource_updated:
        hooks.on_resource_updated(params)
    elif method == "notifications/subscriptions/acknowledged" and hooks.on_acknowledged:
        hooks.on_acknowledged(params)


def answer_request(hooks: ClientHooks, message: JSONObject) -> JSONObject:
    """The reply to a server's request (legacy era, on a thread of its own): its result, or the
    error to send when it cannot be answered or a hook failed."""
    method, params, msg_id = str(message["method"]), object_at(message, "params"), request_id(message)
    try:
        too_deep = jsonrpc.too_deep(params)
        if too_deep:
            raise RpcError(too_deep, jsonrpc.INVALID_PARAMS)
        return jsonrpc.result(msg_id, answer_server_request(hooks, method, params))
    except RpcError as exc:
        return jsonrpc.error(msg_id, exc.code, exc.message)
    except Exception as exc:  # noqa: BLE001 - a hook failed: the server must still get an answer
        return jsonrpc.error(msg_id, jsonrpc.INTERNAL_ERROR, f"client error: {exc}")
