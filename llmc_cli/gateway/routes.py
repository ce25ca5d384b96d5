"""The names a toolbox gives hosts and the way back from each to its server: tools and prompts
named by gateway/names.py (`SERVER.NAME`, or the provider-safe spelling of `[serve]
name_separator`), resource URIs and templates `SERVER.URI` (or bare, with `bare_names`).

A tool or prompt name this gateway has not given yet (a host that calls without listing first)
is routed after the toolbox lists them again (`relist_tools`, `relist_prompts`: the listing's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llmc_cli.catalog import routing
from llmc_cli.gateway.names import ServedNames
from llmc_cli.model import JSON, Tool

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog


class Routes:
    def __init__(
        self,
        names: ServedNames,
        catalog: Catalog,
        *,
        tool_search: bool,
        relist_tools: Callable[[str | None], object],
        relist_prompts: Callable[[Catalog, str | None], object],
    ) -> None:
        self.names = names
        self.bare = names.bare  # the one server of `bare_names`, or None
        self.catalog = catalog  # whose servers a `SERVER.URI` may name
        self.tool_search = tool_search
        self.relist_tools = relist_tools
        self.relist_prompts = relist_prompts

    @property
    def reserved(self) -> tuple[str, ...]:
        """The names of the gateway's own tools, which no server's tool may take."""
        return (self.names.meta("search_tools"), self.names.meta("call_tool")) if self.tool_search else ()

    def tool_name(self, tool: Tool) -> str:
        """The name a host sees for a tool (gateway/names.py)."""
        return self.names.name("tool", tool.server, tool.name)

    def expose(self, server: str, name: str) -> str:
        """The name a host sees for a server's resource URI (or template): `server.URI`."""
        return name if self.bare else f"{server}.{name}"

    def shown(self, kind: str, server: str, name: str) -> str:
        """The name a host sees for a prompt, or a resource's URI."""
        return self.names.name(kind, server, name) if kind == "prompt" else self.expose(server, name)

    def route(self, name: JSON, kind: str = "tool", clearance: str | None = None) -> tuple[str, str] | None:
        """A tool's (or a prompt's) name as a host sent it -> (server, name) for a server of this
        profile; anything else: None. A name this gateway has not given (a host that calls
        without listing first) lists the tools again before it is refused, those of the servers
        the host's `clearance` covers (a server above it is not started for this host)."""
        if not isinstance(name, str):
            return None
        route = self.names.route(kind, name)
        if kind == "tool" and (route is None or self.bare) and not self.names.dotted and not self.names.known(kind, name):
            self.relist_tools(clearance)
            route = self.names.route(kind, name)
        return route

    def route_prompt(self, name: JSON, upstreams: Catalog, clearance: str | None = None) -> tuple[str, str] | None:
        """A prompt's name as a host sent it -> (server, name); a name not given yet (a host that
        never listed them) lists the prompts again first (of the servers `clearance` covers)."""
        route = self.route(name, "prompt")
        if route is None and isinstance(name, str) and not self.names.dotted and not self.names.known("prompt", name):
            self.relist_prompts(upstreams, clearance)
            route = self.route(name, "prompt")
        return route

    def route_uri(self, uri: JSON) -> tuple[str, str] | None:
        """'server.URI' -> (server, URI) for a server of this profile; anything else: None."""
        if not isinstance(uri, str):
            return None
        if self.bare:
            return (self.bare, uri) if uri else None
        named = routing.qualified(uri, self.catalog.specs)
        return named if named is not None and named[1] else None
