"""What every host connection of one gateway shares: the profile, one connection per upstream
server (a catalog), the audit trail, and the collaborators the connections ask: `routes` (the
names hosts see and the way back from each to its server, gateway/routes.py), `listing` (what
hosts are shown, gateway/listing.py), `outages` (upstreams in trouble, gateway/outages.py) and
`subscribers` (what hosts listen for upstream, gateway/subscribers.py).

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

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import TYPE_CHECKING

from llmc_cli import audit, services
from llmc_cli.config.profiles import LoadedProfile
from llmc_cli.config.secrets import Masker, environment_secrets
from llmc_cli.gateway.listing import Listings
from llmc_cli.gateway.names import ServedNames
from llmc_cli.gateway.outages import Outages
from llmc_cli.gateway.relay import HostRelay
from llmc_cli.gateway.request_state import RequestStates
from llmc_cli.gateway.routes import Routes
from llmc_cli.gateway.subscribers import Subscribers
from llmc_cli.guard import clearance
from llmc_cli.mcp.hooks import ClientHooks
from llmc_cli.services.calls import Conclusions
from llmc_cli.services.catalogs import authenticated
from llmc_cli.services.semantic import semantic_wanted

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog
    from llmc_cli.config.schema import ServeConfig


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
        names = ServedNames(self.serve.name_separator, profile.profile.servers, self.bare)
        self.relay = HostRelay(note)
        self.hooks = ClientHooks(
            on_progress=self.relay.progress,
            on_log=self.relay.log,
            on_list_changed=lambda server, method: self.subscribers.list_changed(server, method, self.catalog),
            on_resource_updated=lambda params: self.subscribers.resource_updated(params, self.catalog),
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
        self.states = RequestStates()  # 2026-07-28 requestState, sealed for one call of one principal
        self.subscribers = Subscribers(self.catalog, profile)  # resource subscriptions upstream; list changes to hosts
        # 2026-07-28 upstreams announce changes on a listen stream: one on every connection
        # (passed on to the principals' and host sessions' own)
        self.catalog.pool.options = self.catalog.pool.options._replace(on_connected=self.subscribers.connected)
        self.outages = Outages(self.catalog)  # an upstream unavailable: said once; started again on next use
        self.routes = Routes(
            names,
            self.catalog,
            tool_search=self.serve.tool_search,
            relist_tools=lambda clearance: self.listing.tools(clearance),
            relist_prompts=lambda upstreams, clearance: self.listing.gather(
                "prompts/list", "prompts", "name", "prompts", upstreams, clearance
            ),
        )
        self.listing = Listings(profile, self.catalog, self.routes, self.outages)
        # What every host call of a clearance concludes alike (the policy's verdicts on the tools,
        # the servers the clearance may use, the inspectors, the approval key): concluded once,
        # not per call (services.calls.Conclusions; a new listing's tools are judged afresh).
        self._conclusions: dict[str | None, Conclusions] = {}

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
        hooks = replace(
            self.hooks,
            on_list_changed=lambda server, method: self.subscribers.list_changed(server, method, holder[0]),
            on_resource_updated=lambda params: self.subscribers.resource_updated(params, holder[0]),
        )
        holder.append((parent or self.catalog).for_host(hooks, own, admit))
        return holder[0]

    def warm_up(self) -> None:
        """Start the upstreams now, in the background: those something could be used of (a server
        the policy denies as a whole is never started: least privilege)."""
        self.catalog.pool.warm_up(services.usable_servers(self.catalog, self.profile, None, None))

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

    def conclusions(self, clearance: str | None) -> Conclusions:
        """What the host calls of this clearance share (services.host_calls)."""
        known = self._conclusions.get(clearance)
        if known is None:
            known = self._conclusions.setdefault(clearance, Conclusions())
        return known

    def rate_share(self, principal: str | None) -> tuple[str, int] | None:
        """A principal's own calls per minute, by its name: `[serve.principals.NAME]`'s, or for an
        OAuth principal `[serve.oauth]`'s (each counted apart); None: none set."""
        if principal is None:
            return None
        own = (self.serve.principals or {}).get(principal)
        oauth = self.serve.oauth if principal.startswith("oauth:") else None
        limit = own.calls_per_minute if own is not None else oauth.calls_per_minute if oauth is not None else None
        return (principal, limit) if limit else None

    def clearance_of(self, principal: str | None) -> str:
        """The clearance of a host of this principal (guard/clearance.py): servers above it are
        not offered, listed or called."""
        return clearance.principal(self.serve, self.profile.profile, principal)
