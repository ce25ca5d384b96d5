"""A name the gateway gave a host keeps reaching the same tool while the gateway runs, whatever
another host lists after it (`[serve] name_separator` "_" or "__": names are mapped, and a clash
moves one of the names). Hosts of different clearances see different sets of tools, so their
listings map names apart: a name given to one owner must never be given to another, or a
host's call reaches a tool it never chose. In process: the gateway's core (Toolbox,
GatewayConnection) before two real SDK servers (tests/peers/odd_names.py) over stdio."""

from __future__ import annotations

import json
import queue
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llmc_cli.config.profiles import load_profile
from llmc_cli.gateway.connection import GatewayConnection
from llmc_cli.gateway.toolbox import Toolbox
from tests.helpers import PEERS

META: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture
def toolbox(tmp_path: Path) -> Iterator[Toolbox]:
    """Under "_", a.b.c (made legal: `a_b_c`) and a_b.c (`a_b_c` as it is) want one name; a_b is
    confidential, above the default clearance (internal), so only some hosts see both."""
    odd = json.dumps(str(PEERS / "odd_names.py"))
    profile = tmp_path / "gw.toml"
    profile.write_text(
        f'[servers.a]\ncommand = {json.dumps(sys.executable)}\nargs = [{odd}, "b.c"]\nsandbox = "none"\n\n'
        f'[servers.a_b]\ncommand = {json.dumps(sys.executable)}\nargs = [{odd}, "c"]\nsandbox = "none"\n'
        'classification = "confidential"\n\n'
        '[policy.hints]\n"a.*" = { readOnly = true }\n"a_b.*" = { readOnly = true }\n\n'
        '[serve]\nname_separator = "_"\n'
    )
    box = Toolbox(load_profile(str(profile)))
    try:
        yield box
    finally:
        box.close()


def ask(box: Toolbox, clearance: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One 2026-07-28 request of a host of this clearance, on a fresh connection."""
    connection = GatewayConnection(box, transport="http")
    connection.clearance = clearance
    connection.inline_calls = True
    replies: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
    try:
        connection.handle({"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}, replies.put)
        return replies.get(timeout=60)
    finally:
        connection.close()


def names(box: Toolbox, clearance: str) -> list[str]:
    reply = ask(box, clearance, "tools/list", {})
    return sorted(t["name"] for t in reply["result"]["tools"])


def reached(box: Toolbox, clearance: str, name: str) -> str:
    """Which tool a call by this name ran (odd_names answers `TOOL: MESSAGE`), or the error."""
    reply = ask(box, clearance, "tools/call", {"name": name, "arguments": {"message": "hi"}})
    if "error" in reply:
        return f"error: {reply['error']['message']}"
    result = reply["result"]
    return f"{'isError: ' if result.get('isError') else ''}{result['content'][0]['text']}"


def test_a_name_given_keeps_its_tool_whatever_another_clearance_lists(toolbox: Toolbox) -> None:
    low = names(toolbox, "internal")
    assert low == ["a_b_c"]  # a.b.c, made legal; a_b is above this clearance
    high = names(toolbox, "confidential")
    assert len(high) == 2 and "a_b_c" in high
    (other,) = set(high) - {"a_b_c"}
    # the low host's name still reaches the tool it was listed for, not a_b.c (above its clearance)
    assert reached(toolbox, "internal", "a_b_c") == "b.c: hi"
    assert reached(toolbox, "confidential", "a_b_c") == "b.c: hi"
    assert reached(toolbox, "confidential", other) == "c: hi"
    # listed again by the low host: nothing moves for the high one
    assert names(toolbox, "internal") == low
    assert names(toolbox, "confidential") == high
    assert reached(toolbox, "confidential", other) == "c: hi"


def test_a_name_given_keeps_its_tool_when_the_high_host_lists_first(toolbox: Toolbox) -> None:
    high = names(toolbox, "confidential")
    assert "a_b_c" in high  # a_b.c keeps the name it wants; a.b.c moves
    (moved,) = set(high) - {"a_b_c"}
    assert reached(toolbox, "confidential", "a_b_c") == "c: hi"
    low = names(toolbox, "internal")
    assert low == [moved]  # a.b.c keeps the name it was given, though alone it would be a_b_c
    assert reached(toolbox, "internal", moved) == "b.c: hi"
    assert reached(toolbox, "confidential", "a_b_c") == "c: hi"  # not rerouted by the low host's listing
    assert reached(toolbox, "confidential", moved) == "b.c: hi"
