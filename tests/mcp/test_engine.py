"""The protocol engine as a unit: the request matcher (mcp/inflight.py) and the router of a relaying
client session (mcp/router.py), in-process, over the memory transport where a session is needed.
What the integration tests cannot make happen on demand: a reply for an unknown id, a late reply
after cancellation, progress for a finished call, two callers' replies interleaved, a server's
request while two callers' requests are in flight."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import pytest

from llmc_cli.errors import ConnectionFailed, ProtocolError, TimeoutExpired
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.hooks import RELATED_TOKENS, ClientHooks
from llmc_cli.mcp.inflight import InFlight
from llmc_cli.mcp.router import Router
from llmc_cli.mcp.server import McpServer
from llmc_cli.mcp.session import ClientSession
from llmc_cli.mcp.transports.memory import MemoryTransport
from llmc_cli.model import MAX_MESSAGE_DEPTH
from tests.mcp.scripted_peer import WAIT, ScriptedPeer

# -- the matcher -----------------------------------------------------------------------------------------


def test_a_reply_for_an_unknown_id_is_dropped_and_the_waiter_keeps_waiting() -> None:
    inflight = InFlight()
    future = inflight.open(1)
    inflight.resolve(jsonrpc.result(2, {}))
    inflight.resolve({"jsonrpc": "2.0", "result": {}})  # no id at all
    assert not future.done()
    inflight.resolve(jsonrpc.result(1, {"ok": True}))
    assert future.result(0)["result"] == {"ok": True}


def test_a_late_reply_after_close_reaches_nobody() -> None:
    inflight = InFlight()
    future = inflight.open(7, token="mine")
    inflight.close(7)  # cancelled: the caller stopped waiting
    inflight.resolve(jsonrpc.result(7, {}))
    assert not future.done()
    assert inflight.ids() == [] and inflight.by_token("mine") == (None, None) and inflight.owners(None) == ()


def test_two_callers_get_their_own_replies_when_they_arrive_interleaved() -> None:
    inflight = InFlight()
    got: dict[str, Any] = {}
    opened = threading.Barrier(3)

    def caller(request_id: str) -> None:
        future = inflight.open(request_id)
        opened.wait(WAIT)
        got[request_id] = inflight.wait(request_id, future, WAIT)["result"]

    threads = [threading.Thread(target=caller, args=(rid,)) for rid in ("a", "b")]
    for thread in threads:
        thread.start()
    opened.wait(WAIT)
    inflight.resolve(jsonrpc.result("b", {"for": "b"}))
    inflight.resolve(jsonrpc.result("a", {"for": "a"}))
    for thread in threads:
        thread.join(WAIT)
    assert got == {"a": {"for": "a"}, "b": {"for": "b"}}


def test_exchange_times_out_and_forgets_the_request() -> None:
    inflight = InFlight()
    sent: list[str] = []
    with pytest.raises(TimeoutError):
        inflight.exchange("ask-1", lambda: sent.append("ask-1"), 0.01)
    assert sent == ["ask-1"] and inflight.ids() == []
    inflight.resolve(jsonrpc.result("ask-1", {}))  # late: dropped, nothing raises


def test_the_end_of_the_connection_fails_every_waiter() -> None:
    inflight = InFlight()
    futures = [inflight.open(i) for i in (1, 2)]
    inflight.fail_all(ConnectionFailed("gone"))
    for future in futures:
        with pytest.raises(ConnectionFailed):
            future.result(0)


# -- the router ------------------------------------------------------------------------------------------


def related(router: Router[tuple[str, int]], *tokens: Any) -> tuple[tuple[str, int] | None, int]:
    reset = RELATED_TOKENS.set(tokens)
    try:
        route, routes = router.related()
        return route, len(routes)
    finally:
        RELATED_TOKENS.reset(reset)


def test_a_message_reaches_a_caller_only_when_every_request_it_may_belong_to_is_that_callers() -> None:
    router: Router[tuple[str, int]] = Router("t", lambda route: route[0])
    a1, a2, b1 = router.open(("a", 1)), router.open(("a", 2)), router.open(("b", 1))
    assert related(router, a1) == (("a", 1), 1)
    assert related(router, a1, a2) == (("a", 1), 2)  # untied, but all one caller's
    assert related(router, a1, b1) == (None, 2)  # may be another caller's: nobody's
    assert related(router, a1, None) == (None, 2)  # or a request relayed for nobody
    assert related(router) == (None, 0)
    assert related(router, "t-unknown", 5, ["unhashable"]) == (None, 3)


def test_progress_for_a_finished_call_reaches_nobody() -> None:
    router: Router[str] = Router("t", lambda route: route)
    with router.routing("host") as token:
        assert token.startswith("t-") and router.by_token(token) == "host"
    assert router.by_token(token) is None and related(router, token) == (None, 1)
    assert router.routes() == []


def test_tokens_are_not_guessable_from_each_other() -> None:
    """Tokens come from a keyed hash of a counter (no system call per token): never repeated,
    16 URL-safe characters after the prefix, and another router (another key) makes others."""
    router: Router[str] = Router("t", lambda route: route)
    tokens = [router.open("x") for _ in range(2000)]
    assert len(set(tokens)) == 2000
    assert all(re.fullmatch(r"t-[A-Za-z0-9_-]{16}", token) for token in tokens)
    assert not set(tokens) & {Router("t", lambda route: route).open("x") for _ in range(2000)}


# -- a relaying session: forwarded requests tie the server's requests to their caller ---------------------


def test_a_servers_request_on_an_untied_connection_is_routed_by_the_requests_in_flight() -> None:
    """Over stdio (here the memory transport) a server's request names no request: it may belong
    to any in flight. With one caller's request in flight it is that caller's; with two callers'
    it is nobody's."""
    router: Router[str] = Router("relay", lambda caller: caller)
    asked = threading.Semaphore(0)
    answer: dict[str, threading.Event] = {}
    seen: list[str | None] = []

    def call(peer: ScriptedPeer, msg: dict[str, Any]) -> None:
        token = msg["params"]["_meta"]["progressToken"]
        answer[token] = threading.Event()
        peer.ask(f"ask-{token}", "elicitation/create", {"message": "?", "requestedSchema": {}}, lambda reply: answer[token].set())
        asked.release()

    def elicit(params: dict[str, Any]) -> dict[str, Any]:
        seen.append(router.related()[0])
        return {"action": "decline"}

    session = ClientSession(MemoryTransport(ScriptedPeer({"tools/call": call})), name="up", hooks=ClientHooks(elicit=elicit))
    session.initialize()
    try:
        first = router.open("alice")
        _, alice = session.forward(jsonrpc.request(1, "tools/call", {"name": "t", "_meta": {"progressToken": first}}))
        assert asked.acquire(timeout=WAIT) and answer[first].wait(WAIT)
        second = router.open("bob")
        session.forward(jsonrpc.request(1, "tools/call", {"name": "t", "_meta": {"progressToken": second}}))
        assert asked.acquire(timeout=WAIT) and answer[second].wait(WAIT)
        assert seen == ["alice", None]
        assert not alice.done()
    finally:
        session.close()


def test_a_withdrawn_relayed_request_is_cancelled_upstream_and_its_late_reply_reaches_nobody() -> None:
    held: list[dict[str, Any]] = []
    peer = ScriptedPeer({"tools/call": lambda peer, msg: held.append(msg), "ping": lambda peer, msg: peer.reply(msg, {})})
    session = ClientSession(MemoryTransport(peer), name="up")
    session.initialize()
    try:
        upstream_id, future = session.forward(jsonrpc.request(9, "tools/call", {"name": "t"}))
        peer.wait_for("tools/call")
        session.withdraw(upstream_id, "the client went away")
        cancelled = peer.wait_for("notifications/cancelled")[0]["params"]
        assert cancelled == {"requestId": upstream_id, "reason": "the client went away"}
        peer.reply(held[0], {"content": []})  # late
        session.ping()  # the late reply was read before the ping's
        assert not future.done() and not session.busy()
    finally:
        session.close()


# -- the server core asks its client on the same matcher ---------------------------------------------------


def test_the_server_cores_request_to_its_client_times_out_and_a_late_reply_is_dropped() -> None:
    server = McpServer("s", "1", [])
    sent: list[dict[str, Any]] = []
    with pytest.raises(TimeoutExpired):
        server.ask_client("roots/list", {}, sent.append, timeout=0.01)
    assert [m["method"] for m in sent] == ["roots/list"]
    server.handle(jsonrpc.result(sent[0]["id"], {"roots": []}), sent.append)  # late: dropped
    server.handle(jsonrpc.result("llmc-unknown", {}), sent.append)  # never asked: dropped
    assert len(sent) == 1
    server.close()


# -- the session keeper: a server's elicitation goes to the caller whose request it belongs to --------------


class FakeKeeper:
    """What an Upstream asks of its keeper: who was asked, and the time of activity."""

    name = "k"

    def __init__(self) -> None:
        self.asked: list[Any] = []

    def ask(self, client: Any, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        self.asked.append(client)
        return {"action": "accept", "content": {}}

    def touch(self) -> None:
        pass


def test_the_keeper_asks_the_caller_whose_request_the_elicitation_belongs_to_never_another() -> None:
    """Not the caller that sent the latest request: while two callers' requests are in flight on
    an untied connection the elicitation may be either's, so nobody is asked (it is declined)."""
    import socket

    from llmc_cli.keeper.upstream import Client, Upstream
    from llmc_cli.model import ServerSpec

    declined: list[str] = []
    asked = threading.Semaphore(0)

    def call(peer: ScriptedPeer, msg: dict[str, Any]) -> None:
        def then(reply: dict[str, Any]) -> None:
            declined.append(reply["result"]["action"])
            asked.release()

        peer.ask(f"ask-{msg['id']}", "elicitation/create", {"message": "?", "requestedSchema": {}}, then)

    keeper = FakeKeeper()
    upstream = Upstream(ServerSpec("up"), keeper)
    session = upstream.session = ClientSession(
        MemoryTransport(ScriptedPeer({"tools/call": call})), name="up", hooks=upstream._hooks()
    )
    session.initialize()
    pairs = [socket.socketpair() for _ in range(2)]
    alice, bob = (Client(near) for near, _far in pairs)
    upstream.clients.update((alice, bob))
    try:
        upstream.forward(alice, jsonrpc.request(1, "tools/call", {"name": "t", "_meta": {"progressToken": 1}}))
        assert asked.acquire(timeout=WAIT)
        upstream.forward(bob, jsonrpc.request(1, "tools/call", {"name": "t", "_meta": {"progressToken": 1}}))
        assert asked.acquire(timeout=WAIT)
        assert keeper.asked == [alice] and declined == ["accept", "decline"]
    finally:
        session.close()
        for near, far in pairs:
            near.close()
            far.close()


DEEPER = "[" * 5000 + "]" * 5000  # past the JSON parser's own recursion limit


@pytest.mark.parametrize(
    "line, expected",
    [
        ('{"jsonrpc": "2.0", "id": 7, "result": {"v": DEEP}}'.replace("DEEP", DEEPER), 7),
        ('{"jsonrpc": "2.0", "error": {"code": 1, "message": "m", "data": DEEP}, "id" : "a\\"b"}'.replace("DEEP", DEEPER), 'a"b'),
        ('{"jsonrpc": "2.0", "result": {"id": 5, "v": DEEP}, "id": 9}'.replace("DEEP", DEEPER), 9),  # a nested "id" is not its id
    ],
)
def test_a_reply_too_deep_for_the_parser_is_an_error_for_its_request(line: str, expected: int | str) -> None:
    for raw in (line, line.encode()):
        assert jsonrpc.decode(raw) == [
            jsonrpc.error(expected, jsonrpc.INTERNAL_ERROR, "the reply is nested more than 128 levels deep")
        ]


@pytest.mark.parametrize(
    "line",
    [
        '{"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"v": DEEP}}'.replace(
            "DEEP", DEEPER
        ),  # a request: its server's to answer
        '{"jsonrpc": "2.0", "result": {"id": 5, "v": DEEP}}'.replace("DEEP", DEEPER),  # no id of its own
        '{"jsonrpc": "2.0", "id": [1], "result": DEEP}'.replace("DEEP", DEEPER),  # not an id a request has
        DEEPER,
    ],
)
def test_a_message_too_deep_for_the_parser_without_a_request_to_answer_is_not_json_rpc(line: str) -> None:
    with pytest.raises(ProtocolError, match="nested more than 128 levels deep"):
        jsonrpc.decode(line)


@pytest.mark.parametrize(
    "line",
    [
        '{"jsonrpc":"2.0","id":1,"result":{"t":"Echo: 1"}}',
        '[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","method":"n"}]',  # a batch
        ' {"jsonrpc":"2.0","id":2,"result":{}}',  # white space first: json.loads reads the bytes itself
        '{"jsonrpc":"2.0","id":3,"result":{"t":"a\\ud800b"}}',  # an escaped lone surrogate: an error reply
        '{"jsonrpc":"2.0","id":4,"result":{"t":"\\u00e9t\\u00e9"}}',  # an escape, no surrogate
        '{"jsonrpc":"2.0","id":5,"result":{"t":"été"}}',
    ],
)
def test_a_line_decodes_alike_as_bytes_and_as_text(line: str) -> None:
    # decode checks the bytes it is given with find/startswith, not `in` (3.11's `bytes in bytes`
    # formats a TypeError it drops): the same messages whichever way the line comes
    messages = jsonrpc.decode(line)
    assert jsonrpc.decode(line.encode()) == messages
    json.dumps(messages, ensure_ascii=False).encode("utf-8")  # no lone surrogate left (it would not encode)


@pytest.mark.parametrize("line", ["", "   ", "nope", "[", "\x00{}"])
def test_a_line_that_is_not_json_fails_alike_as_bytes_and_as_text(line: str) -> None:
    for raw in (line, line.encode()):
        with pytest.raises(ProtocolError, match="invalid JSON"):
            jsonrpc.decode(raw)


def _nested_reply(depth: int) -> str:
    """The shortest reply of this id whose value nests `depth` deep (the message and its result are 2)."""
    return '{"jsonrpc":"2.0","id":7,"result":{"v":' + "[" * (depth - 2) + "]" * (depth - 2) + "}}"


def test_a_reply_just_past_the_depth_limit_is_an_error_for_its_request() -> None:
    # the shortest replies either side of MAX_MESSAGE_DEPTH (decode counts brackets only in a line
    # long enough to hold that many pairs: these are within 50 bytes of that length)
    deep = _nested_reply(MAX_MESSAGE_DEPTH + 1)
    assert len(deep) < 2 * (MAX_MESSAGE_DEPTH + 1) + 50
    for raw in (deep, deep.encode()):
        assert jsonrpc.decode(raw) == [jsonrpc.error(7, jsonrpc.INTERNAL_ERROR, "the reply is nested more than 128 levels deep")]
    ok = _nested_reply(MAX_MESSAGE_DEPTH)
    for raw in (ok, ok.encode()):
        assert jsonrpc.decode(raw) == [json.loads(ok)]
