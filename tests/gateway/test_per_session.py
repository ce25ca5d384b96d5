"""What a host connection works out once rather than for every request: the audit trail's host
identity of an initialize-era handshake, the conclusions of its clearance, its principal's rate
share, and the policy's denial of a tool by its name (services.calls.Conclusions.named). Each is
made again when what it was made of changes: a new handshake, another clearance or principal,
another policy. In process: the gateway's core (Toolbox, GatewayConnection) before the real SDK
test server over stdio, no socket."""

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
from tests.gateway.conftest import audit_records
from tests.gateway.test_conclusions import call
from tests.helpers import PEERS

SERVER = (
    f"[servers.sdk]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(PEERS / 'sdk_server.py'))}]\n"
    'sandbox = "none"  # confinement is tested in tests/sandbox\n'
)
PRINCIPALS = '\n[serve.principals.alice]\ntoken_env = "GW_ALICE"\ncalls_per_minute = 7\n'


def write(tmp_path: Path, name: str, deny: list[str], extra: str = "") -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'{SERVER}\n[policy]\ndeny = {json.dumps(deny)}\n\n[policy.hints."sdk.add"]\nreadOnly = true\n{extra}')
    return str(path)


@pytest.fixture
def toolbox(tmp_path: Path) -> Iterator[Toolbox]:
    box = Toolbox(load_profile(write(tmp_path, "gw", ["sdk.crash"], PRINCIPALS)))
    try:
        yield box
    finally:
        box.close()


def ask(connection: GatewayConnection, msg_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    replies: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
    connection.handle({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}, replies.put)
    return replies.get(timeout=60)


def handshake(connection: GatewayConnection, msg_id: int, name: str) -> None:
    info = {"name": name, "version": "1.0"}
    reply = ask(connection, msg_id, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": info})
    assert reply["result"]["protocolVersion"] == "2025-06-18", reply


def test_a_handshake_identity_is_made_once_and_again_after_a_new_handshake(toolbox: Toolbox, tmp_path: Path) -> None:
    connection = GatewayConnection(toolbox, transport="http")
    connection.inline_calls = True
    try:
        handshake(connection, 1, "first-host")
        assert connection.host_identity({}, None) is connection.host_identity({}, None)  # made once
        for n in range(2):
            assert "result" in ask(connection, 2 + n, "tools/call", {"name": "sdk.add", "arguments": {"a": n, "b": 1}})
        handshake(connection, 4, "second-host")  # a new handshake: a new identity
        assert connection.host_identity({}, None)["name"] == "second-host"
        assert "result" in ask(connection, 5, "tools/call", {"name": "sdk.add", "arguments": {"a": 9, "b": 1}})
    finally:
        connection.close()
    toolbox.audit.flush()
    decisions = [r for r in audit_records(tmp_path) if r["event"] == "decision"]
    assert [(r["client"]["name"], r["client"]["protocolVersion"], r["client"]["transport"]) for r in decisions] == [
        ("first-host", "2025-06-18", "http"),
        ("first-host", "2025-06-18", "http"),
        ("second-host", "2025-06-18", "http"),
    ]


def test_a_principal_or_clearance_of_its_own_gets_its_own_conclusions(toolbox: Toolbox) -> None:
    anyone = GatewayConnection(toolbox, transport="http")
    alice = GatewayConnection(toolbox, transport="http", principal="alice")
    try:
        assert anyone.rate_share is None and alice.rate_share == ("alice", 7)
        assert anyone.conclusions is toolbox.conclusions(anyone.clearance)
        assert alice.conclusions is toolbox.conclusions(alice.clearance)
        alice.clearance = "public"  # another clearance: that clearance's conclusions, not the first's
        assert alice.conclusions is toolbox.conclusions("public") is not anyone.conclusions
        assert call(toolbox, "sdk.add", {"a": 1, "b": 2}, clearance="public")["error"]["message"] == "Unknown tool: sdk.add"
        assert toolbox.conclusions("public").cleared_servers == {"sdk": False}
        assert anyone.conclusions.cleared_servers in ({}, {"sdk": True})  # untouched by the "public" call
        alice.principal = None
        assert alice.rate_share is None
    finally:
        anyone.close()
        alice.close()


def test_a_denial_by_name_is_judged_once_per_policy(toolbox: Toolbox, monkeypatch: pytest.MonkeyPatch) -> None:
    judged: list[str] = []
    real = rules._denial_by_name

    def counting(qualified: str, *args: Any) -> Any:
        judged.append(qualified)
        return real(qualified, *args)

    monkeypatch.setattr(rules, "_denial_by_name", counting)
    for _ in range(3):  # the route, the pipeline's run and authorize each ask, on every call
        assert "Unknown tool: sdk.crash" in call(toolbox, "sdk.crash", {})["error"]["message"]
        assert "result" in call(toolbox, "sdk.add", {"a": 1, "b": 2})
    assert sorted(judged) == ["sdk.add", "sdk.crash"]


def test_a_changed_policy_is_seen_by_the_next_call(toolbox: Toolbox, tmp_path: Path) -> None:
    """The conclusions hold only under the policy they were judged by: a profile loaded anew
    (its policy a new object) is judged afresh, both ways."""
    assert "result" in call(toolbox, "sdk.add", {"a": 1, "b": 2})
    toolbox.profile = load_profile(write(tmp_path, "gw", ["sdk.crash", "sdk.add"], PRINCIPALS))
    assert call(toolbox, "sdk.add", {"a": 1, "b": 2})["error"]["message"] == "Unknown tool: sdk.add"
    toolbox.profile = load_profile(write(tmp_path, "gw", [], PRINCIPALS))
    assert call(toolbox, "sdk.add", {"a": 1, "b": 2})["result"]["structuredContent"] == {"result": 3}


def test_made_up_names_do_not_keep_the_real_ones_out_of_the_denials_by_name(toolbox: Toolbox) -> None:
    """The denials by name are kept for at most 4,096 names, shared by every host of a clearance:
    5,000 made-up names (any host may send them) once filled it for good, and the real tools'
    names were then judged afresh on every call, whoever called."""
    connection = GatewayConnection(toolbox, transport="http")
    connection.inline_calls = True
    try:
        handshake(connection, 1, "name-spammer")
        for n in range(5000):
            reply = ask(connection, 2 + n, "tools/call", {"name": f"sdk.made_up_{n}", "arguments": {}})
            assert reply["error"]["message"] == f"Unknown tool: sdk.made_up_{n}"
        assert "result" in ask(connection, 9000, "tools/call", {"name": "sdk.add", "arguments": {"a": 1, "b": 2}})
        named = connection.conclusions.named
        assert "sdk.add" in named and len(named) <= 4096
    finally:
        connection.close()
