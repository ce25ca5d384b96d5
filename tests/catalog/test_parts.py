"""The catalog's parts in-process, over scripted servers (tests/mcp/scripted_peer.py): routing
(tool names to servers, asking only the servers it must), the tool-name cache a command's
ToolResolver reads once, the root's tool listings shared with every host's catalog, and the
pool's warm-up."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from llmc_cli.catalog import Catalog, ConnectOptions, routing
from llmc_cli.errors import UsageError
from llmc_cli.mcp.hooks import ClientHooks
from llmc_cli.model import ServerSpec
from llmc_cli.services import tools as tool_names
from llmc_cli.services.tools import ToolResolver
from tests.mcp.scripted_peer import ScriptedPeer, modern_discover


def lists(*names: str) -> ScriptedPeer:
    def tools_list(peer: ScriptedPeer, message: dict[str, Any]) -> None:
        peer.reply(message, {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in names]})

    return ScriptedPeer({"tools/list": tools_list})


def listings(peer: ScriptedPeer) -> int:
    return sum(1 for m in peer.received if m.get("method") == "tools/list")


def catalog_of(peers: dict[str, ScriptedPeer], hooks: ClientHooks | None = None) -> Catalog:
    specs = [ServerSpec(name=name, builtin="scripted", timeout=5, connect_timeout=5) for name in peers]
    return Catalog(specs, ConnectOptions(hooks, builtins={"scripted": lambda spec: peers[spec.name]}))


@pytest.fixture
def peers() -> dict[str, ScriptedPeer]:
    return {"a": lists("x", "both"), "b": lists("y", "both")}


def test_a_qualified_name_starts_no_server(peers: dict[str, ScriptedPeer]) -> None:
    with catalog_of(peers) as catalog:
        assert routing.resolve_tool(catalog, "b.y") == ("b", "y")
        assert routing.qualified("b.y", catalog.specs) == ("b", "y")
        assert routing.qualified("c.y", catalog.specs) is None
    assert all(peer.received == [] for peer in peers.values())


def test_a_bare_name_asks_only_the_servers_the_cache_names(peers: dict[str, ScriptedPeer]) -> None:
    with catalog_of(peers) as catalog:
        assert routing.resolve_tool(catalog, "y", {"a": ["x", "both"], "b": ["y", "both"]}) == ("b", "y")
        assert (listings(peers["a"]), listings(peers["b"])) == (0, 1)


def test_a_stale_cache_costs_a_listing_of_every_server(peers: dict[str, ScriptedPeer]) -> None:
    with catalog_of(peers) as catalog:
        assert routing.resolve_tool(catalog, "x", {"a": [], "b": ["y"]}) == ("a", "x")
        assert (listings(peers["a"]), listings(peers["b"])) == (1, 1)


def test_an_ambiguous_or_unknown_bare_name_is_a_usage_error(peers: dict[str, ScriptedPeer]) -> None:
    with catalog_of(peers) as catalog:
        with pytest.raises(UsageError, match=r"ambiguous: a\.both, b\.both"):
            routing.resolve_tool(catalog, "both")
        with pytest.raises(UsageError, match="no server has a tool named 'z'"):
            routing.resolve_tool(catalog, "z")
        with pytest.raises(UsageError, match="there is no server 'c'"):
            routing.require_tool(catalog, "a", "c.x")


def test_a_resolver_reads_the_cache_once_and_leaves_what_it_listed(
    peers: dict[str, ScriptedPeer], isolated_dirs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = []
    read_cache = tool_names.read_cache
    monkeypatch.setattr(tool_names, "read_cache", lambda: reads.append(1) or read_cache())
    with catalog_of(peers) as catalog:
        resolve = ToolResolver(catalog, None)
        assert [resolve(name) for name in ("x", "y", "x", "a.both")] == [("a", "x"), ("b", "y"), ("a", "x"), ("a", "both")]
        assert (listings(peers["a"]), listings(peers["b"])) == (1, 1)
    # One read to resolve; one more to merge what was listed into the file.
    assert len(reads) == 2
    cache = json.loads((isolated_dirs / "state" / "completion-tools.json").read_text())
    assert cache == {"builtin:default": ["a.both", "a.x", "b.both", "b.y"]}

    fresh = {"a": lists("x", "both"), "b": lists("y", "both")}
    with catalog_of(fresh) as catalog:
        assert ToolResolver(catalog, None)("y") == ("b", "y")  # the next command asks only b
        assert (listings(fresh["a"]), listings(fresh["b"])) == (0, 1)
    assert tool_names.cached_names("builtin:default") == cache["builtin:default"]


def test_a_hosts_catalog_reads_the_roots_listings(peers: dict[str, ScriptedPeer]) -> None:
    with catalog_of(peers) as root:
        host = root.for_host()
        try:
            assert host.tools is root.tools
            assert [t.name for t in host.tools_of("a")] == ["x", "both"]
            assert [t.name for t in root.tools_of("a")] == ["x", "both"]
            assert listings(peers["a"]) == 1  # once, on the root's connection
            assert host.pool.held() == 0 and root.pool.held() == 1
            assert [row.get("tools") for row in root.status()] == [2, None]
            assert [row.get("tools") for row in host.status()] == [None, None]
            host.session("a")  # a stdio-like server keeps state: the host's own connection
            host.release()
            assert root.tools.names() == {"a": ["x", "both"]}  # a host's release keeps the root's listing
            root.release()
            assert root.tools.names() == {}
        finally:
            host.close()


def test_list_changed_drops_the_listing_and_tells_the_result_cache(peers: dict[str, ScriptedPeer]) -> None:
    told: list[str] = []
    heard = threading.Event()

    def on_list_changed(server: str, method: str) -> None:
        told.append(f"{server} {method}")
        heard.set()

    hooks = ClientHooks(on_list_changed=on_list_changed)
    with catalog_of(peers, hooks) as catalog:
        catalog.tools_of("a")
        peers["a"].send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        assert heard.wait(5)  # the caller's own hook runs after the catalog's
        assert told == ["a notifications/tools/list_changed"]  # named by the server that sent it
        assert catalog.tools_changed == {"a"} and catalog.tools.names() == {}
        catalog.tools_of("a")
        assert listings(peers["a"]) == 2


def test_warm_up_connects_the_servers_named_and_skips_unknown_ones(peers: dict[str, ScriptedPeer]) -> None:
    import time

    with catalog_of(peers) as catalog:
        catalog.pool.warm_up(["b", "nope"])
        deadline = time.monotonic() + 5
        while catalog.pool.held() < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert list(catalog.pool.sessions) == ["b"] and peers["a"].received == []


def test_a_server_still_connecting_when_the_command_ends_is_closed_not_left_running() -> None:
    """A warm-up connects in the background; a command may end first (a usage error found after
    it started). The connection it finishes then is closed, not left for nobody to stop."""
    import time

    from tests.mcp.scripted_peer import method_not_found

    asked, answer = threading.Event(), threading.Event()

    def slow_discover(peer: ScriptedPeer, message: dict[str, Any]) -> None:
        asked.set()
        answer.wait(10)
        method_not_found(peer, message)  # an initialize-era server: the client goes on to initialize

    class Peer(ScriptedPeer):
        closed = threading.Event()

        def close(self) -> None:  # MemoryTransport's close ends its endpoint
            self.closed.set()

    peer = Peer({"server/discover": slow_discover})
    catalog = catalog_of({"slow": peer})
    catalog.pool.warm_up()
    assert asked.wait(10)
    catalog.close()  # the command ends while the server is still connecting
    answer.set()
    assert peer.closed.wait(10)
    deadline = time.monotonic() + 5
    while any(t.name == "llmc-connect-slow" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert catalog.pool.sessions == {} and "slow" in catalog.pool.failed


def test_a_tool_is_found_by_name_in_the_listing_it_belongs_to(peers: dict[str, ScriptedPeer]) -> None:
    """find_tool looks a name up in an index of the server's listing (a batch asks for every
    line's tool): the first tool of a name, as a scan finds it; a new listing, a new index."""
    twice = {"a": lists("x", "both", "x")}
    with catalog_of(twice) as catalog:
        first = catalog.tools_of("a")[0]
        assert catalog.find_tool("a", "x") is first
        assert catalog.find_tool("a", "nope") is None
        with pytest.raises(UsageError, match="no tool named 'nope'"):
            catalog.require_tool("a", "nope")
        catalog.tools.forget("a")  # as tools/list_changed does
        again = catalog.find_tool("a", "x")
        assert again is not None and again is not first and again is catalog.tools_of("a")[0]
        assert listings(twice["a"]) == 2


def test_a_listing_goes_stale_when_its_ttl_runs_out() -> None:
    """2026-07-28 utilities/caching: a tools/list result is fresh for its ttlMs (absent or
    negative: 0, stale at once); an initialize-era listing stays until the server announces a
    change. ToolLists.expire() (what the gateway does before a host's listing) drops the stale
    ones, so the next listing asks those servers again; a call's lookup uses the listing held."""

    def modern(ttl: Any) -> ScriptedPeer:
        def tools_list(peer: ScriptedPeer, message: dict[str, Any]) -> None:
            page: dict[str, Any] = {"tools": [{"name": "x", "inputSchema": {"type": "object"}}], "resultType": "complete"}
            if ttl is not None:
                page["ttlMs"] = ttl
            peer.reply(message, page)

        return ScriptedPeer({"server/discover": modern_discover, "tools/list": tools_list})

    peers = {"day": modern(86_400_000), "zero": modern(0), "none": modern(None), "negative": modern(-5), "old": lists("x")}
    with catalog_of(peers) as catalog:
        for _ in range(2):
            catalog.list_tools()
            assert routing.find_tool(catalog, "zero", "x") is not None  # a lookup: the listing held
            catalog.tools.expire()
        assert {name: listings(peer) for name, peer in peers.items()} == {
            "day": 1,
            "zero": 2,
            "none": 2,
            "negative": 2,
            "old": 1,
        }
