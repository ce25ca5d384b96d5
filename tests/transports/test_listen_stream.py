"""A 2026-07-28 `subscriptions/listen` stream over Streamable HTTP (basic/patterns/subscriptions.mdx)
against the official `mcp` SDK's server: it is quiet until something changes, so no read timeout
ends it (the idle timeout bounds the replies of calls, not this stream); it is posted on a thread
of its own even where calls post on their caller's thread (which would never get it back); and
when it ends without a reply, only it ends, not the connection."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.hooks import ClientHooks
from llmc_cli.mcp.session import ClientSession
from llmc_cli.mcp.transports.streamable_http import StreamableHttpTransport
from tests.transports.conftest import sdk

WAIT = 60.0
IDLE = 0.5  # the transport's idle timeout: a read of a call's reply stream waits no longer


@pytest.fixture(scope="module")
def growing() -> Iterator[str]:
    for base in sdk("streamable-http", "--growing"):
        yield base + "/mcp"


def test_a_listen_stream_outlives_the_idle_timeout_and_hears_a_change(growing: str) -> None:
    changed, acknowledged = threading.Event(), threading.Event()
    hooks = ClientHooks(on_list_changed=lambda _server, _method: changed.set(), on_acknowledged=lambda _p: acknowledged.set())
    transport = StreamableHttpTransport(growing, timeout=WAIT, idle_timeout=IDLE)
    transport.posts_on_caller_thread = True  # as the gateway's: calls post on their own thread
    session = ClientSession(transport, name="g", timeout=WAIT, hooks=hooks)
    try:
        session.discover()
        listen = jsonrpc.request(
            0, "subscriptions/listen", {"_meta": session.modern_meta(), "notifications": {"toolsListChanged": True}}
        )
        _listen_id, future = session.forward(listen, standing=True)  # returns: not posted on this thread
        assert acknowledged.wait(WAIT)
        time.sleep(IDLE * 4)  # quiet for longer than any read of a reply may wait
        assert not future.done() and session.closed_error is None
        assert session.call_tool("grow", {"name": "fresh"})["content"][0]["text"] == "added fresh"
        assert changed.wait(WAIT), "the listen stream ended while quiet"
        assert not future.done() and not session.busy()
    finally:
        session.close()
    assert future.done()  # ended with the session
