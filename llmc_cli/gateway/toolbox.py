"""What every host connection of one gateway shares: the profile, one connection per upstream
server (a catalog), the namespaced listings and the way back from a namespaced name to its server.

Names are `SERVER.NAME` for tools and prompts and `SERVER.URI` for resources and templates:
server names contain no dot (config/schema.py), so the first dot splits them back, and a name
does not change when another server is added or removed. A profile of exactly one server may
say `[serve] bare_names = true`: its names are then presented as the server gives them. Tools the
policy hides and tools that drifted from the profile's lock are left out of the listing; so are
resources, templates and prompts the policy's [policy.resources]/[policy.prompts] deny.

Messages an upstream sends while a host's call runs (progress, logs, elicitation, sampling,
roots) go to the host whose call they belong to, never to another: each upstream call carries a
progress token of the gateway's own, and the client session says which call a message belongs to
(mcp/hooks.RELATED_TOKENS: the token it names, the call on whose HTTP stream or in whose
input_required result it came, else the calls in flight on that upstream connection, when they
are all one host's). A message that belongs to no host's call, or may belong to more than one
host's, reaches no host: said at -v, and a request is declined.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from llmc_cli.config.profiles import LoadedProfile
from llmc_cli.config.secrets import Masker, environment_secrets
from llmc_cli.errors import InputRequired, LlmcError, RpcError
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.hooks import RELATED_TOKENS, ClientHooks
from llmc_cli.model import Tool, ToolCall

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog
    from llmc_cli.config.schema import ServeConfig
    from llmc_cli.gateway.connection import GatewayConnection  # it imports this module
    from llmc_cli.policy import ReadKind

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
                 note: Callable[[str], None] | None = None, require_sandbox: bool | None = None,
                 serve: ServeConfig | None = None) -> None:
        """`require_sandbox`: refuse (ConfigError, naming it) a stdio server that would run
        unsandboxed unless the profile says sandbox = "none" for it; None: when this profile's
        gateway serves principals (a principal's own profile is served by one that does).
        `serve`: the served profile's [serve] settings, for the toolbox of a principal's profile
        (default: this profile's)."""
        from llmc_cli import audit, services
        from llmc_cli.services.catalogs import authenticated

        self.profile = profile
        self.note = note  # what is said at -v (None: not verbose)
        self.on_stderr = on_stderr
        self.serve = serve or profile.profile.serve
        # the schema allows bare names with exactly one server, so every name routes back to it
        self.bare = next(iter(profile.profile.servers)) if profile.profile.serve.bare_names else None
        self.hooks = ClientHooks(on_progress=self._progress, on_log=self._log, on_list_changed=self._list_changed,
                                 on_resource_updated=lambda params: self._resource_updated(params, self.catalog),
                                 elicit=self._elicit, sample=self._sample, list_roots=self._roots)
        # The upstream connections every host shares (and those of the one host of stdio);
        # host_upstreams() gives a host session its own to the servers that keep state.
        self.catalog = services.open_catalog(
            profile, hooks=self.hooks, on_stderr=on_stderr,
            require_sandbox=authenticated(profile) if require_sandbox is None else require_sandbox)
        self.catalog.posts_on_caller_thread = True  # a host's call runs on its connection's thread
        # Every host's calls share one audit trail: decisions on disk before each call runs (hosts
        # calling at once share a write and fsync), outcomes written with the next decision or
        # within a second, as in a batch.
        self.audit = audit.Deferred(audit.open_log(profile.profile)).__enter__()
        # The values the audit masks come from the environment and the profile, which are fixed
        # for the gateway's life: read once, not on every call.
        self.masker = Masker(environment_secrets(profile.profile))
        self.connections: weakref.WeakSet[GatewayConnection] = weakref.WeakSet()  # for list_changed
        self._calls: dict[str, HostCall] = {}  # our progress token upstream -> the host's call
        self._lock = threading.Lock()
        self._secret = os.urandom(32)  # binds a confirmation answer to the exact call it was asked for
        self._reported: set[str] = set()
        self._revived: dict[str, float] = {}  # server -> when it was last set to start again
        # (upstream catalog, server, upstream URI) -> the host connections subscribed to it: an
        # upstream connection may be shared, so it is subscribed while at least one host is
        self._subscribers: dict[tuple[Catalog, str, str], set[GatewayConnection]] = {}

    def host_upstreams(self, parent: Catalog | None = None, own: frozenset[str] | None = None,
                       admit: Callable[[str], AbstractContextManager[None]] | None = None) -> Catalog:
        """Upstream connections for one principal (from the shared ones) or one host session
        (from its principal's, `parent`): its own to the servers that keep state (`own`: only
        these; a process, an initialize-era session: what is started there, the others never
        see), the parent's to the rest; each of its own starts on first use, after `admit` let
        it (Catalog.for_host). The caller closes it."""
        holder: list[Catalog] = []
        hooks = replace(self.hooks, on_resource_updated=lambda params: self._resource_updated(params, holder[0]))
        holder.append((parent or self.catalog).for_host(hooks, own, admit))
        return holder[0]

    @property
    def per_session(self) -> frozenset[str]:
        """The servers marked `per_session`: a connection for each host session."""
        return frozenset(name for name, server in self.profile.profile.servers.items()
                         if server.per_session and name in self.catalog.specs)

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
        chain: list[Catalog] = []  # the host's own connections, its principal's, the shared ones
        catalog: Catalog | None = upstreams or self.catalog
        while catalog is not None:
            chain.append(catalog)
            catalog = catalog.shared
        for name in [server] if server else list(self.catalog.specs):
            if now - self._revived.get(name, 0.0) < RETRY_SECONDS:
                continue
            restarted = [c.restart(name) for c in chain]
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

    def pack_state(self, call: ToolCall, confirmed: bool, answers: dict[str, Any], *, principal: str | None,
                   confirming: bool = False) -> str:
        """A 2026-07-28 requestState only this process can make, bound to this exact call (tool
        and arguments) of this principal (another's host cannot replay its yes or its answers):
        whether the host's user said yes, the host's answers to upstream requests so far, and
        whether it carries a confirmation question."""
        import base64

        from llmc_cli.policy import call_hash

        body = json.dumps({"call": call_hash(call), "principal": principal, "confirmed": confirmed,
                           "confirming": confirming, "answers": answers},
                          sort_keys=True, separators=(",", ":")).encode("utf-8")
        payload = base64.urlsafe_b64encode(body).decode("ascii").rstrip("=")
        return payload + "." + hmac.new(self._secret, payload.encode(), hashlib.sha256).hexdigest()

    def _state(self, call: ToolCall, state: Any, principal: str | None) -> dict[str, Any] | None:
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
        if not isinstance(data, dict) or data.get("call") != call_hash(call) or data.get("principal") != principal:
            return None
        return data

    def unpack_state(self, call: ToolCall, state: Any, principal: str | None) -> tuple[bool, dict[str, Any]]:
        """(confirmed, answers) of a requestState this process made for this call of this
        principal; else (False, {})."""
        data = self._state(call, state, principal)
        if data is None:
            return False, {}
        answers = data.get("answers")
        return data.get("confirmed") is True, answers if isinstance(answers, dict) else {}

    def asked_to_confirm(self, call: ToolCall, state: Any, principal: str | None) -> bool:
        """Whether this requestState went out with the confirmation question for this call."""
        data = self._state(call, state, principal)
        return data is not None and data.get("confirming") is True

    # -- resources, templates, prompts -------------------------------------------------------------

    def gather(self, method: str, key: str, field: str, capability: str, upstreams: Catalog) -> list[dict[str, Any]]:
        """Every server's items of a list method (all pages) that the policy lets hosts read, their
        `field` namespaced."""
        from llmc_cli import policy, services

        def one(server: str) -> list[dict[str, Any]]:
            if policy.whole_server_denial(server, self.profile.profile.policy):
                return []  # nothing of it may be read: not asked, not started for this host
            session = upstreams.session(server)
            # Capabilities unknown (a connection that skipped discovery, its era known): asked,
            # and "method not found" means none, as Catalog.list_offered does.
            if session.capabilities and capability not in session.capabilities:
                return []
            try:
                listed = session.list_all(method, key)
            except RpcError as exc:
                if exc.code != jsonrpc.METHOD_NOT_FOUND:
                    raise
                return []
            items = services.visible_items(upstreams, self.profile, method, server, listed)
            return [{**item, field: self.expose(server, str(item.get(field, "")))} for item in items]

        per_server, failures = upstreams.each(one)
        self._report(failures)
        return [item for server in self.catalog.specs for item in per_server.get(server, [])]

    def readable(self, kind: ReadKind, server: str, name: str, upstreams: Catalog) -> bool:
        """Whether the policy lets hosts read this resource (see this template) or get this prompt:
        services.read's judge, asked where no read follows (completions, subscriptions)."""
        from llmc_cli import services

        try:
            return services.read_decision(upstreams, self.profile, kind, server, name).action == "allow"
        except LlmcError:  # the server's tools, needed to judge, cannot be listed
            return False

    def forward(self, method: str, server: str, params: dict[str, Any], upstreams: Catalog) -> dict[str, Any]:
        """A request about one server's resource or prompt that reads nothing (a subscription, a
        completion; reads go through services.read); RpcError as the server said."""
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
        # random: an upstream that serves several principals learns nothing from it (a counter
        # would tell it how many calls others made), and cannot guess another call's
        token = f"llmc-gateway-{secrets.token_urlsafe(12)}"
        with self._lock:
            self._calls[token] = call
        try:
            yield token
        finally:
            with self._lock:
                self._calls.pop(token, None)

    def _owner(self, what: str) -> HostCall | None:
        """The host call the upstream message being handled belongs to (mcp/hooks.RELATED_TOKENS):
        the one it is tied to, or, when nothing ties it, the oldest of the calls in flight on its
        upstream connection if they are all one host connection's (and that connection's only
        requests there). None, said at -v, when it may be another host's or nobody's: it then
        goes to no host."""
        tokens = RELATED_TOKENS.get()
        with self._lock:
            calls = [self._calls.get(t) if isinstance(t, str) else None for t in tokens]
        first = calls[0] if calls else None
        call = first if first is not None and all(c is not None and c.connection is first.connection
                                                  for c in calls) else None
        # progress for one of the gateway's own requests (a listing) names no call of a host: not news
        if call is None and self.note is not None and (tokens or what != "notifications/progress"):
            whose = ("may belong to more than one host's call" if len(calls) > 1 and any(calls)
                     else "belongs to no host's call in flight")
            self.note(f"an upstream's {what} {whose}: not relayed")
        return call

    def _progress(self, params: dict[str, Any]) -> None:
        call = self._owner("notifications/progress")
        if call is not None and call.host_token is not None:
            call.send(jsonrpc.notification("notifications/progress", {**params, "progressToken": call.host_token}))

    def _log(self, params: dict[str, Any]) -> None:
        call = self._owner("notifications/message")
        if call is not None and (call.modern is None or call.log_level):
            call.send(jsonrpc.notification("notifications/message", params))

    def _list_changed(self, method: str) -> None:
        if method not in LIST_CHANGED:
            return
        for connection in list(self.connections):
            connection.subscriptions.changed(method)

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
        call = self._owner("elicitation/create")
        if call is None or "elicitation" not in call.capabilities:
            return {"action": "decline"}
        try:
            return self._ask_host(call, "elicitation/create", params)
        except InputRequired:
            raise
        except LlmcError:
            return {"action": "decline" if call.modern else "cancel"}

    def _sample(self, params: dict[str, Any]) -> dict[str, Any]:
        call = self._owner("sampling/createMessage")
        if call is None:
            raise RpcError("sampling declined: it belongs to no MCP host's call through the llmc gateway", code=-1)
        if "sampling" not in call.capabilities:
            raise RpcError("sampling declined: the MCP host behind the llmc gateway does not offer it", code=-1)
        return self._ask_host(call, "sampling/createMessage", params)

    def _roots(self) -> list[dict[str, Any]]:
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

    def _report(self, failures: list[Any]) -> None:
        """An upstream that cannot be reached: said once on stderr, its items left out."""
        for failure in failures:
            if failure.server not in self._reported:
                self._reported.add(failure.server)
                print(f"llmc serve: {failure.server} is unavailable: {failure.error.message}", file=sys.stderr,
                      flush=True)
