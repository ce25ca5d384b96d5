"""The session keeper hears a 2026-07-28 server's tool list changes on a `subscriptions/listen`
stream it keeps open: a standing request (mcp/inflight.py), which leaves the server's session
idle, and a request made beside it (the keeper's own listing, a call) still reads its own reply
on its own thread (the caller-thread pump). In process: the keeper's Upstream before the real
SDK test server over stdio."""

from __future__ import annotations

from pathlib import Path

from llmc_cli.keeper.daemon import Keeper
from llmc_cli.model import ServerSpec
from tests.helpers import assert_call_pumps_beside_a_listen, sdk_server

WAIT = 60.0


def test_the_keepers_listen_leaves_its_server_idle_and_calls_pumping(isolated_dirs: Path) -> None:
    keeper = Keeper("standing", [ServerSpec(name="g", command=(*sdk_server("sdk_server.py"), "--growing"))], 60.0, None)
    upstream = keeper.upstreams["g"]
    upstream.open()
    session = upstream.session
    assert session is not None
    try:
        assert session.era == "modern" and upstream.heard  # its listen is open and acknowledged
        assert session._inflight.ids() == [upstream.listen_id]
        assert not session.busy()  # the listen is nobody's wait
        assert_call_pumps_beside_a_listen(session, WAIT)
    finally:
        session.close()
