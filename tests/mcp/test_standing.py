"""A standing request (a 2026-07-28 `subscriptions/listen` stream, open for the connection's life)
is matched like any request, but it is nobody's wait (mcp/inflight.py): it does not make the
session busy, it is not "the one request in flight" an odd reply is attributed to, and it is
cancelled when the session closes (basic/patterns/subscriptions.mdx, Cancellation: on stdio,
notifications/cancelled naming its id). In process, before a scripted peer."""

from __future__ import annotations

import threading
from typing import Any

from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.hooks import ClientHooks
from llmc_cli.mcp.session import ClientSession
from llmc_cli.mcp.transports.memory import MemoryTransport
from tests.mcp.scripted_peer import WAIT, ScriptedPeer, modern_discover

SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"


def acknowledge(peer: ScriptedPeer, message: dict[str, Any]) -> None:
    """A listen is acknowledged and stays open (no reply until it ends)."""
    peer.send(
        jsonrpc.notification(
            "notifications/subscriptions/acknowledged",
            {"_meta": {SUBSCRIPTION: message["id"]}, "notifications": message["params"]["notifications"]},
        )
    )


def listening(peer: ScriptedPeer, hooks: ClientHooks | None = None) -> tuple[ClientSession, int]:
    session = ClientSession(MemoryTransport(peer), name="up", timeout=WAIT, hooks=hooks)
    session.discover()
    listen = jsonrpc.request(
        0, "subscriptions/listen", {"_meta": session.modern_meta(), "notifications": {"toolsListChanged": True}}
    )
    listen_id, _future = session.forward(listen, standing=True)
    peer.wait_for("subscriptions/listen")
    return session, listen_id


def test_an_odd_reply_beside_an_open_listen_is_still_the_sole_calls() -> None:
    """A reply whose id comes back as a string ("7" for 7) is the one awaited request's: the
    open listen does not make the call one of several (whose odd replies are dropped)."""

    def call(peer: ScriptedPeer, message: dict[str, Any]) -> None:
        peer.send({"jsonrpc": "2.0", "id": str(message["id"]), "result": {"content": [{"type": "text", "text": "ok"}]}})

    peer = ScriptedPeer({"server/discover": modern_discover, "subscriptions/listen": acknowledge, "tools/call": call})
    session, _listen_id = listening(peer)
    try:
        assert session.call_tool("echo", {}, timeout=WAIT)["content"][0]["text"] == "ok"
    finally:
        session.close()


def test_a_listen_alone_is_no_wait_and_ends_with_the_session() -> None:
    changed = threading.Event()
    peer = ScriptedPeer({"server/discover": modern_discover, "subscriptions/listen": acknowledge})
    session, listen_id = listening(peer, ClientHooks(on_list_changed=lambda _server, _method: changed.set()))
    assert not session.busy()
    assert session._inflight.ids() == [listen_id] and not session._inflight.alone()
    # what arrives on it reaches the hooks, as any notification does
    peer.send(jsonrpc.notification("notifications/tools/list_changed", {"_meta": {SUBSCRIPTION: listen_id}}))
    assert changed.wait(WAIT)
    session.close()
    cancelled = peer.wait_for("notifications/cancelled")
    assert cancelled[0]["params"]["requestId"] == listen_id
    assert session._inflight.ids() == []


def test_a_listen_the_server_ends_is_no_longer_in_flight() -> None:
    """Graceful closure: the server's `complete` result ends the stream; the session forgets it."""
    peer = ScriptedPeer({"server/discover": modern_discover, "subscriptions/listen": acknowledge})
    session, listen_id = listening(peer)
    try:
        future = next(iter(session._inflight._futures.values()))
        peer.send(jsonrpc.result(listen_id, {"resultType": "complete", "_meta": {SUBSCRIPTION: listen_id}}))
        assert future.result(WAIT)["result"]["resultType"] == "complete"
        assert session._inflight.ids() == [] and not session.busy()
    finally:
        session.close()
