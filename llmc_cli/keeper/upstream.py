"""What a session keeper holds: the servers (Upstream: started, restarted after it died, its
protocol traffic multiplexed) and the llmc processes attached to them (Client). Request ids and
progress tokens are rewritten here so callers that all count from 1 do not collide; the keeper's
progress tokens also say which caller a server's message belongs to (mcp/router.py).
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from llmc_cli.errors import ConnectionFailed, LlmcError
from llmc_cli.keeper.transport import send_line
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.client import connect
from llmc_cli.mcp.hooks import ClientHooks
from llmc_cli.mcp.inflight import Future
from llmc_cli.mcp.router import Router
from llmc_cli.mcp.session import ClientSession
from llmc_cli.mcp.versions import META_PREFIX
from llmc_cli.model import JSON, JSONObject, ServerSpec
from llmc_cli.services import builtin_servers
from llmc_cli.store import client_stores

if TYPE_CHECKING:
    from llmc_cli.keeper.daemon import Keeper

LISTEN_WAIT = 5.0  # seconds open() waits for a subscriptions/listen stream's acknowledgement


def log(message: str) -> None:
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"{stamp} {message}", file=sys.stderr, flush=True)


class Client:
    """One attached connection (one llmc process's session with one server)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.lock = threading.Lock()
        self.upstream: Upstream | None = None
        self.pending: dict[object, tuple[int, str | None]] = {}  # its request id -> (upstream id, our token)

    def send(self, message: Mapping[str, object]) -> None:
        try:
            with self.lock:
                send_line(self.sock, message)
        except OSError:
            pass  # it went away; its reader notices and cleans up

    def hang_up(self, reason: str) -> None:
        """The server is gone: say why, then end the connection (the caller sees exit 5)."""
        self.send({"llmc": "closed", "message": reason})
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class Upstream:
    """One server the keeper holds; restarted on the next attach after it died."""

    def __init__(self, spec: ServerSpec, keeper: Keeper) -> None:
        self.spec = spec
        self.keeper = keeper
        self.session: ClientSession | None = None
        self.error: LlmcError | None = None  # why the last start failed
        self.restarts = 0
        self.lock = threading.Lock()
        # our progress token -> (the client whose request it is, the client's own token)
        self.routes: Router[tuple[Client, JSON]] = Router("llmc-keeper", lambda route: id(route[0]))
        self.clients: set[Client] = set()
        # The server's tools as it last listed them to the keeper, sent with every attach reply
        # (a caller needs no tools/list round trip); `generation` counts the listings made stale
        # (notifications/tools/list_changed, a restart). Kept only while the keeper hears of
        # changes (`heard`): a server of the initialize era that declares tools.listChanged, or
        # one of 2026-07-28 whose subscriptions/listen stream (`listen_id`) acknowledged
        # toolsListChanged. Its own lock, never held across I/O: notifications come on the
        # session's reader thread while open() may hold `lock`.
        self.tools: list[JSONObject] | None = None
        self.generation = 0
        self.heard = False
        self.listen_id: int | None = None
        self.acknowledged: set[object] = set()  # subscription ids acknowledged with toolsListChanged
        self.tools_lock = threading.Lock()
        self.acked = threading.Event()  # an acknowledgement came (open() waits for it: _listen)

    def open(self) -> str | None:
        """Connect if not connected. Returns a notice when a server that died was restarted."""
        with self.lock:
            if self.session is not None and self.session.closed_error is None:
                return None
            notice = None
            if self.session is not None:
                reason = self.session.closed_error.message if self.session.closed_error else "closed"
                self.session.close()
                self.session = None
                notice = (
                    f"{self.spec.name} stopped inside session {self.keeper.name} ({reason}) and was "
                    "restarted: state the server kept (processes, handles, ids) is lost"
                )
                # Callers still attached hold handles of the dead server: end their connections
                # (they see why) rather than let their next request reach the new one silently.
                for client in list(self.clients):
                    client.hang_up(notice)

            self._tools_changed(heard=False)  # a new connection: listed afresh, once it is heard
            try:
                self.session = connect(self.spec, stores=client_stores(), hooks=self._hooks(), builtins=builtin_servers())
            except LlmcError as exc:
                self.error = exc
                log(f"{self.spec.name}: cannot start: {exc.message}")
                raise
            self.error = None
            self._listen(self.session)
            if notice:
                self.restarts += 1
                log(notice)
            return notice

    @property
    def state(self) -> str:
        if self.session is None:
            return "failed" if self.error else "stopped"
        return "exited" if self.session.closed_error else "running"

    def listing(self) -> tuple[list[JSONObject] | None, int]:
        """The server's tools (listed now when the keeper has none), and the generation they
        belong to: they may be handed on only while `generation` is still that one. None when
        the keeper would not hear of a change, the server has no tools, or the listing failed
        (the caller then asks itself, and sees the error)."""
        with self.tools_lock:
            tools, generation, session, heard = self.tools, self.generation, self.session, self.heard
        if tools is not None or not heard or session is None:
            return tools, generation
        try:
            tools = session.list_tools()
        except LlmcError:
            return None, generation
        with self.tools_lock:
            if self.generation == generation:
                self.tools = tools
        return tools, generation

    def _tools_changed(self, heard: bool = True) -> None:
        with self.tools_lock:
            self.tools = None
            self.generation += 1
            self.heard = self.heard and heard

    def _listen(self, session: ClientSession) -> None:
        """Arrange to hear of tools/list_changed, so that a listing may be kept: an initialize-era
        server that declares it sends it unasked; a 2026-07-28 one on a subscriptions/listen
        stream, once acknowledged (basic/patterns/subscriptions). A server that declares nothing
        is listed by each caller, as without a keeper."""
        declared = session.capabilities.get("tools")
        if not (isinstance(declared, dict) and declared.get("listChanged") is True):
            return
        if session.era != "modern":
            with self.tools_lock:
                self.heard = True
            return
        params: JSONObject = {"_meta": session.modern_meta(), "notifications": {"toolsListChanged": True}}
        try:
            # standing: the stream is no caller's wait (callers alone with it still read their own
            # replies; the session is no busier for it)
            listen_id, future = session.forward(jsonrpc.request(0, "subscriptions/listen", params), standing=True)
        except LlmcError:
            return
        with self.tools_lock:  # the acknowledgement may have come before forward() returned
            self.listen_id = listen_id
            self.heard = listen_id in self.acknowledged
        # The stream ended (the server closed it, refused it, or the connection went): no more news.
        future.add_done_callback(lambda _: self._tools_changed(heard=False) if self.session is session else None)
        # Ready when acknowledged (or refused), so the first caller already gets the listing; a
        # server slower than that has its listing kept from its acknowledgement on.
        deadline = time.monotonic() + LISTEN_WAIT
        while not (self.heard or future.done()) and (left := deadline - time.monotonic()) > 0:
            self.acked.wait(min(left, 0.05))  # polled: a refusal completes the future, not the event
            self.acked.clear()

    def _acknowledged(self, params: JSONObject) -> None:
        meta, agreed = params.get("_meta"), params.get("notifications")
        if isinstance(meta, dict) and isinstance(agreed, dict) and agreed.get("toolsListChanged") is True:
            subscription = meta.get(META_PREFIX + "subscriptionId")
            with self.tools_lock:
                self.acknowledged.add(subscription)
                if subscription is not None and subscription == self.listen_id:
                    self.heard = True
            self.acked.set()

    def _hooks(self) -> ClientHooks:
        # Sampling is not declared: the keeper cannot know that an attached caller may sample.
        return ClientHooks(
            on_progress=self._progress,
            on_log=self._log,
            on_list_changed=self._list_changed,
            elicit=self._elicit,
            on_acknowledged=self._acknowledged,
        )

    # -- client -> server --------------------------------------------------------------------

    def forward(self, client: Client, message: JSONObject) -> None:
        original_id = message["id"]
        token: str | None = None
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        if isinstance(params, dict) and isinstance(meta, dict) and "progressToken" in meta:
            token = self.routes.open((client, meta["progressToken"]))  # callers all count from 1
            message = {**message, "params": {**params, "_meta": {**meta, "progressToken": token}}}
        session = self.session
        try:
            if session is None:
                raise ConnectionFailed(f"{self.spec.name}: not running")
            upstream_id, future = session.forward(message)
        except LlmcError as exc:
            self.routes.close(token)
            client.hang_up(exc.message)
            return
        client.pending[original_id] = (upstream_id, token)
        future.add_done_callback(lambda f: self._reply(client, original_id, token, f))

    def _reply(self, client: Client, original_id: JSON, token: str | None, future: Future[JSONObject]) -> None:
        client.pending.pop(original_id, None)
        self.routes.close(token)
        self.keeper.touch()
        try:
            reply = future.result()
        except LlmcError as exc:
            client.hang_up(exc.message)
            return
        client.send({**reply, "id": original_id})

    def cancel(self, client: Client, original_id: object, reason: str) -> None:
        entry = client.pending.pop(original_id, None)
        if entry is None or self.session is None:
            return
        upstream_id, token = entry
        self.routes.close(token)
        self.session.withdraw(upstream_id, reason)

    def notify(self, message: JSONObject) -> None:
        if self.session is not None:
            try:
                params = message.get("params")
                self.session.notify(str(message["method"]), params if isinstance(params, dict) else None)
            except LlmcError:
                pass

    # -- server -> clients ------------------------------------------------------------------

    def _progress(self, params: JSONObject) -> None:
        route = self.routes.by_token(params.get("progressToken"))
        if route:
            client, token = route
            client.send(jsonrpc.notification("notifications/progress", {**params, "progressToken": token}))

    def _log(self, params: JSONObject) -> None:
        for client in list(self.clients):
            client.send(jsonrpc.notification("notifications/message", params))

    def _list_changed(self, _server: str, method: str) -> None:
        if method == "notifications/tools/list_changed":
            self._tools_changed()  # before the clients are counted: see Keeper._attach
        for client in list(self.clients):
            client.send(jsonrpc.notification(method))

    def _elicit(self, params: JSONObject) -> JSONObject:
        """The server asks the user: the caller whose request it belongs to is asked (it may
        prompt), never another caller. When nothing ties it to a caller's request and a single
        caller is attached, that caller; else it is declined."""
        route, routes = self.routes.related()
        client = route[0] if route is not None else None
        if client is None and not any(routes):
            attached = list(self.clients)
            client = attached[0] if len(attached) == 1 else None
        if client is None:
            return {"action": "decline"}
        return self.keeper.ask(client, "elicitation/create", params, self.spec.timeout)
