"""A 2026-07-28 upstream announces its list changes only on a `subscriptions/listen` stream its
client opens (basic/patterns/subscriptions.mdx): the gateway opens one on each connection to such
an upstream, so its hosts hear of changes as they do from an initialize-era upstream. The stream
is a standing request (mcp/inflight.py): a call made while it is open still reads its own reply
on its own thread, and a connection with only the stream open is idle (the gateway reclaims it).

In process: the gateway's core (Toolbox, GatewayConnection, Upstreams) before the real SDK test
server (tests/peers/sdk_server.py --growing: `grow` adds a tool and announces it) over stdio,
which speaks 2026-07-28 to llmc."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from llmc_cli.config.profiles import load_profile
from llmc_cli.gateway.connection import GatewayConnection
from llmc_cli.gateway.principals import Principal
from llmc_cli.gateway.toolbox import Toolbox
from llmc_cli.gateway.upstreams import Upstreams
from llmc_cli.mcp.session import ClientSession
from tests.gateway.test_name_stability import META
from tests.helpers import assert_call_pumps_beside_a_listen, sdk_server

CHANGED = "notifications/tools/list_changed"
WAIT = 60.0  # seconds for anything to arrive on a loaded machine (the tests never wait that long when it works)


def growing(extra: str = "") -> str:
    python, script = sdk_server("sdk_server.py")
    return (
        f'[servers.g]\ncommand = {json.dumps(python)}\nargs = [{json.dumps(script)}, "--growing"]\n'
        f'sandbox = "none"\n{extra}\n[policy.hints."g.*"]\nreadOnly = true\n'
    )


def acknowledged_box(profile: Path) -> tuple[Toolbox, threading.Event]:
    """A toolbox whose upstream connections report the acknowledgment of their listen streams."""
    box = Toolbox(load_profile(str(profile)))
    heard = threading.Event()
    options = box.catalog.pool.options
    assert options.hooks is not None
    box.catalog.pool.options = options._replace(hooks=replace(options.hooks, on_acknowledged=lambda _params: heard.set()))
    return box, heard


@pytest.fixture
def toolbox(tmp_path: Path, isolated_dirs: Path) -> Iterator[tuple[Toolbox, threading.Event]]:
    profile = tmp_path / "gw.toml"
    profile.write_text(growing())
    box, heard = acknowledged_box(profile)
    try:
        yield box, heard
    finally:
        box.close()


def upstream(box: Toolbox) -> ClientSession:
    session = box.catalog.session("g")
    assert session.era == "modern" and session.protocol_version == "2026-07-28"
    return session


def test_a_host_hears_a_modern_upstreams_tool_list_change(toolbox: tuple[Toolbox, threading.Event]) -> None:
    box, acknowledged = toolbox
    host = GatewayConnection(box, transport="http")
    host.inline_calls = True
    sent: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
    try:
        listen = {"notifications": {"toolsListChanged": True}, "_meta": META}
        host.handle({"jsonrpc": "2.0", "id": "L", "method": "subscriptions/listen", "params": listen}, sent.put)
        assert sent.get(timeout=WAIT)["method"] == "notifications/subscriptions/acknowledged"
        upstream(box)
        assert acknowledged.wait(WAIT), "the gateway opened no listen stream to its 2026-07-28 upstream"
        replies: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        call = {"name": "g.grow", "arguments": {"name": "fresh"}, "_meta": META}
        host.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}, replies.put)
        assert replies.get(timeout=WAIT)["result"]["content"][0]["text"] == "added fresh"
        heard = sent.get(timeout=WAIT)  # the change comes on the upstream's stream, apart from the reply
        assert heard == {
            "jsonrpc": "2.0",
            "method": CHANGED,
            "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": "L"}},
        }
        # and the gateway's own listing moved with it: the host sees the new tool
        host.handle({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": META}}, replies.put)
        names = [tool["name"] for tool in replies.get(timeout=WAIT)["result"]["tools"]]
        assert "g.fresh" in names
    finally:
        host.close()


def test_a_call_beside_the_open_listen_reads_its_own_reply(toolbox: tuple[Toolbox, threading.Event]) -> None:
    """The caller-thread pump: with only the listen stream open beside it, a call is the one
    request awaited, so its thread reads the server's messages itself (the progress of `slow`
    reaches the hooks on the caller's thread, not on the reader thread)."""
    box, acknowledged = toolbox
    session = upstream(box)
    assert acknowledged.wait(WAIT)
    assert len(session._inflight.ids()) == 1 and not session.busy()  # the listen: open, and no wait
    assert_call_pumps_beside_a_listen(session, WAIT)


def test_the_idle_reclaim_releases_a_connection_with_its_listen_open(tmp_path: Path, isolated_dirs: Path) -> None:
    profile = tmp_path / "gw.toml"
    profile.write_text(growing() + '[serve]\nupstream_idle_timeout = 0.001\n[serve.principals.alice]\ntoken_env = "GW_ALICE"\n')
    box, acknowledged = acknowledged_box(profile)
    try:
        upstreams = Upstreams(box, list)
        alice = Principal("alice", "0" * 64, None)
        connection = upstreams.stateless_connection(alice)
        session = connection.upstreams.session("g")  # alice's own connection
        assert session is not box.catalog.session("g")
        assert acknowledged.wait(WAIT)
        deadline = time.monotonic() + WAIT
        assert session._inflight.ids() and not connection.upstreams.pool.busy()  # its listen is open
        while connection.upstreams.pool.held() and time.monotonic() < deadline:
            time.sleep(0.01)  # past the idle timeout, then reaped
            upstreams.reap(set())
        assert connection.upstreams.pool.held() == 0
        assert session._inflight.ids() == []  # closed, its listen with it
        again = connection.upstreams.session("g")  # the next use connects again, and listens again
        assert again is not session and again._inflight.ids() and not again.busy()
    finally:
        box.close()


def test_a_host_hears_an_update_of_a_resource_it_watches_on_a_modern_upstream(toolbox: tuple[Toolbox, threading.Event]) -> None:
    """The gateway watches the resource upstream (a new listen stream, its filter naming the URI)
    while a host watches it, and the update reaches that host only."""
    box, acknowledged = toolbox
    upstream(box)
    assert acknowledged.wait(WAIT)
    watcher, other = GatewayConnection(box, transport="http"), GatewayConnection(box, transport="http")
    watcher.inline_calls = other.inline_calls = True
    heard: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
    quiet: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
    try:
        watch = {"notifications": {"resourceSubscriptions": ["g.test://greeting"]}, "_meta": META}
        watcher.handle({"jsonrpc": "2.0", "id": "W", "method": "subscriptions/listen", "params": watch}, heard.put)
        ack = heard.get(timeout=WAIT)
        assert ack["params"]["notifications"] == {
            "resourceSubscriptions": ["g.test://greeting"]
        }  # what exists, and is watched upstream
        lists = {"notifications": {"toolsListChanged": True}, "_meta": META}
        other.handle({"jsonrpc": "2.0", "id": "O", "method": "subscriptions/listen", "params": lists}, quiet.put)
        assert quiet.get(timeout=WAIT)["method"] == "notifications/subscriptions/acknowledged"
        replies: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        call = {"name": "g.touch", "arguments": {"uri": "test://greeting"}, "_meta": META}
        other.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}, replies.put)
        assert replies.get(timeout=WAIT)["result"]["content"][0]["text"] == "touched test://greeting"
        updated = heard.get(timeout=WAIT)
        assert updated == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": "g.test://greeting", "_meta": {"io.modelcontextprotocol/subscriptionId": "W"}},
        }
        assert quiet.empty()  # it watches no resource
        # the host stops watching: the gateway's stream no longer names the URI
        watcher.handle({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "W"}}, heard.put)
        other.handle({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}, replies.put)
        assert replies.get(timeout=WAIT)["result"]["content"][0]["text"] == "touched test://greeting"
        assert box.subscribers._watched("g", upstream(box)) == []
    finally:
        watcher.close()
        other.close()
