"""What every host connection of one gateway shares: the profile, one connection per upstream
server (a catalog), the namespaced listings and the way back from a namespaced name to its server.

Names are `SERVER.NAME` for tools and prompts and `SERVER.URI` for resources and templates:
server names contain no dot (config/schema.py), so the first dot splits them back, and a name
does not change when another server is added or removed. A profile of exactly one server may
say `[serve] bare_names = true`: its names are then presented as the server gives them. Tools the
policy hides and tools that drifted from the profile's lock are left out of the listing.

Messages an upstream sends on its own while a host's call runs (progress, logs, elicitation,
sampling) go to the host whose call is in flight: progress by its token, the others to the
newest call in flight (upstream requests carry no token that says whose call they serve).
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import os
import sys
import threading
import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterator

from llmc_cli.config.profiles import LoadedProfile
from llmc_cli.errors import InputRequired, LlmcError, RpcError
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.hooks import ClientHooks
from llmc_cli.model import Tool, ToolCall

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog
    from llmc_cli.config.schema import ServeConfig
    from llmc_cli.gateway.connection import GatewayConnection  # it imports this module

Send = Callable[[dict[str, Any]], None]
PROTOCOL_META = "io.modelcontextprotocol/"
RETRY_SECONDS = 5.0
LIST_CHANGED = ("notifications/tools/list_changed", "notifications/resources/list_changed",
                "notifications/prompts/list_changed")


@dataclass
class HostCall:
    """A host's request in flight: where the upstream's messages about it go."""

    connection: GatewayConnection
    send: Send
    host_token: Any  # the host's progressToken, or None: the host did not ask for progress
    capabilities: dict[str, Any]  # the host's client capabilities
    modern: str | None  # the host's modern version, or None (initialize era)
    log_level: str | None  # modern hosts opt in to log messages per request
    # 2026-07-28 hosts: answers to upstream requests, by key, from earlier rounds of this call
    answers: dict[str, Any] = field(default_factory=dict)
    thread: int = field(default_factory=threading.get_ident)  # where the upstream call runs


def input_key(method: str, params: dict[str, Any]) -> str:
    """The key of an upstream's request in the host's input_required round: the same request
    (an upstream asks again with the same words when the call is retried) gets the same key."""
    text = json.dumps([method, params], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "upstream-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def own_result(result: dict[str, Any]) -> dict[str, Any]:
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


class Toolbox:
    def __init__(self, profile: LoadedProfile, *, on_stderr: Callable[[str, str], None] | None = None,
                 serve: ServeConfig | None = None) -> None:
        """`serve`: the served profile's [serve] settings, for the toolbox of a principal's
        profile (default: this profile's)."""
        from llmc_cli import audit, services

        self.profile = profile
        self.serve = serve or profile.profile.serve
        # the schema allows bare names with exactly one server, so every name routes back to it
        self.bare = next(iter(profile.profile.servers)) if profile.profile.serve.bare_names else None
        self.hooks = ClientHooks(on_progress=self._progress, on_log=self._log, on_list_changed=self._list_changed,
                                 on_resource_updated=lambda params: self._resource_updated(params, self.catalog),
                                 elicit=self._elicit, sample=self._sample, list_roots=self._roots)
        # The upstream connections every host shares (and those of the one host of stdio);
        # host_upstreams() gives a host session its own to the servers that keep state.
        self.catalog = services.open_catalog(profile, hooks=self.hooks, on_stderr=on_stderr)
        self.catalog.posts_on_caller_thread = True  # a host's call runs on its connection's thread
        # Every host's calls share one audit trail: decisions on disk before each call runs (hosts
        # calling at once share a write and fsync), outcomes written with the next decision or
        # within a second, as in a batch.
        self.audit = audit.Deferred(audit.open_log(profile.profile)).__enter__()
        # The values the audit masks come from the environment, which is fixed for the gateway's
        # life: read once, not on every call.
        self.secrets = frozenset(audit.secret_values())
        self.connections: weakref.WeakSet[GatewayConnection] = weakref.WeakSet()  # for list_changed
        self._calls: dict[str, HostCall] = {}  # our progress token upstream -> the host's call
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._secret = os.urandom(32)  # binds a confirmation answer to the exact call it was asked for
        self._reported: set[str] = set()
        self._revived: dict[str, float] = {}  # server -> when it was last set to start again
        # (upstream catalog, server, upstream URI) -> the host connections subscribed to it: an
        # upstream connection may be shared, so it is subscribed while at least one host is
        self._subscribers: dict[tuple[Catalog, str, str], set[GatewayConnection]] = {}

    def host_upstreams(self) -> Catalog:
        """A host session's upstream connections: its own to every server that keeps state (a
        process, an initialize-era session: what one host starts there, another never sees), the
        shared ones to the stateless; each of its own starts on first use. The caller closes it."""
        holder: list[Catalog] = []
        hooks = replace(self.hooks, on_resource_updated=lambda params: self._resource_updated(params, holder[0]))
        holder.append(self.catalog.for_host(hooks))
        return holder[0]

    def close(self) -> None:
        try:
            self.catalog.close()
        finally:
            self.audit.__exit__(None, None, None)  # the outcomes still waiting

    # -- tools -----------------------------------------------------------------------------------

    def revive(self, server: str | None = None, upstreams: Catalog | None = None) -> None:
        """Start again, on next use, an upstream that crashed or could not start (one server, or
        all; the shared connection and a host's own), at most every RETRY_SECONDS: a gateway
        outlives its upstreams' troubles."""
        now = time.monotonic()
        for name in [server] if server else list(self.catalog.specs):
            if now - self._revived.get(name, 0.0) < RETRY_SECONDS:
                continue
            restarted = [c.restart(name) for c in {self.catalog, upstreams or self.catalog}]
            if any(restarted):
                self._revived[name] = now
                self._reported.discard(name)
                print(f"llmc serve: {name} will be started again (what it kept in memory is lost)", file=sys.stderr,
                      flush=True)

    def tools(self) -> list[Tool]:
        """The tools a host sees: allowed by the policy and, with a lock, pinned as they are now."""
        from llmc_cli import services

        self.revive()
        allowed, _hidden, failures = services.visible_tools(self.catalog, self.profile)
        self._report(failures)
        if not self.profile.profile.lock:
            return allowed
        from llmc_cli import lockfile

        pinned = lockfile.read(services.lock_path(self.profile))["servers"]
        return [t for t in allowed
                if ((pinned.get(t.server) or {}).get("tools") or {}).get(t.name, {}).get("hash") == lockfile.tool_hash(t)]

    def describe(self, tool: Tool) -> dict[str, Any]:
        """The tool as the host sees it: namespaced, with the hints the profile's policy goes by
        (a profile corrects servers that mislabel their tools)."""
        from llmc_cli import policy

        hints = policy.effective_hints(tool, tool.qualified_name, self.profile.profile.policy)
        annotations = {**tool.annotations, **{f"{k}Hint": v for k, v in hints.items()}}
        return {**tool.raw, "name": self.expose(tool.server, tool.name), "annotations": annotations}

    def expose(self, server: str, name: str) -> str:
        """The name a host sees for a server's tool, prompt or resource URI."""
        return name if self.bare else f"{server}.{name}"

    def route(self, name: Any) -> tuple[str, str] | None:
        """'server.name' -> (server, name) for a server of this profile; anything else: None."""
        if not isinstance(name, str):
            return None
        if self.bare:
            return (self.bare, name) if name else None
        server, dot, rest = name.partition(".")
        return (server, rest) if dot and rest and server in self.catalog.specs else None

    def visible(self, tool: Tool) -> bool:
        from llmc_cli import policy

        return policy.visible(tool, self.profile.profile.policy).action == "allow"

    def pack_state(self, call: ToolCall, confirmed: bool, answers: dict[str, Any], *, confirming: bool = False) -> str:
        """A 2026-07-28 requestState only this process can make, bound to this exact call (tool
        and arguments): whether the host's user said yes, the host's answers to upstream requests
        so far, and whether it carries a confirmation question."""
        import base64

        from llmc_cli.policy import call_hash

        body = json.dumps({"call": call_hash(call), "confirmed": confirmed, "confirming": confirming,
                           "answers": answers}, sort_keys=True, separators=(",", ":")).encode("utf-8")
        payload = base64.urlsafe_b64encode(body).decode("ascii").rstrip("=")
        return payload + "." + hmac.new(self._secret, payload.encode(), hashlib.sha256).hexdigest()

    def _state(self, call: ToolCall, state: Any) -> dict[str, Any] | None:
        import base64

        from llmc_cli.policy import call_hash

        if not isinstance(state, str) or "." not in state:
            return None
        payload, _, mac = state.rpartition(".")
        if not hmac.compare_digest(mac, hmac.new(self._secret, payload.encode(), hashlib.sha256).hexdigest()):
            return None  # tampered with, or made by another gateway process
        try:
            data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        except ValueError:
            return None
        return data if isinstance(data, dict) and data.get("call") == call_hash(call) else None

    def unpack_state(self, call: ToolCall, state: Any) -> tuple[bool, dict[str, Any]]:
        """(confirmed, answers) of a requestState this process made for this call; else (False, {})."""
        data = self._state(call, state)
        if data is None:
            return False, {}
        answers = data.get("answers")
        return data.get("confirmed") is True, answers if isinstance(answers, dict) else {}

    def asked_to_confirm(self, call: ToolCall, state: Any) -> bool:
        """Whether this requestState went out with the confirmation question for this call."""
        data = self._state(call, state)
        return data is not None and data.get("confirming") is True

    # -- resources, templates, prompts -------------------------------------------------------------

    def gather(self, method: str, key: str, field: str, capability: str, upstreams: Catalog) -> list[dict[str, Any]]:
        """Every server's items of a list method (all pages), their `field` namespaced."""
        def one(server: str) -> list[dict[str, Any]]:
            session = upstreams.session(server)
            if capability not in (session.capabilities or {}):
                return []
            return [{**item, field: self.expose(server, str(item.get(field, "")))}
                    for item in session.list_all(method, key)]

        per_server, failures = upstreams.each(one)
        self._report(failures)
        return [item for server in self.catalog.specs for item in per_server.get(server, [])]

    def forward(self, method: str, server: str, params: dict[str, Any], upstreams: Catalog) -> dict[str, Any]:
        """A request for one server's resource, prompt or completion; RpcError as the server said."""
        return own_result(upstreams.session(server).request(method, params))

    def can_subscribe(self) -> bool:
        """Whether some upstream offers resources/subscribe: an initialize-era one that declares it
        (2026-07-28 upstreams have subscriptions/listen instead, which llmc's client does not
        speak yet; one that cannot start offers nothing)."""
        from llmc_cli.mcp.versions import MODERN_VERSIONS

        def offers(server: str) -> bool:
            session = self.catalog.session(server)
            resources = (session.capabilities or {}).get("resources") or {}
            return session.protocol_version not in MODERN_VERSIONS and resources.get("subscribe") is True

        per_server, _failures = self.catalog.each(offers)
        return any(per_server.values())

    def subscribe(self, connection: GatewayConnection, server: str, uri: str) -> None:
        """A host subscribes to an upstream resource; RpcError/LlmcError as the upstream refused."""
        key = (connection.upstreams.serving(server), server, uri)
        with self._lock:
            first = key not in self._subscribers
            self._subscribers.setdefault(key, set()).add(connection)
        if first:
            try:
                self.forward("resources/subscribe", server, {"uri": uri}, key[0])
            except LlmcError:
                with self._lock:
                    self._subscribers.pop(key, None)
                raise

    def unsubscribe(self, connection: GatewayConnection, server: str, uri: str) -> None:
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
                self.forward("resources/unsubscribe", server, {"uri": uri}, key[0])
            except LlmcError:
                pass  # the upstream may be gone: nothing is subscribed there any more either way

    def forget(self, connection: GatewayConnection) -> None:
        """A host connection closed: its subscriptions end with it."""
        with self._lock:
            keys = [key for key, hosts in self._subscribers.items() if connection in hosts]
        for _upstreams, server, uri in keys:
            self.unsubscribe(connection, server, uri)

    # -- relayed upstream messages -------------------------------------------------------------

    def _resource_updated(self, params: dict[str, Any], source: Catalog) -> None:
        """An upstream's resource changed: every host subscribed to it through that catalog's
        connections hears, under its name there. The hook does not say which server sent it, so a
        URI two servers share reaches the subscribers of both (they re-read; nothing is revealed
        that a read would not)."""
        uri = params.get("uri")
        with self._lock:
            targets = [(server, host) for (upstreams, server, u), hosts in self._subscribers.items()
                       if u == uri and upstreams is source for host in hosts]
        for server, host in targets:
            host.subscriptions.updated(server, params)

    @contextmanager
    def hosting(self, call: HostCall) -> Iterator[str]:
        """Register a host's call for the upstream messages about it; yields our progress token."""
        token = f"llmc-gateway-{next(self._ids)}"
        with self._lock:
            self._calls[token] = call
        try:
            yield token
        finally:
            with self._lock:
                self._calls.pop(token, None)

    def _newest(self) -> HostCall | None:
        with self._lock:
            return next(reversed(self._calls.values()), None)

    def _progress(self, params: dict[str, Any]) -> None:
        with self._lock:
            call = self._calls.get(params.get("progressToken"))  # type: ignore[arg-type]
        if call is not None and call.host_token is not None:
            call.send(jsonrpc.notification("notifications/progress", {**params, "progressToken": call.host_token}))

    def _log(self, params: dict[str, Any]) -> None:
        call = self._newest()
        if call is not None and (call.modern is None or call.log_level):
            call.send(jsonrpc.notification("notifications/message", params))

    def _list_changed(self, method: str) -> None:
        if method not in LIST_CHANGED:
            return
        for connection in list(self.connections):
            connection.subscriptions.changed(method)

    def _asking(self) -> HostCall | None:
        """The host call an upstream's request is about: the one whose thread is waiting on the
        upstream (2026-07-28 upstreams ask in their result), else the newest in flight."""
        me = threading.get_ident()
        with self._lock:
            mine = next((c for c in self._calls.values() if c.thread == me), None)
        return mine or self._newest()

    def _ask_host(self, call: HostCall, method: str, params: dict[str, Any]) -> dict[str, Any]:
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

    def _elicit(self, params: dict[str, Any]) -> dict[str, Any]:
        """An upstream asks its user: the host's user, when the host can be asked (spec: else decline)."""
        call = self._asking()
        if call is None or "elicitation" not in call.capabilities:
            return {"action": "decline"}
        try:
            return self._ask_host(call, "elicitation/create", params)
        except InputRequired:
            raise
        except LlmcError:
            return {"action": "decline" if call.modern else "cancel"}

    def _sample(self, params: dict[str, Any]) -> dict[str, Any]:
        call = self._asking()
        if call is None or "sampling" not in call.capabilities:
            raise RpcError("sampling declined: the MCP host behind the llmc gateway does not offer it", code=-1)
        return self._ask_host(call, "sampling/createMessage", params)

    def _roots(self) -> list[dict[str, Any]]:
        """An upstream asks for roots: the roots of the host whose call is in flight, when it
        declared them (initialize era); else none (a gateway has no roots of its own to offer)."""
        call = self._asking()
        if call is None or "roots" not in call.capabilities:
            return []
        try:
            roots = self._ask_host(call, "roots/list", {}).get("roots")
        except InputRequired:
            raise
        except LlmcError:
            return []
        return [r for r in roots if isinstance(r, dict)] if isinstance(roots, list) else []

    def _report(self, failures: list[Any]) -> None:
        """An upstream that cannot be reached: said once on stderr, its items left out."""
        for failure in failures:
            if failure.server not in self._reported:
                self._reported.add(failure.server)
                print(f"llmc serve: {failure.server} is unavailable: {failure.error.message}", file=sys.stderr,
                      flush=True)
