"""What every host call of one clearance concludes alike (the policy's verdict on a tool, the
servers the clearance may use, the inspectors, the approval key) is concluded once per toolbox
and clearance (services.calls.Conclusions), not per call, and a new listing's tools are judged
afresh. In process: the gateway's core (Toolbox, GatewayConnection) before the real SDK test
server over stdio, no socket."""

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
from llmc_cli.policy import rules
from tests.helpers import PEERS

META: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture
def toolbox(tmp_path: Path) -> Iterator[Toolbox]:
    profile = tmp_path / "gw.toml"
    profile.write_text(
        f"[servers.sdk]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(PEERS / 'sdk_server.py'))}]\n\n"
        '[policy]\ndeny = ["sdk.crash"]\n\n[policy.hints."sdk.add"]\nreadOnly = true\n'
    )
    box = Toolbox(load_profile(str(profile)))
    try:
        yield box
    finally:
        box.close()


def call(box: Toolbox, name: str, arguments: dict[str, Any], clearance: str | None = None) -> dict[str, Any]:
    """One 2026-07-28 tools/call on a fresh connection (as an HTTP request without a session gets)."""
    connection = GatewayConnection(box, transport="http")
    if clearance is not None:
        connection.clearance = clearance
    connection.inline_calls = True
    replies: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
    try:
        connection.handle(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments, "_meta": META}},
            replies.put,
        )
        return replies.get(timeout=60)
    finally:
        connection.close()


@pytest.fixture
def verdicts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tools the policy judged afresh (rules._verdict), in order."""
    judged: list[str] = []
    real = rules._verdict

    def counting(qualified: str, *args: Any) -> Any:
        judged.append(qualified)
        return real(qualified, *args)

    monkeypatch.setattr(rules, "_verdict", counting)
    return judged


def test_host_calls_of_a_clearance_share_what_they_conclude(toolbox: Toolbox, verdicts: list[str]) -> None:
    for a in range(3):  # three hosts' calls, each on its own connection
        reply = call(toolbox, "sdk.add", {"a": a, "b": 1})
        assert reply["result"]["structuredContent"] == {"result": a + 1}, reply
    assert verdicts == ["sdk.add"]  # judged once, not per call
    shared = toolbox.conclusions(toolbox.clearance_of(None))
    assert shared.approval_key and shared.inspectors and shared.cleared_servers == {"sdk": True}
    # a denied tool stays denied (hidden: unknown to hosts), whoever asks and however often
    for _ in range(2):
        denied = call(toolbox, "sdk.crash", {})
        assert "Unknown tool: sdk.crash" in denied["error"]["message"], denied
    assert verdicts == ["sdk.add"]  # denied by its name: refused before any verdict, its server not asked


def test_a_new_listing_is_judged_afresh(toolbox: Toolbox, verdicts: list[str]) -> None:
    assert "result" in call(toolbox, "sdk.add", {"a": 1, "b": 2})
    toolbox.catalog.tools.forget("sdk")  # what the server's tools/list_changed does: its next listing is new
    assert "result" in call(toolbox, "sdk.add", {"a": 1, "b": 2})
    assert verdicts == ["sdk.add", "sdk.add"]


def test_another_clearance_concludes_on_its_own(toolbox: Toolbox) -> None:
    mine, other = toolbox.clearance_of(None), "public"
    assert toolbox.conclusions(mine) is toolbox.conclusions(mine)
    assert toolbox.conclusions(other) is not toolbox.conclusions(mine)
    # sdk is above "public": answered as a tool that does not exist, concluded under "public"
    assert call(toolbox, "sdk.add", {"a": 1, "b": 2}, clearance=other)["error"]["message"] == "Unknown tool: sdk.add"
    assert toolbox.conclusions(other).cleared_for == "public"
    assert toolbox.conclusions(mine).cleared_for is None  # nothing of this clearance was called yet


def test_a_host_call_looks_its_tool_up_once(toolbox: Toolbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gateway finds the tool to route the call; the pipeline (resolve, authorize) uses
    that Tool, and asks the catalog again only for a request that brings none."""
    from llmc_cli.catalog import routing

    call(toolbox, "sdk.add", {"a": 0, "b": 0})  # the tool list is known
    looked: list[tuple[str, str]] = []
    real = routing.find_tool

    def counting(catalog: Any, server: str, tool: str) -> Any:
        looked.append((server, tool))
        return real(catalog, server, tool)

    monkeypatch.setattr(routing, "find_tool", counting)
    reply = call(toolbox, "sdk.add", {"a": 2, "b": 3})
    assert reply["result"]["structuredContent"] == {"result": 5}, reply
    assert looked == [("sdk", "add")]  # once (three times before: route, resolve, authorize)
    from llmc_cli import services
    from llmc_cli.model import ToolCall

    pipeline = services.host_calls(
        toolbox.catalog, toolbox.profile, toolbox.state, audit=toolbox.audit, masker=toolbox.masker, client=None
    )
    looked.clear()
    outcome = pipeline.run(services.ToolRequest.of(ToolCall("sdk", "add", {"a": 1, "b": 1})))
    assert outcome.tool_result.to_json()["structuredContent"] == {"result": 2}
    assert looked == [("sdk", "add")]  # a request without its Tool: found once, by resolve
