"""The way back from the upstreams to the hosts: messages an upstream sends while a host's call
runs (progress, logs, elicitation, sampling, roots) go to the host whose call they belong to,
never to another.

Each upstream call carries a progress token of the gateway's own (mcp/router.py), and the client
session says which call a message belongs to (mcp/hooks.RELATED_TOKENS: the token it names, the
call on whose HTTP stream or in whose input_required result it came, else the calls in flight on
that upstream connection, when they are all one host connection's). A message that belongs to no
host's call, or may belong to more than one host's, reaches no host: said at -v, and a request is
declined.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from llmc_cli.errors import InputRequired, LlmcError, RpcError
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.router import Router
from llmc_cli.model import JSON, JSONObject, canonical_json

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog
    from llmc_cli.gateway.host import Host

Send = Callable[[JSONObject], None]


@dataclass
class HostCall:
    """A host's request in flight: where the upstream's messages about it go."""

    connection: Host
    send: Send
    host_token: JSON  # the host's progressToken, or None: the host did not ask for progress
    capabilities: JSONObject  # the host's client capabilities
    modern: str | None  # the host's modern version, or None (initialize era)
    log_level: str | None  # modern hosts opt in to log messages per request
    # 2026-07-28 hosts: answers to upstream requests, by key, from earlier rounds of this call
    answers: JSONObject = field(default_factory=dict)
    thread: int = field(default_factory=threading.get_ident)  # where the upstream call runs


def input_key(method: str, params: JSONObject) -> str:
    """The key of an upstream's request in the host's input_required round: the same request
    (an upstream asks again with the same words when the call is retried) gets the same key."""
    text = canonical_json([method, params])
    return "upstream-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


class HostRelay:
    """The upstream client sessions' hooks for what concerns a host's call (their other hooks,
    list_changed and resources/updated, concern every host: the toolbox has them)."""

    def __init__(self, note: Callable[[str], None] | None) -> None:
        self.note = note  # what is said at -v (None: not verbose)
        self._router: Router[HostCall] = Router("llmc-gateway", lambda call: id(call.connection))

    def hosting(self, call: HostCall) -> AbstractContextManager[str]:
        """Register a host's call for the upstream messages about it; yields our progress token."""
        return self._router.routing(call)

    def _owner(self, what: str) -> HostCall | None:
        """The host call the upstream message being handled belongs to: the one it is tied to, or,
        when nothing ties it, the oldest of the calls in flight on its upstream connection if they
        are all one host connection's (and that connection's only requests there). None, said at
        -v, when it may be another host's or nobody's: it then goes to no host."""
        call, calls = self._router.related()
        # progress for one of the gateway's own requests (a listing) names no call of a host: not news
        if call is None and self.note is not None and (calls or what != "notifications/progress"):
            whose = (
                "may belong to more than one host's call"
                if len(calls) > 1 and any(calls)
                else "belongs to no host's call in flight"
            )
            self.note(f"an upstream's {what} {whose}: not relayed")
        return call

    def progress(self, params: JSONObject) -> None:
        call = self._owner("notifications/progress")
        if call is not None and call.host_token is not None:
            call.send(jsonrpc.notification("notifications/progress", {**params, "progressToken": call.host_token}))

    def log(self, params: JSONObject) -> None:
        call = self._owner("notifications/message")
        if call is not None and (call.modern is None or call.log_level):
            call.send(jsonrpc.notification("notifications/message", params))

    def _ask_host(self, call: HostCall, method: str, params: JSONObject) -> JSONObject:
        """Ask the host: initialize era, a request on its connection; 2026-07-28, an answer it gave
        in an earlier round of this call, else a new round (InputRequired: the host retries). A
        2026-07-28 host can only be asked when the upstream asked in its result (this thread)."""
        if not call.modern:
            return call.connection.ask_client(method, params, call.send)
        key = input_key(method, params)
        if key in call.answers:
            answer = call.answers[key]
            if not isinstance(answer, dict):
                raise RpcError(f"the MCP host's answer to {method} is not an object", code=jsonrpc.INVALID_PARAMS)
            return answer
        if call.thread != threading.get_ident():
            raise RpcError(f"{method} declined: a 2026-07-28 host is asked only in an input_required result", code=-1)
        raise InputRequired(requests={key: {"method": method, "params": params}})

    def elicit(self, params: JSONObject) -> JSONObject:
        """An upstream asks its user: the host's user, when the host can be asked (spec: else decline)."""
        call = self._owner("elicitation/create")
        if call is None or "elicitation" not in call.capabilities:
            return {"action": "decline"}
        try:
            return self._ask_host(call, "elicitation/create", params)
        except InputRequired:
            raise
        except LlmcError:
            return {"action": "decline" if call.modern else "cancel"}

    def sample(self, params: JSONObject) -> JSONObject:
        call = self._owner("sampling/createMessage")
        if call is None:
            raise RpcError("sampling declined: it belongs to no MCP host's call through the llmc gateway", code=-1)
        if "sampling" not in call.capabilities:
            raise RpcError("sampling declined: the MCP host behind the llmc gateway does not offer it", code=-1)
        return self._ask_host(call, "sampling/createMessage", params)

    def roots(self) -> list[JSONObject]:
        """An upstream asks for roots: the roots of the host whose call it belongs to, when it
        declared them; else none (a gateway has no roots of its own to offer)."""
        call = self._owner("roots/list")
        if call is None:
            raise RpcError("roots/list declined: it belongs to no MCP host's call through the llmc gateway", code=-1)
        if "roots" not in call.capabilities:
            return []
        try:
            roots = self._ask_host(call, "roots/list", {}).get("roots")
        except InputRequired:
            raise
        except LlmcError:
            return []
        return [r for r in roots if isinstance(r, dict)] if isinstance(roots, list) else []


PROTOCOL_META = "io.modelcontextprotocol/"


def own_result(result: JSONObject) -> JSONObject:
    """An upstream's result without what belongs to the upstream's connection (its era's result
    type and caching, its serverInfo): the gateway answers the host in the host's era."""
    out = {k: v for k, v in result.items() if k not in ("resultType", "ttlMs", "cacheScope")}
    meta = out.get("_meta")
    if isinstance(meta, dict):
        meta = {k: v for k, v in meta.items() if not k.startswith(PROTOCOL_META)}
        if meta:
            out["_meta"] = meta
        else:
            del out["_meta"]
    return out


def forward(method: str, server: str, params: JSONObject, upstreams: Catalog) -> JSONObject:
    """A request about one server's resource that reads nothing (a subscription; reads and
    completions go through services.read); RpcError as the server said."""
    return own_result(upstreams.session(server).request(method, params))
