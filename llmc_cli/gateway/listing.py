"""What a toolbox lists for hosts: the tools the policy allows (and, with a lock, pinned as they
are now), every server's resources, templates and prompts the policy lets hosts read, each
namespaced by the toolbox's routes; and the policy's judgement of one item where no read follows.
Tools the policy hides and tools that drifted from the profile's lock are left out; so are
resources, templates and prompts the policy's [policy.resources]/[policy.prompts] deny, and
everything of a server above a host's clearance."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmc_cli import lockfile, policy, services
from llmc_cli.config.profiles import lock_path
from llmc_cli.errors import LlmcError, RpcError
from llmc_cli.guard.clearance import cleared
from llmc_cli.mcp import jsonrpc
from llmc_cli.model import JSONObject, Tool

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog
    from llmc_cli.config.profiles import LoadedProfile
    from llmc_cli.gateway.outages import Outages
    from llmc_cli.gateway.routes import Routes
    from llmc_cli.policy import ReadKind


class Listings:
    def __init__(self, profile: LoadedProfile, catalog: Catalog, routes: Routes, outages: Outages) -> None:
        self.profile = profile
        self.catalog = catalog  # the shared upstream connections (the servers, in the profile's order)
        self.routes = routes
        self.outages = outages

    def tools(self, clearance: str | None = None) -> list[Tool]:
        """The tools a host sees: allowed by the policy, of the servers its `clearance` covers
        and, with a lock, pinned as they are now. A 2026-07-28 server's listing whose ttlMs ran
        out is asked again (a host lists seldom; a call uses the listing held)."""
        self.outages.revive()
        self.catalog.tools.expire()
        allowed, _hidden, failures = services.visible_tools(self.catalog, self.profile, clearance=clearance)
        self.outages.report(failures)
        self.routes.names.assign("tool", ((t.server, t.name) for t in allowed), self.routes.reserved)
        if not self.profile.profile.lock:
            return allowed
        pinned = lockfile.read(lock_path(self.profile))["servers"]
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
        return {**tool.raw, "name": self.routes.tool_name(tool), "annotations": annotations}

    def visible(self, tool: Tool) -> bool:
        return policy.visible(tool, self.profile.profile.policy).action == "allow"

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
        self.outages.report(failures)
        names = self.routes.names
        if field == "name":  # prompts: named as tools are
            names.assign("prompt", ((s, str(p.get("name", ""))) for s, items in per_server.items() for p in items))
            return [
                {**p, "name": names.name("prompt", s, str(p.get("name", "")))}
                for s in self.catalog.specs
                for p in per_server.get(s, [])
            ]
        return [
            {**item, field: self.routes.expose(server, str(item.get(field, "")))}
            for server in self.catalog.specs
            for item in per_server.get(server, [])
        ]

    def readable(self, kind: ReadKind, server: str, name: str, upstreams: Catalog, clearance: str | None) -> bool:
        """Whether the policy lets hosts read this resource (see this template) or get this prompt:
        services.read's judge, asked where no read follows (completions, subscriptions). `clearance`:
        the host's, always given (None: unrestricted): a server above it is neither read nor started."""
        if not cleared(self.profile.profile, server, clearance):
            return False
        try:
            return services.read_decision(upstreams, self.profile, kind, server, name).action == "allow"
        except LlmcError:  # the server's tools, needed to judge, cannot be listed
            return False
