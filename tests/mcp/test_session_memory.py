"""The ClientSession over the production MemoryTransport against a scripted peer (tests/mcp/
scripted_peer.py): deadlines that progress extends, late replies, input_required rounds,
server->client requests, an HTTP session the server forgot. In-process: no server to start."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from llmc_cli.errors import HttpSessionExpired, ProtocolError, RpcError, TimeoutExpired
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.hooks import ClientHooks
from llmc_cli.mcp.session import MAX_INPUT_ROUNDS, ClientSession
from llmc_cli.mcp.transports.memory import MemoryTransport
from tests.mcp.scripted_peer import ScriptedPeer, modern_discover

TEXT = {"content": [{"type": "text", "text": "done"}]}


def legacy(
    peer: ScriptedPeer, timeout: float = 5.0, hooks: ClientHooks | None = None, transport: MemoryTransport | None = None
) -> ClientSession:
    session = ClientSession(transport or MemoryTransport(peer), name="peer", timeout=timeout, hooks=hooks)
    session.initialize()
    return session


def modern(peer: ScriptedPeer, hooks: ClientHooks | None = None) -> ClientSession:
    session = ClientSession(MemoryTransport(peer), name="peer", timeout=5.0, hooks=hooks)
    session.discover()
    return session


def in_thread(work: Any) -> threading.Thread:
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


# -- deadlines ------------------------------------------------------------------------------------------


def test_progress_extends_the_deadline_of_a_slow_call() -> None:
    """Each progress notification restarts the request's timeout: a call that takes several
    timeouts in all, but is never silent for one, succeeds."""
    beats = threading.Event()

    def slow(peer: ScriptedPeer, msg: dict[str, Any]) -> None:
        def work() -> None:
            for done in range(8):  # 8 beats 0.15 s apart: twice the 0.6 s timeout in all
                beats.wait(0.15)
                peer.progress(msg, done)
            peer.reply(msg, TEXT)

        in_thread(work)

    progress: list[dict[str, Any]] = []
    with legacy(ScriptedPeer({"tools/call": slow}), timeout=0.6, hooks=ClientHooks(on_progress=progress.append)) as session:
        assert session.call_tool("slow", {}) == TEXT
    assert [p["progress"] for p in progress] == list(range(8))


def test_silence_times_out_cancels_and_a_late_reply_is_dropped() -> None:
    held: list[dict[str, Any]] = []
    peer = ScriptedPeer({"tools/call": lambda p, m: held.append(m)})  # never answers on its own
    with legacy(peer, timeout=0.3) as session:
        with pytest.raises(TimeoutExpired, match=r"no reply to tools/call within 0\.3s"):
            session.call_tool("silent", {})
        cancelled = peer.wait_for("notifications/cancelled")[0]["params"]
        assert cancelled == {"requestId": held[0]["id"], "reason": "timeout"}
        peer.reply(held[0], TEXT)  # the late reply: nobody waits for it any more
        peer.handlers["tools/call"] = lambda p, m: p.reply(m, {"content": [{"type": "text", "text": "next"}]})
        assert session.call_tool("next", {})["content"][0]["text"] == "next"  # the session goes on


def test_progress_cannot_extend_a_call_for_ever() -> None:
    stop = threading.Event()

    def chatty(peer: ScriptedPeer, msg: dict[str, Any]) -> None:
        def work() -> None:
            for done in range(400):  # bounded: far beyond the cap of 10 timeouts
                if stop.wait(0.05):
                    return
                peer.progress(msg, done)

        in_thread(work)

    peer = ScriptedPeer({"tools/call": chatty, "notifications/cancelled": lambda p, m: stop.set()})
    with legacy(peer, timeout=0.2) as session, pytest.raises(TimeoutExpired):
        session.call_tool("chatty", {})
    assert stop.is_set()  # the server was told


# -- input_required rounds (2026-07-28) ----------------------------------------------------------------


def test_input_required_rounds_carry_answers_and_request_state() -> None:
    def ask_twice(peer: ScriptedPeer, msg: dict[str, Any]) -> None:
        params = msg["params"]
        state = params.get("requestState")
        if state is None:
            peer.reply(
                msg,
                {
                    "resultType": "input_required",
                    "requestState": "round-1",
                    "inputRequests": {
                        "who": {"method": "elicitation/create", "params": {"message": "name?", "requestedSchema": {}}}
                    },
                },
            )
        elif state == "round-1":
            assert params["inputResponses"] == {"who": {"action": "accept", "content": {"name": "ada"}}}
            peer.reply(
                msg,
                {
                    "resultType": "input_required",
                    "requestState": "round-2",
                    "inputRequests": {"dirs": {"method": "roots/list", "params": {}}},
                },
            )
        else:
            assert "who" not in params["inputResponses"]  # answers of an earlier round are not sent again
            peer.reply(msg, {"content": [{"type": "text", "text": f"{state}: {params['inputResponses']['dirs']}"}]})

    hooks = ClientHooks(
        elicit=lambda params: {"action": "accept", "content": {"name": "ada"}}, roots=[{"uri": "file:///srv", "name": "srv"}]
    )
    with modern(ScriptedPeer({"server/discover": modern_discover, "tools/call": ask_twice}), hooks) as session:
        text = session.call_tool("greet", {})["content"][0]["text"]
    assert text == "round-2: {'roots': [{'uri': 'file:///srv', 'name': 'srv'}]}"


def test_a_server_that_always_wants_more_input_is_stopped() -> None:
    def forever(peer: ScriptedPeer, msg: dict[str, Any]) -> None:
        peer.reply(msg, {"resultType": "input_required", "inputRequests": {"p": {"method": "ping"}}})

    peer = ScriptedPeer({"server/discover": modern_discover, "tools/call": forever})
    with modern(peer) as session, pytest.raises(ProtocolError, match=f"still needs input after {MAX_INPUT_ROUNDS} rounds"):
        session.call_tool("loop", {})
    assert len(peer.calls("tools/call")) == MAX_INPUT_ROUNDS


# -- server->client requests (initialize era) -----------------------------------------------------------

# (method, params, hooks, the client's reply: ("result", value) or ("error", code))
SERVER_REQUESTS = [
    ("ping", {}, ClientHooks(), ("result", {})),
    ("roots/list", {}, ClientHooks(roots=[{"uri": "file:///a"}]), ("result", {"roots": [{"uri": "file:///a"}]})),
    ("elicitation/create", {"message": "ok?"}, ClientHooks(), ("result", {"action": "decline"})),
    (
        "elicitation/create",
        {"message": "ok?"},
        ClientHooks(elicit=lambda p: {"action": "accept", "content": {}}),
        ("result", {"action": "accept", "content": {}}),
    ),
    ("sampling/createMessage", {"messages": []}, ClientHooks(), ("error", -1)),
    (
        "sampling/createMessage",
        {"messages": []},
        ClientHooks(sample=lambda p: {"role": "assistant", "model": "m", "content": {"type": "text", "text": "hi"}}),
        ("result", {"role": "assistant", "model": "m", "content": {"type": "text", "text": "hi"}}),
    ),
    ("tools/list", {}, ClientHooks(), ("error", jsonrpc.METHOD_NOT_FOUND)),  # not a client method
    ("elicitation/create", {}, ClientHooks(elicit=lambda p: 1 / 0), ("error", jsonrpc.INTERNAL_ERROR)),  # a hook's bug
]


@pytest.mark.parametrize("method, params, hooks, expected", SERVER_REQUESTS)
def test_server_to_client_requests(method: str, params: dict[str, Any], hooks: ClientHooks, expected: tuple[str, Any]) -> None:
    """The server asks the client something in the middle of a call and answers the call with
    the client's reply (the peer never blocks its one worker: it continues when the reply comes)."""

    def call(peer: ScriptedPeer, msg: dict[str, Any]) -> None:
        peer.ask("s-1", method, params, then=lambda reply: peer.reply(msg, {"content": [], "structuredContent": reply}))

    with legacy(ScriptedPeer({"tools/call": call}), hooks=hooks) as session:
        reply = session.call_tool("ask-back", {})["structuredContent"]
    kind, value = expected
    assert reply["id"] == "s-1"
    if kind == "result":
        assert reply["result"] == value
    else:
        assert reply["error"]["code"] == value


# -- an HTTP session the server forgot -------------------------------------------------------------------


class ForgetfulTransport(MemoryTransport):
    """MemoryTransport that answers the next `forget` sends as an HTTP transport does when the
    server no longer knows its Mcp-Session-Id (404): HttpSessionExpired, the message not delivered."""

    def __init__(self, peer: ScriptedPeer) -> None:
        super().__init__(peer)
        self.forget = 0

    def send(self, message: dict[str, Any]) -> None:
        if self.forget and message.get("method") == "tools/call":
            self.forget -= 1
            raise HttpSessionExpired("the server does not know this session (404)")
        super().send(message)


def test_an_expired_session_is_initialized_again_once_and_the_user_is_told() -> None:
    notices: list[str] = []
    peer = ScriptedPeer({"tools/call": lambda p, m: p.reply(m, TEXT)})
    transport = ForgetfulTransport(peer)
    with legacy(peer, hooks=ClientHooks(on_notice=notices.append), transport=transport) as session:
        transport.forget = 1
        assert session.call_tool("after", {}) == TEXT
        assert len(peer.calls("initialize")) == 2 and len(peer.calls("tools/call")) == 1
        assert len(notices) == 1 and "state kept by the server" in notices[0]
        transport.forget = 1  # a second expiry in the same session: no loop of handshakes
        with pytest.raises(HttpSessionExpired):
            session.call_tool("again", {})
    assert len(peer.calls("initialize")) == 2


def test_an_error_reply_is_an_rpc_error_with_its_code() -> None:
    peer = ScriptedPeer({"tools/call": lambda p, m: p.error(m, -32602, "bad arguments", {"field": "x"})})
    with legacy(peer) as session, pytest.raises(RpcError) as caught:
        session.call_tool("bad", {})
    assert (caught.value.code, caught.value.data) == (-32602, {"field": "x"})


# -- replies no request awaits --------------------------------------------------------------------------


def test_a_reply_to_an_id_never_sent_fails_the_call_at_once() -> None:
    """A server that answers an id llmc never sent (a lie) fails the one request in flight with
    a protocol error naming it, not a timeout a minute later."""
    for wrong in (10_000, "req-1", True, 1.5):
        peer = ScriptedPeer({"tools/call": lambda p, m, wrong=wrong: p.send({"jsonrpc": "2.0", "id": wrong, "result": TEXT})})
        with legacy(peer, timeout=600) as session, pytest.raises(ProtocolError) as caught:
            session.call_tool("x", {})
        assert f"peer: answered request id {wrong!r}, which was never sent" in caught.value.message


def test_a_reply_a_peer_numbered_as_text_or_an_error_without_id_is_the_one_requests() -> None:
    """Tolerated as the request's own reply when one request is in flight: the id echoed as a
    string, and an error whose id is null (JSON-RPC: the request's id could not be read)."""
    echoed = ScriptedPeer({"tools/call": lambda p, m: p.send({"jsonrpc": "2.0", "id": str(m["id"]), "result": TEXT})})
    with legacy(echoed, timeout=600) as session:
        assert session.call_tool("x", {}) == TEXT
    unread = ScriptedPeer(
        {"tools/call": lambda p, m: p.send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})}
    )
    with legacy(unread, timeout=600) as session, pytest.raises(RpcError) as caught:
        session.call_tool("x", {})
    assert "Parse error" in caught.value.message and caught.value.code == -32700


def test_a_late_reply_is_still_dropped() -> None:
    """A reply to a request that timed out (an id sent before) is no lie: dropped, the next
    request unharmed."""
    late: list[dict[str, Any]] = []

    def call(peer: ScriptedPeer, msg: dict[str, Any]) -> None:
        if msg["params"]["name"] == "slow":
            late.append(msg)  # answered only during the next call
            return
        peer.send({"jsonrpc": "2.0", "id": late[0]["id"], "result": TEXT})
        peer.reply(msg, {"content": [{"type": "text", "text": "fast"}]})

    with legacy(ScriptedPeer({"tools/call": call}), timeout=0.3) as session:
        with pytest.raises(TimeoutExpired):
            session.call_tool("slow", {})
        assert session.call_tool("fast", {})["content"][0]["text"] == "fast"
