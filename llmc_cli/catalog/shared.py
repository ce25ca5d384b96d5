"""Catalog: many servers as one toolbox, and which connection serves each server. A command has
one catalog; a long-lived caller with many users (the gateway's hosts) gives each user a catalog
of its own descending from the root one (for_host), holding its own connections to the servers
that keep state and sharing the root's for the others. The parts: pool.py (connections),
listing.py (tool listings, fan-out to every server), routing.py (tool names to servers)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from llmc_cli.catalog import listing, routing
from llmc_cli.catalog.listing import ServerFailure, ToolLists
from llmc_cli.catalog.pool import ConnectOptions, Pool
from llmc_cli.errors import UsageError, did_you_mean
from llmc_cli.mcp.hooks import ClientHooks
from llmc_cli.mcp.session import ClientSession
from llmc_cli.mcp.stores import Stores
from llmc_cli.model import JSONObject, ServerSpec, Tool

if TYPE_CHECKING:
    from llmc_cli.mcp.transports.stdio import StdioTransport

T = TypeVar("T")


class Catalog:
    def __init__(
        self,
        specs: list[ServerSpec],
        options: ConnectOptions | None = None,
        *,
        shared: Catalog | None = None,
        own: Collection[str] | None = None,
        started: Mapping[str, StdioTransport] | None = None,
    ) -> None:
        """`options`: how its connections are made (pool.ConnectOptions). Servers it names
        `unusable` stay in the catalog, failed from the start: every listing reports them as
        failures, with their own exit code, beside the others' results. `shared` and `own`
        (and the options' `admit`): see for_host(). `started`: stdio servers already started,
        which its connections adopt (Pool)."""
        self.pool = Pool(specs, options, on_changed=self._changed, started=started)
        self.specs = self.pool.specs  # the same dict: servers a keeper lists later join it
        self.keeper = self.pool.options.keeper  # (socket path, session name): the servers live in a session keeper
        self.shared = shared
        self.own = None if own is None else frozenset(own)
        # The listings are the servers', not the connections': kept by the root for every host.
        self.tools: ToolLists = shared.tools if shared is not None else ToolLists()
        self.pool.posts_on_caller_thread = shared.posts_on_caller_thread if shared is not None else False
        # Told how work across servers (each) goes: see listing.each.
        self.on_each: Callable[[int, list[str]], None] | None = None
        self.say: Callable[[str], None] | None = None  # -v: what the catalog did that a person may want to know

    @property
    def posts_on_caller_thread(self) -> bool:
        """Every call comes on a thread of its own that only waits for it (the gateway's host
        connections): an HTTP server's requests are then posted on that thread."""
        return self.pool.posts_on_caller_thread

    @posts_on_caller_thread.setter
    def posts_on_caller_thread(self, value: bool) -> None:
        self.pool.posts_on_caller_thread = value

    @property
    def tools_changed(self) -> set[str]:
        """Servers that announced notifications/tools/list_changed since the result cache last
        looked (services/caching.py drops their cached results); the root's set."""
        return self.tools.changed

    # -- sharing per host ------------------------------------------------------------------------

    def for_host(
        self,
        hooks: ClientHooks | None = None,
        own: Collection[str] | None = None,
        admit: Callable[[str], AbstractContextManager[None]] | None = None,
    ) -> Catalog:
        """For a long-lived caller with many users (the gateway's hosts): a catalog for one of
        them, with its own connections to the servers that keep state between requests (a
        process, an initialize-era session) and this catalog's connections to the others. So a
        process or session one user started is never another's. `own`: the only servers it
        connects to itself (None: every one that keeps state); `admit(server)`: a context each
        connection of its own starts in (raises to refuse it: a cap that counts it meanwhile). Its connections start
        on first use, are never remembered for later runs, and end when it is closed; tool
        listings come from the root catalog (they are the server's, not the connection's)."""
        if self.keeper:
            return self  # the servers live in a session keeper, shared by design
        pool = self.pool
        options = pool.options._replace(
            hooks=hooks,
            stores=replace(pool.options.stores or Stores(), remember_session_ids=False),
            unusable={name: pool.failed[name] for name in pool.unusable},
            admit=admit,
        )
        specs = [spec for name, spec in self.specs.items() if name not in pool.unusable]
        return Catalog(specs, options, shared=self, own=own)

    def root(self) -> Catalog:
        """The catalog every for_host() one descends from: the connections shared by all."""
        catalog = self
        while catalog.shared is not None:
            catalog = catalog.shared
        return catalog

    def stateless(self, server: str) -> bool:
        """Whether one connection to the server can serve every user: a remote server of the
        2026-07-28 era, or a Streamable HTTP one of the initialize era that gave no session id.
        A process (stdio, built-in) and a session keep what one user did. Connects to know."""
        if self.specs[server].kind != "remote":
            return False
        session = self.session(server)
        return session.era == "modern" or getattr(session.transport, "session_id", "") is None

    def serving(self, server: str) -> Catalog:
        """The catalog whose connection serves this server: the root's for a stateless server,
        the one it descends from for a server not its own."""
        if self.shared is None:
            return self
        if self.own is not None and server not in self.own:
            return self.shared.serving(server)
        root = self.root()
        return root if root.stateless(server) else self

    def session(self, server: str) -> ClientSession:
        """The server's session, connecting on first use (one connection per server), on the
        connection of the catalog serving it."""
        if server not in self.specs:
            raise UsageError(
                f"unknown server {server!r}{did_you_mean(server, self.specs)} (servers: {', '.join(self.specs) or 'none'})"
            )
        if self.shared is not None and (serving := self.serving(server)) is not self:
            return serving.session(server)
        return self.pool.session(server)

    def restart(self, server: str) -> bool:
        """For a long-lived caller (the gateway): forget a server whose connection ended, or whose
        start failed, so that the next use starts it again (Pool.restart)."""
        return self.pool.restart(server, self._dropped)

    def release(self) -> None:
        """Close its own connections and stay usable (Pool.release)."""
        self.pool.release(self._dropped)

    def _dropped(self, server: str) -> None:
        """A connection of the root ended: its listing goes with it (a host's catalog's listings
        are the root's, and stay)."""
        if self.shared is None:
            self.tools.forget(server)

    def _changed(self, server: str, method: str) -> None:
        """notifications/tools/list_changed: the next listing asks the server again."""
        if method == "notifications/tools/list_changed":
            # Before its first listing (the handshake, the server's own start-up) nothing known
            # of the server is stale: its cached results stay (their key holds each tool's
            # definition hash, so a tool that did change misses anyway).
            if server in self.tools.by_server:
                self.tools.changed.add(server)
            self.tools.forget(server)
        hooks = self.pool.options.hooks
        if hooks and hooks.on_list_changed:
            hooks.on_list_changed(server, method)

    # -- listing ---------------------------------------------------------------------------------

    def tools_of(self, server: str) -> list[Tool]:
        return self.tools.of(server, self.root().session)

    def each(self, work: Callable[[str], T], servers: list[str] | None = None) -> tuple[dict[str, T], list[ServerFailure]]:
        """Run work(server) for every server (or these) concurrently; failures are collected, not raised."""
        return listing.each(servers or list(self.specs), work, self.on_each)

    def list_tools(self, servers: list[str] | None = None) -> tuple[list[Tool], list[ServerFailure]]:
        names = servers or list(self.specs)
        held = [self.tools.by_server.get(name) for name in names]
        if all(tools is not None for tools in held):  # nothing to ask (a batch resolving name after name)
            return [t for tools in held if tools is not None for t in tools], []
        per_server, failures = self.each(self.tools_of, names)
        return [t for name in names for t in per_server.get(name, [])], failures

    def list_offered(
        self, method: str, key: str, capability: str, servers: list[str] | None = None
    ) -> tuple[dict[str, list[JSONObject]], list[str], list[ServerFailure]]:
        """Every page of `method` from each server (or each of `servers`) that offers `capability`
        (listing.offered): (items per server, servers skipped as not offering it, failures)."""
        results, failures = self.each(lambda server: listing.offered(self.session(server), method, key, capability), servers)
        skipped = [server for server, items in results.items() if items is None]
        return {server: items for server, items in results.items() if items is not None}, skipped, failures

    def find_tool(self, server: str, tool: str) -> Tool | None:
        return routing.find_tool(self, server, tool)

    def require_tool(self, server: str, tool: str) -> Tool:
        return routing.require_tool(self, server, tool)

    def status(self) -> list[JSONObject]:
        """Each server's state for a health page (Pool.status)."""
        return self.pool.status(self.tools.counts() if self.shared is None else {})

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
