"""An upstream's list change reaches only the hosts that may see that server through that
connection: none above its clearance, none of another principal's process (principals kept
apart), none of a server the policy denies as a whole; a change on the shared connections
reaches every other host. In process: the gateway's core (Toolbox, GatewayConnection) before
the real SDK counting server (tests/peers/counting_server.py: `announce` sends
notifications/tools/list_changed) over stdio, each host listening with a 2026-07-28
`subscriptions/listen`. The upstreams speak the initialize era (remembered so in servers.json):
one of 2026-07-28 sends list changes only on a listen stream of its own.

A server's notification is handled on its reader thread before the reply that follows it on the
same stream, so once a call of `announce` has returned, every host that will hear it has."""

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

CHANGED = "notifications/tools/list_changed"


def server(name: str, count_file: Path, extra: str = "") -> str:
    return (
        f"[servers.{name}]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(PEERS / 'counting_server.py'))}]\n"
        f"env = {{ COUNT_FILE = {json.dumps(str(count_file))} }}\n{extra}\n"
    )


@pytest.fixture
def toolbox(tmp_path: Path, isolated_dirs: Path) -> Iterator[Toolbox]:
    profile = tmp_path / "gw.toml"
    count = tmp_path / "count"
    profile.write_text(
        server("crm", count, 'classification = "confidential"')
        + server("lib", count)
        + server("off", count)
        + '[policy]\ndeny = ["off.*"]\n'
    )
    first = Toolbox(load_profile(str(profile)))  # connects, and remembers each server's era
    try:
        for name in ("crm", "lib", "off"):
            first.catalog.session(name)
    finally:
        first.close()
    eras = isolated_dirs / "state" / "servers.json"
    remembered = json.loads(eras.read_text())
    eras.write_text(json.dumps({k: {**v, "era": "legacy", "version": "2025-11-25"} for k, v in remembered.items()}))
    box = Toolbox(load_profile(str(profile)))
    try:
        yield box
    finally:
        box.close()


class Listener:
    """A host connection listening for tool list changes; what it heard so far."""

    def __init__(self, box: Toolbox, clearance: str, *, own_upstreams: bool = False) -> None:
        self.upstreams = box.host_upstreams() if own_upstreams else None
        self.connection = GatewayConnection(box, transport="http", upstreams=self.upstreams)
        self.connection.clearance = clearance
        self.connection.inline_calls = True
        self.sent: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        params = {"notifications": {"toolsListChanged": True}, "_meta": META}
        self.connection.handle({"jsonrpc": "2.0", "id": "L", "method": "subscriptions/listen", "params": params}, self.sent.put)
        acknowledged = self.sent.get(timeout=60)
        assert acknowledged.get("method") == "notifications/subscriptions/acknowledged", acknowledged

    def call(self, name: str) -> None:
        replies: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        params = {"name": name, "arguments": {}, "_meta": META}
        self.connection.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, replies.put)
        reply = replies.get(timeout=60)
        assert reply["result"]["content"][0]["text"].startswith("announced"), reply

    def heard(self) -> int:
        """How many tool list changes reached it (a listen's other messages are not counted)."""
        count = 0
        while True:
            try:
                message = self.sent.get_nowait()
            except queue.Empty:
                return count
            count += message.get("method") == CHANGED

    def close(self) -> None:
        self.connection.close()
        if self.upstreams is not None:
            self.upstreams.close()


def test_a_servers_list_change_does_not_reach_hosts_below_its_clearance(toolbox: Toolbox) -> None:
    low, high = Listener(toolbox, "internal"), Listener(toolbox, "confidential")
    try:
        high.call("crm.announce")  # on the shared connection: crm is above low's clearance
        assert (low.heard(), high.heard()) == (0, 1)
        low.call("lib.announce")  # a server both may see
        assert (low.heard(), high.heard()) == (1, 1)
    finally:
        low.close()
        high.close()


def test_one_principals_upstream_process_does_not_signal_anothers_hosts(toolbox: Toolbox) -> None:
    alice, bob = Listener(toolbox, "confidential", own_upstreams=True), Listener(toolbox, "confidential", own_upstreams=True)
    shared = Listener(toolbox, "confidential")
    try:
        alice.call("lib.announce")  # alice's own lib process: nobody else's listing moved
        assert (alice.heard(), bob.heard(), shared.heard()) == (1, 0, 0)
        shared.call("lib.announce")  # the shared connection: what every host's listing is made of
        assert (alice.heard(), bob.heard(), shared.heard()) == (1, 1, 1)
    finally:
        for listener in (alice, bob, shared):
            listener.close()


def test_a_server_denied_as_a_whole_signals_nobody(toolbox: Toolbox) -> None:
    host = Listener(toolbox, "confidential")
    try:
        # the policy denies its every tool, so no host may call announce: its connection is made
        # by hand, as an upstream that announces on its own would
        toolbox.catalog.session("off").call_tool("announce", {})
        assert host.heard() == 0
    finally:
        host.close()
