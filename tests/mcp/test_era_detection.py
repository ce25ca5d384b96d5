"""connect()'s era detection and its fallbacks, in-process: the production MemoryTransport (a
built-in server's path) against scripted peers, one row per kind of server. The HTTP transport
choices are tested against real servers in tests/transports/."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from llmc_cli.errors import ProtocolError
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.client import connect
from llmc_cli.mcp.stores import Stores
from llmc_cli.model import ServerSpec
from tests.mcp.scripted_peer import Handler, ScriptedPeer, method_not_found, modern_discover


class MemoryEraCache:
    def __init__(self, entries: dict[str, dict[str, Any]] | None = None) -> None:
        self.entries = dict(entries or {})

    def load(self) -> dict[str, dict[str, Any]]:
        return dict(self.entries)

    def save(self, changes: Mapping[str, dict[str, Any] | None]) -> None:
        for key, entry in changes.items():
            if entry is None:
                self.entries.pop(key, None)
            else:
                self.entries[key] = entry


SPEC = ServerSpec(name="peer", builtin="scripted", timeout=0.5, connect_timeout=0.5)


def open_session(peer: ScriptedPeer, cache: MemoryEraCache | None = None) -> Any:
    return connect(SPEC, stores=Stores(era_cache=cache), builtins={"scripted": lambda spec: peer})


def unsupported(*versions: str) -> Handler:
    return lambda peer, msg: peer.error(
        msg, jsonrpc.UNSUPPORTED_PROTOCOL_VERSION, "unsupported version", {"supported": list(versions), "requested": "2026-07-28"}
    )


def silent(peer: ScriptedPeer, msg: dict[str, Any]) -> None:
    """No answer at all (a legacy stdio server may ignore what it does not know)."""


def slow_modern() -> dict[str, Handler]:
    """A modern server that missed the first probe (still starting) and refuses the handshake."""
    probes: list[dict[str, Any]] = []

    def discover(peer: ScriptedPeer, msg: dict[str, Any]) -> None:
        probes.append(msg)
        if len(probes) > 1:
            modern_discover(peer, msg)

    return {"server/discover": discover, "initialize": unsupported("2026-07-28")}


# (what the server does, era and version connect() settles on, the methods it sent in order)
KINDS = [
    ({"server/discover": modern_discover}, ("modern", "2026-07-28"), ["server/discover"]),
    (
        {"server/discover": method_not_found},
        ("legacy", "2025-11-25"),
        ["server/discover", "initialize", "notifications/initialized"],
    ),
    (
        {"server/discover": lambda p, m: p.reply(m, {})},
        ("legacy", "2025-11-25"),  # answers loosely
        ["server/discover", "initialize", "notifications/initialized"],
    ),
    (
        {"server/discover": silent},
        ("legacy", "2025-11-25"),
        ["server/discover", "notifications/cancelled", "initialize", "notifications/initialized"],
    ),
    (
        {"server/discover": unsupported("2025-06-18", "2024-11-05")},
        ("legacy", "2025-06-18"),
        ["server/discover", "initialize", "notifications/initialized"],
    ),
    (slow_modern(), ("modern", "2026-07-28"), ["server/discover", "notifications/cancelled", "initialize", "server/discover"]),
]


@pytest.mark.parametrize("handlers, expected, sent", KINDS)
def test_era_detection(handlers: dict[str, Handler], expected: tuple[str, str], sent: list[str]) -> None:
    peer = ScriptedPeer(handlers)
    cache = MemoryEraCache()
    with open_session(peer, cache) as session:
        assert (session.era, session.protocol_version) == expected
    assert [m.get("method") for m in peer.received] == sent  # closed: every message has been handled
    assert [(e["era"], e["version"]) for e in cache.entries.values()] == [expected]  # remembered


@pytest.mark.parametrize(
    "era, version, sent",
    [
        ("legacy", "2025-11-25", ["initialize", "notifications/initialized"]),
        ("modern", "2026-07-28", []),  # no probe, no handshake
    ],
)
def test_a_remembered_era_skips_the_probe(era: str, version: str, sent: list[str]) -> None:
    peer = ScriptedPeer({"server/discover": modern_discover})
    cache = MemoryEraCache({SPEC.cache_key(): {"era": era, "version": version}})
    with open_session(peer, cache) as session:
        assert (session.era, session.protocol_version) == (era, version)
    assert [m.get("method") for m in peer.received] == sent


def test_no_common_version_is_a_protocol_error_naming_both_sides() -> None:
    peer = ScriptedPeer({"server/discover": unsupported("1999-01-01")})
    with pytest.raises(ProtocolError, match="no common MCP version: the server speaks 1999-01-01"):
        open_session(peer)
