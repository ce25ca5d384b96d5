"""A scripted MCP server for in-process ClientSession tests: an endpoint for the production
MemoryTransport whose answers are small functions, one per method, so a test says exactly what
the peer does (reply late, send progress, ask the client something, refuse) and waits on events,
never on sleeps.

    peer = ScriptedPeer({"tools/call": lambda peer, msg: peer.reply(msg, {"content": []})})
    session = ClientSession(MemoryTransport(peer), timeout=5)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.versions import LEGACY_VERSIONS, MODERN_VERSIONS

Handler = Callable[["ScriptedPeer", dict[str, Any]], None]
WAIT = 10.0  # seconds any wait for the other side may take before the test fails


def legacy_initialize(peer: ScriptedPeer, message: dict[str, Any]) -> None:
    """An initialize-era server: agrees to the client's version when it speaks it."""
    asked = message["params"]["protocolVersion"]
    peer.reply(
        message,
        {
            "protocolVersion": asked if asked in LEGACY_VERSIONS else LEGACY_VERSIONS[0],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "scripted", "version": "1"},
        },
    )


def modern_discover(peer: ScriptedPeer, message: dict[str, Any]) -> None:
    peer.reply(
        message,
        {
            "supportedVersions": list(MODERN_VERSIONS),
            "capabilities": {"tools": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "scripted", "version": "1"}},
        },
    )


def method_not_found(peer: ScriptedPeer, message: dict[str, Any]) -> None:
    peer.error(message, jsonrpc.METHOD_NOT_FOUND, f"method not found: {message['method']}")


class ScriptedPeer:
    def __init__(self, handlers: dict[str, Handler]) -> None:
        self.handlers = {
            "initialize": legacy_initialize,
            "notifications/initialized": lambda p, m: None,
            "notifications/cancelled": lambda p, m: None,
            **handlers,
        }
        self.received: list[dict[str, Any]] = []  # every message from the client, in order
        self.changed = threading.Condition()
        self._send: Callable[[dict[str, Any]], None] | None = None
        self._answers: dict[Any, Callable[[dict[str, Any]], None]] = {}  # our request id -> what to do with the reply

    # -- the endpoint MemoryTransport serves ---------------------------------------------------------

    def handle(self, message: dict[str, Any], send: Callable[[dict[str, Any]], None]) -> None:
        self._send = send
        with self.changed:
            self.received.append(message)
            self.changed.notify_all()
        if "method" not in message:  # the client's reply to a request of ours
            then = self._answers.pop(message.get("id"), None)
            if then is not None:
                then(message)
            return
        handler = self.handlers.get(message["method"])
        if handler is None:
            if "id" in message:
                method_not_found(self, message)
            return
        handler(self, message)

    # -- what a handler may do -------------------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        assert self._send is not None, "the client has sent nothing yet"
        self._send(message)

    def reply(self, request: dict[str, Any], result: dict[str, Any]) -> None:
        self.send(jsonrpc.result(request["id"], result))

    def error(self, request: dict[str, Any], code: int, message: str, data: Any = None) -> None:
        self.send(jsonrpc.error(request["id"], code, message, data))

    def progress(self, request: dict[str, Any], done: int) -> None:
        token = request["params"]["_meta"]["progressToken"]
        self.send(jsonrpc.notification("notifications/progress", {"progressToken": token, "progress": done}))

    def ask(self, request_id: str, method: str, params: dict[str, Any], then: Callable[[dict[str, Any]], None]) -> None:
        """Send the client a request; `then` gets its reply (result or error message)."""
        self._answers[request_id] = then
        self.send(jsonrpc.request(request_id, method, params))

    # -- what a test waits for ---------------------------------------------------------------------------

    def calls(self, method: str) -> list[dict[str, Any]]:
        with self.changed:
            return [m for m in self.received if m.get("method") == method]

    def wait_for(self, method: str, count: int = 1) -> list[dict[str, Any]]:
        """The first `count` messages of this method, once that many arrived (fails after WAIT)."""
        with self.changed:
            arrived = self.changed.wait_for(
                lambda: len([m for m in self.received if m.get("method") == method]) >= count, timeout=WAIT
            )
        assert arrived, f"the client sent no {count} x {method}: {[m.get('method') for m in self.received]}"
        return self.calls(method)[:count]
