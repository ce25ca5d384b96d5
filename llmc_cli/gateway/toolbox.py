"""What every host connection of one gateway shares: the profile, one connection per upstream
server (a catalog), the namespaced listings and the way back from a namespaced name to its server.

Names are `SERVER.NAME` for tools and prompts and `SERVER.URI` for resources and templates:
server names contain no dot (config/schema.py), so the first dot splits them back, and a name
does not change when another server is added or removed. A profile of exactly one server may
say `[serve] bare_names = true`: its names are then presented as the server gives them. Tools the
policy hides and tools that drifted from the profile's lock are left out of the listing; so are
resources, templates and prompts the policy's [policy.resources]/[policy.prompts] deny.

Messages an upstream sends while a host's call runs go to the host whose call they belong to
(gateway/relay.py).
"""

from __future__ import annotations

import sys
import threading
import time
import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from llmc_cli import audit, lockfile, policy, services
from llmc_cli.catalog import routing
from llmc_cli.config.profiles import LoadedProfile
from llmc_cli.config.secrets import Masker, environment_secrets
from llmc_cli.errors import LlmcError, RpcError
from llmc_cli.gateway.names import ServedNames
from llmc_cli.gateway.relay import HostRelay, own_result
from llmc_cli.gateway.request_state import RequestStates
from llmc_cli.guard import clearance
from llmc_cli.guard.clearance import cleared
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.hooks import ClientHooks
from llmc_cli.mcp.messages import object_at
from llmc_cli.mcp.versions import MODERN_VERSIONS
from llmc_cli.model import JSON, JSONObject, Tool
from llmc_cli.services.catalogs import authenticated
from llmc_cli.services.semantic import semantic_wanted

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog
    from llmc_cli.config.schema import ServeConfig
    from llmc_cli.gateway.host import Host
    from llmc_cli.policy import ReadKind

RETRY_SECONDS = 5.0
LIST_CHANGED = ("notifications/tools/list_changed", "notifications/resources/list_changed", "notifications/prompts/list_changed")


class Toolbox:
    def __init__(
        self,
        profile: LoadedProfile,
        *,
        on_stderr: Callable[[str, str], None] | None = None,
        note: Callable[[str], None] | None = None,
        require_sandbox: bool | None = None,
        serve: ServeConfig | None = None,
    ) -> None:
        """`require_sandbox`: refuse (ConfigError, naming it) a stdio server that would run
        unsandboxed unless the profile says sandbox = "none" for it; None: when this profile's
        gateway serves principals (a principal's own profile is served by one that does).
        `serve`: the served profile's [serve] settings, for the toolbox of a principal's profile
        (default: this profile's)."""
        self.profile = profile
        self.note = note  # what is said at -v (None: not verbose)
        self.on_stderr = on_stderr
        self.serve = serve or profile.profile.serve
        if self.serve.tool_search:  # [search] semantic = true without its extra: refused here, at start (exit 3)
            semantic_wanted(profile.profile.search.semantic)
        # the schema allows bare names with exactly one server, so every name routes back to it
        self.bare = next(iter(profile.profile.servers)) if profile.profile.serve.bare_names else None
        self.names = ServedNames(self.serve.name_separator, profile.profile.servers, self.bare)
        self.relay = HostRelay(note)
        self.hooks = ClientHooks(
            on_progress=self.relay.progress,
            on_log=self.relay.log,
            on_list_changed=self._list_changed,
            on_resource_updated=lambda params: self._resource_updated(params, self.catalog),
            elicit=self.relay.elicit,
            sample=self.relay.sample,
            list_roots=self.relay.roots,
        )
        # The upstream connections every host shares (and those of the one host of stdio);
        # host_upstreams() gives a host session its own to the servers that keep state.
        self.catalog = services.open_catalog(
            profile,
            hooks=self.hooks,
            on_stderr=on_stderr,
            require_sandbox=authenticated(profile) if require_sandbox is None else require_sandbox,
        )
        self.catalog.posts_on_caller_thread = True  # a host's call runs on its connection's thread
        # -v: what the catalog did that an operator may want to know (a dropped cache entry), in the log's words
        self.catalog.say = (lambda message: note(message.removeprefix("llmc: "))) if note is not None else None
        # Every host's calls share one audit trail: decisions on disk before each call runs (hosts
        # calling at once share a write and fsync), outcomes written with the next decision or
        # within a second, as in a batch.
        self.state = services.open_state(profile)  # every call's, and the host sessions' (gateway/hosts.py)
        self.audit = audit.Deferred(services.audit_log(self.state)).__enter__()
        # The values the audit masks come from the environment and the profile, which are fixed
        # for the gateway's life: read once, not on every call.
        self.masker = Masker(environment_secrets(profile.profile))
        self.connections: weakref.WeakSet[Host] = weakref.WeakSet()  # for list_changed
        self._lock = threading.Lock()
        self.states = RequestStates()  # 2026-07-28 requestState, sealed for one call of one principal
        self._reported: set[str] = set()
        self._revived: dict[str, float] = {}  # server -> when it was last set to start again
        # (upstream catalog, server, upstream URI) -> the host connections subscribed to it: an
        # upstream connection may be shared, so it is subscribed while at least one host is
        self._subscribers: dict[tuple[Catalog, str, str], set[Host]] = {}

    def host_upstreams(
        self,
        parent: Catalog | None = None,
        own: frozenset[str] | None = None,
        admit: Callable[[str], AbstractContextManager[None]] | None = None,
    ) -> Catalog:
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
        return frozenset(
            name for name, server in self.profile.profile.servers.items() if server.per_session and name in self.catalog.specs
        )

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
                print(f"llmc serve: {name} will be started again (what it kept in memory is lost)", file=sys.stderr, flush=True)

    def clearance_of(self, principal: str | None) -> str:
        """The clearance of a host of this principal (guard/clearance.py): servers above it are
        not offered, listed or called."""
        return clearance.principal(self.serve, self.profile.profile, principal)

    def tools(self, clearance: str | None = None) -> list[Tool]:
        """The tools a host sees: allowed by the policy, of the servers its `clearance` covers
        and, with a lock, pinned as they are now."""
        self.revive()
        allowed, _hidden, failures = services.visible_tools(self.catalog, self.profile, clearance=clearance)
        self._report(failures)
        self.names.assign("tool", ((t.server, t.name) for t in allowed), self.reserved)
        if not self.profile.profile.lock:
            return allowed
        pinned = lockfile.read(services.lock_path(self.profile))["servers"]
        return [
            t
            for t in allowed
            if ((pinned.get(t.server) or {}).get("tools") or {}).get(t.name, {}).get("hash") == lockfile.tool_hash(t)
        ]

    def describe(self, tool: Tool) -> JSONObject:
        """The tool as the host sees it: namespaced, with the hints the profile's policy goes by
        (a profile corrects servers that mislabel their tools)."""
        hints = policy.effective_hints(tool, tool.qualified_name, self.profile.profile.policy)
        annotations = {**tool.annotations, **{f"{k}Hint": v for k, v in hints.items()}}
        return {**tool.raw, "name": self.tool_name(tool), "annotations": annotations}

    def tool_name(self, tool: Tool) -> str:
        """The name a host sees for a tool (gateway/names.py)."""
        return self.names.name("tool", tool.server, tool.name)

    @property
    def reserved(self) -> tuple[str, ...]:
        """The names of the gateway's own tools, which no server's tool may take."""
        return (self.names.meta("search_tools"), self.names.meta("call_tool")) if self.serve.tool_search else ()

    def expose(self, server: str, name: str) -> str:
        """The name a host sees for a server's resource URI (or template): `server.URI`."""
        return name if self.bare else f"{server}.{name}"

    def route(self, name: JSON, kind: str = "tool") -> tuple[str, str] | None:
        """A tool's (or a prompt's) name as a host sent it -> (server, name) for a server of this
        profile; anything else: None. A name this gateway has not given (a host that calls
        without listing first) lists the tools again before it is refused."""
        if not isinstance(name, str):
            return None
        route = self.names.route(kind, name)
        if kind == "tool" and (route is None or self.bare) and not self.names.dotted and not self.names.known(kind, name):
            self.tools()
            route = self.names.route(kind, name)
        return route

    def route_prompt(self, name: JSON, upstreams: Catalog) -> tuple[str, str] | None:
        """A prompt's name as a host sent it -> (server, name); a name not given yet (a host that
        never listed them) lists the prompts again first."""
        route = self.route(name, "prompt")
        if route is None and isinstance(name, str) and not self.names.dotted and not self.names.known("prompt", name):
            self.gather("prompts/list", "prompts", "name", "prompts", upstreams)
            route = self.route(name, "prompt")
        return route

    def shown(self, kind: str, server: str, name: str) -> str:
        """The name a host sees for a prompt, or a resource's URI."""
        return self.names.name(kind, server, name) if kind == "prompt" else self.expose(server, name)

    def route_uri(self, uri: JSON) -> tuple[str, str] | None:
        """'server.URI' -> (server, URI) for a server of this profile; anything else: None."""
        if not isinstance(uri, str):
            return None
        if self.bare:
            return (self.bare, uri) if uri else None
        named = routing.qualified(uri, self.catalog.specs)
        return named if named is not None and named[1] else None

    def visible(self, tool: Tool) -> bool:
        return policy.visible(tool, self.profile.profile.policy).action == "allow"

    # -- resources, templates, prompts -------------------------------------------------------------

    def gather(
        self, method: str, key: str, field: str, capability: str, upstreams: Catalog, clearance: str | None = None
    ) -> list[JSONObject]:
        """Every server's items of a list method (all pages) that the policy lets hosts read, their
        `field` namespaced; none of a server above `clearance`."""

        def one(server: str) -> list[JSONObject]:
            if policy.whole_server_denial(server, self.profile.profile.policy) or not cleared(
                self.profile.profile, server, clearance
            ):
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
            return services.visible_items(upstreams, self.profile, method, server, listed)

        per_server, failures = upstreams.each(one)
        self._report(failures)
        if field == "name":  # prompts: named as tools are
            self.names.assign("prompt", ((s, str(p.get("name", ""))) for s, items in per_server.items() for p in items))
            name = self.names.name
            return [
                {**p, "name": name("prompt", s, str(p.get("name", "")))}
                for s in self.catalog.specs
                for p in per_server.get(s, [])
            ]
        return [
            {**item, field: self.expose(server, str(item.get(field, "")))}
            for server in self.catalog.specs
            for item in per_server.get(server, [])
        ]

    def readable(self, kind: ReadKind, server: str, name: str, upstreams: Catalog, clearance: str | None = None) -> bool:
        """Whether the policy lets hosts read this resource (see this template) or get this prompt:
        services.read's judge, asked where no read follows (completions, subscriptions)."""
        if not cleared(self.profile.profile, server, clearance):
            return False
        try:
            return services.read_decision(upstreams, self.profile, kind, server, name).action == "allow"
        except LlmcError:  # the server's tools, needed to judge, cannot be listed
            return False

    def forward(self, method: str, server: str, params: JSONObject, upstreams: Catalog) -> JSONObject:
        """A request about one server's resource or prompt that reads nothing (a subscription, a
        completion; reads go through services.read); RpcError as the server said."""
        return own_result(upstreams.session(server).request(method, params))

    def can_subscribe(self) -> bool:
        """Whether some upstream offers resources/subscribe: an initialize-era one that declares it
        (2026-07-28 upstreams have subscriptions/listen instead, which llmc's client does not
        speak yet; one that cannot start offers nothing)."""

        def offers(server: str) -> bool:
            session = self.catalog.session(server)
            resources = object_at(session.capabilities, "resources")
            return session.protocol_version not in MODERN_VERSIONS and resources.get("subscribe") is True

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
                self.forward("resources/subscribe", server, {"uri": uri}, key[0])
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
                self.forward("resources/unsubscribe", server, {"uri": uri}, key[0])
            except LlmcError:
                pass  # the upstream may be gone: nothing is subscribed there any more either way

    def forget(self, connection: Host) -> None:
        """A host connection closed: its subscriptions end with it."""
        with self._lock:
            keys = [key for key, hosts in self._subscribers.items() if connection in hosts]
        for _upstreams, server, uri in keys:
            self.unsubscribe(connection, server, uri)

    # -- relayed upstream messages -------------------------------------------------------------

    def _resource_updated(self, params: JSONObject, source: Catalog) -> None:
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

    def _list_changed(self, method: str) -> None:
        if method not in LIST_CHANGED:
            return
        for connection in list(self.connections):
            connection.subscriptions.changed(method)

    def _report(self, failures: list[Any]) -> None:
        """An upstream that cannot be reached: said once on stderr, its items left out."""
        for failure in failures:
            if failure.server not in self._reported:
                self._reported.add(failure.server)
                print(f"llmc serve: {failure.server} is unavailable: {failure.error.message}", file=sys.stderr, flush=True)
