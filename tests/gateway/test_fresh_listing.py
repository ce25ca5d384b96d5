"""A host's tools/list shows what a 2026-07-28 upstream has now. Such an upstream announces a
changed list only on a subscriptions/listen stream of its own; its tools/list result says how
long it stays fresh (`ttlMs`; the SDK's default is 0, stale at once), and the gateway asks again
once that ran out, instead of serving its first listing for its whole life. In process: the
gateway's core (Toolbox, GatewayConnection) before the SDK test server over stdio (`--growing`:
`grow(name)` adds a tool)."""

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
from tests.gateway.test_name_stability import META
from tests.helpers import PEERS


@pytest.fixture
def toolbox(tmp_path: Path) -> Iterator[Toolbox]:
    profile = tmp_path / "gw.toml"
    profile.write_text(
        f"[servers.g]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(PEERS / 'sdk_server.py'))}, '--growing']\n\n"
        '[policy.hints."g.*"]\nreadOnly = true\n'
    )
    box = Toolbox(load_profile(str(profile)))
    try:
        yield box
    finally:
        box.close()


def ask(box: Toolbox, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One 2026-07-28 request on a fresh connection (as an HTTP request without a session gets)."""
    connection = GatewayConnection(box, transport="http")
    connection.inline_calls = True
    replies: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
    try:
        connection.handle({"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}, replies.put)
        reply = replies.get(timeout=60)
    finally:
        connection.close()
    assert "result" in reply, reply
    return dict(reply["result"])


def names(box: Toolbox) -> set[str]:
    return {tool["name"] for tool in ask(box, "tools/list", {})["tools"]}


@pytest.mark.usefixtures("isolated_dirs")
def test_a_host_lists_what_a_modern_upstream_has_now(toolbox: Toolbox) -> None:
    assert toolbox.catalog.session("g").era == "modern"
    before = names(toolbox)
    assert "g.grow" in before and "g.later" not in before
    grown = ask(toolbox, "tools/call", {"name": "g.grow", "arguments": {"name": "later"}})
    assert grown["content"][0]["text"].startswith("added later"), grown
    assert "g.later" in names(toolbox)  # its listing said ttlMs 0: asked again
    called = ask(toolbox, "tools/call", {"name": "g.later", "arguments": {"message": "hi"}})
    assert called["content"][0]["text"] == "later: hi", called
