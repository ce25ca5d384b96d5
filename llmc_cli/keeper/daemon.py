"""The session keeper: a background process that keeps MCP servers running between llmc
invocations and relays protocol messages for the llmc processes that attach to it.

`llmc session start` runs `python -P -m llmc_cli.keeper.daemon` detached, hands it the server definitions
on stdin and waits for one line on stdout (ready, or the error). Then it serves its Unix socket
(see keeper/transport.py for the wire format) until `session stop`, SIGTERM, the idle
timeout, or every server is gone for good.

It decides and records nothing: each attached llmc process runs its own policy and audit
(services.Pipeline), so a session changes where a server lives, never what may run. The one
check it runs for callers is a pure function of what they send: their tool arguments against the
inputSchema they send along (`validate`), so that `llmc call` need not import jsonschema. It only
rewrites what must be unique on a shared connection: request ids and progress tokens.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from types import FrameType
from typing import BinaryIO, TextIO

from llmc_cli import interrupts
from llmc_cli.errors import ConnectionFailed, ExitCode, LlmcError, RpcError, UsageError
from llmc_cli.keeper.lifecycle import socket_path, spec_from_json
from llmc_cli.keeper.transport import AttachReply, HeldServer, KeeperStatus, read_line, send_line
from llmc_cli.keeper.upstream import Client, Upstream, log
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.inflight import InFlight
from llmc_cli.mcp.messages import object_at
from llmc_cli.mcp.validation import validate_arguments
from llmc_cli.model import JSON, JSONObject, ServerSpec

ACCEPT_POLL = 0.5  # how often the accept loop looks at the idle clock and the stop flag
FIRST_LINE_TIMEOUT = 10.0  # an attaching client says what it wants at once


class Keeper:
    def __init__(
        self, name: str, specs: list[ServerSpec], idle: float, profile: str | None, reach: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.reach = reach or {}  # how each server was reached when it started (ServerSpec.reach)
        self.idle = idle
        self.profile = profile
        self.upstreams = {spec.name: Upstream(spec, self) for spec in specs}
        self.clients: set[Client] = set()
        # Connections that are or may become attached (counted from accept() until they say they
        # want something else): an attach that restarts a server may take seconds, and the idle
        # timeout must not cut it off meanwhile.
        self.connections = 0
        self.counter = itertools.count(1)
        self.asks = InFlight()  # our requests to callers (a server's elicitation, put to its caller)
        self.started = datetime.now(UTC)
        self.last_activity = time.monotonic()
        self.stopping = threading.Event()
        self.stop_reason = ""
        self.lock = threading.Lock()

    def touch(self) -> None:
        self.last_activity = time.monotonic()

    def stop(self, reason: str) -> None:
        if not self.stopping.is_set():
            self.stop_reason = reason
            self.stopping.set()

    # -- life cycle --------------------------------------------------------------------------

    def run(self, listener: socket.socket, ready: TextIO) -> int:
        """Open the servers, report on `ready`, serve until told to stop."""
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(self.upstreams)))) as pool:
            outcomes = list(pool.map(self._open_quietly, self.upstreams.values()))
        if not any(outcomes):
            first = next(u.error for u in self.upstreams.values() if u.error)
            ready.write(json.dumps({"llmc": "error", **first.to_json()}) + "\n")
            ready.close()
            return first.exit_code
        self.touch()  # the idle clock starts when the session is ready, not while its servers start
        ready.write(json.dumps(self.status()) + "\n")
        ready.close()
        log(f"session {self.name} ready: pid {os.getpid()}, servers {', '.join(self.upstreams)}")
        listener.settimeout(ACCEPT_POLL)
        while not self.stopping.is_set():
            try:
                conn: socket.socket | None = listener.accept()[0]
            except TimeoutError:
                conn = None
            # Checked after every accept, not only when accept() times out, and before the new
            # connection counts: a stream of `session list` queries must not keep an idle session
            # alive (status queries do not touch the clock either).
            if self.idle and not self.connections and time.monotonic() - self.last_activity > self.idle:
                if conn is not None:
                    conn.close()  # came too late: the session is stopping
                self.stop(f"idle for {self.idle:g}s")
                continue
            if conn is None:
                continue
            if not _same_user(conn):
                conn.close()
                continue
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True, name="llmc-keeper-client").start()
        log(f"session {self.name} stopping: {self.stop_reason}")
        self._shutdown()
        return ExitCode.OK

    def _open_quietly(self, upstream: Upstream) -> bool:
        try:
            upstream.open()
            return True
        except LlmcError:
            return False
        except Exception as exc:  # noqa: BLE001 - a bug: in the log with its traceback, and the start fails cleanly
            import traceback

            log(f"{upstream.spec.name}: internal error while starting:\n{traceback.format_exc()}")
            upstream.error = ConnectionFailed(f"{upstream.spec.name}: internal error while starting: {exc!r}")
            return False

    def _shutdown(self) -> None:
        for client in list(self.clients):
            client.hang_up(f"session {self.name} stopped ({self.stop_reason})")
        sessions = [u.session for u in self.upstreams.values() if u.session is not None]
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(sessions)))) as pool:
            list(pool.map(lambda s: s.close(), sessions))

    def status(self) -> KeeperStatus:
        return {
            "llmc": "status",
            "name": self.name,
            "pid": os.getpid(),
            "profile": self.profile,
            "started": self.started.isoformat(timespec="seconds"),
            "idleTimeout": self.idle,
            "idleFor": round(time.monotonic() - self.last_activity, 1) if not self.clients else 0.0,
            "clients": len(self.clients),
            "servers": [_held(name, u) for name, u in self.upstreams.items()],
        }

    def roster(self) -> list[JSON]:
        """The servers held, with their timeouts: in every attach reply, so that a command that
        attaches first needs no status request to learn them (lifecycle.specs_of)."""
        return [{"name": name, "timeout": u.spec.timeout} for name, u in self.upstreams.items()]

    # -- one connection ----------------------------------------------------------------------

    def _serve(self, conn: socket.socket) -> None:
        client = Client(conn)
        stream = conn.makefile("rb")
        counted = True  # in self.connections
        try:
            conn.settimeout(FIRST_LINE_TIMEOUT)
            first = read_line(stream)
            conn.settimeout(None)
            if first is None:
                return
            command = first.get("llmc")
            if command != "attach":  # a status query or a stop is no use of the session
                self._uncount()
                counted = False
            if command == "status":
                client.send(self.status())
            elif command == "stop":
                client.send({"llmc": "stopping", "pid": os.getpid()})
                self.stop("asked to stop")
            elif command == "validate":
                client.send(_validated(first))
            elif command == "attach":
                self._attach(client, str(first.get("server")), stream, first.get("reach"))
            else:
                client.send({"llmc": "error", "error": "usage", "message": f"unknown keeper command {command!r}"})
        except (OSError, ValueError, LlmcError) as exc:
            log(f"a client connection failed: {exc}")
        finally:
            stream.close()
            conn.close()
            if counted:
                self._uncount()

    def _uncount(self) -> None:
        with self.lock:
            self.connections -= 1

    def _attach(self, client: Client, server: str, stream: BinaryIO, reach: object = None) -> None:
        upstream = self.upstreams.get(server)
        if upstream is None:
            client.send(
                {
                    "llmc": "error",
                    "error": "usage",
                    "servers": self.roster(),
                    "message": f"session {self.name} does not hold server {server!r}",
                }
            )
            return
        if isinstance(reach, str) and reach != self.reach.get(server, reach):
            client.send({"llmc": "error", "error": "config", "message": self._elsewise(server)})
            return
        try:
            notice = upstream.open()
        except LlmcError as exc:
            client.send({"llmc": "error", **exc.to_json()})
            if all(u.session is None for u in self.upstreams.values()):
                self.stop("no server is left running")
            return
        session = upstream.session
        assert session is not None
        client.upstream = upstream
        tools, generation = upstream.listing()
        try:
            self._attached(
                client, upstream, {**AttachReply.of(session, notice).to_json(), "servers": self.roster()}, tools, generation
            )
            while True:
                message = read_line(stream)
                if message is None:
                    return
                self.touch()
                self._route(client, upstream, message)
        finally:
            with self.lock:
                self.clients.discard(client)
                upstream.clients.discard(client)
            for original_id in list(client.pending):
                upstream.cancel(client, original_id, "the client went away")
            self.touch()

    def _elsewise(self, server: str) -> str:
        """Why a command is not served `server`: it would reach it otherwise (another token in its
        env or headers, another command or URL) than the session's process was started, which is
        then another server, maybe another account's. Refused rather than started apart: the
        caller asked for the session's server, whose state a private one would not have."""
        return (
            f"session {self.name} runs server {server!r} as it was configured when the session started, "
            "and this command configures it otherwise (its command, env, headers, URL or sandbox, ${VARs} "
            f"expanded, differ): restart the session (llmc session stop {self.name}, then llmc session start "
            f"{self.name}) or run without it (unset LLMC_SESSION, or no --session)"
        )

    def _attached(
        self, client: Client, upstream: Upstream, reply: JSONObject, tools: list[JSONObject] | None, generation: int
    ) -> None:
        """The client joins the server's callers and gets the attach reply, with the server's
        tools when no tools/list_changed made them stale meanwhile. Under the client's lock: a
        notification for it (a list_changed counted after the check) goes out after the reply."""
        with client.lock:
            with self.lock:
                self.clients.add(client)
                upstream.clients.add(client)
            if tools is not None and upstream.generation == generation:
                reply["tools"] = tools  # type: ignore[assignment]  # a list of JSON objects is JSON
            try:
                send_line(client.sock, reply)
            except OSError:
                pass  # it went away; the read below notices

    def _route(self, client: Client, upstream: Upstream, message: JSONObject) -> None:
        kind = jsonrpc.kind_of(message)
        if kind == "request":
            upstream.forward(client, message)
        elif kind in ("response", "error"):
            self.asks.resolve(message)
        elif message["method"] == "notifications/cancelled":
            params = object_at(message, "params")
            upstream.cancel(client, params.get("requestId"), str(params.get("reason") or "cancelled"))
        else:
            upstream.notify(message)

    def ask(self, client: Client, method: str, params: JSONObject, timeout: float) -> JSONObject:
        """A request from the server, put to a caller; its answer goes back to the server."""
        ask_id = f"llmc-keeper-{next(self.counter)}"
        try:
            reply = self.asks.exchange(ask_id, lambda: client.send(jsonrpc.request(ask_id, method, params)), timeout)
        except TimeoutError:
            raise RpcError(f"no answer from the user within {timeout:g}s", code=jsonrpc.INTERNAL_ERROR) from None
        if "error" in reply:
            error = object_at(reply, "error")
            code = error.get("code", jsonrpc.INTERNAL_ERROR)
            raise RpcError(
                str(error.get("message", "declined")),
                code=int(code) if isinstance(code, (int, float, str)) else jsonrpc.INTERNAL_ERROR,
            )
        return object_at(reply, "result")


def _validated(request: JSONObject) -> JSONObject:
    """A caller's tool arguments checked against the tool's inputSchema it sends along (the
    caller's `llmc call` would otherwise import jsonschema every time): "valid", or "invalid"
    with the UsageError the caller raises as its own."""

    arguments = request.get("arguments")
    if not isinstance(arguments, dict):
        return {"llmc": "error", "error": "usage", "message": "validate: arguments must be a JSON object"}
    try:
        validate_arguments(arguments, request.get("inputSchema"), str(request.get("tool")))
    except UsageError as exc:
        return {"llmc": "invalid", **exc.to_json()}
    return {"llmc": "valid"}


def _held(name: str, upstream: Upstream) -> HeldServer:
    held: HeldServer = {
        "name": name,
        "state": upstream.state,
        "restarts": upstream.restarts,
        "timeout": upstream.spec.timeout,
        "protocolVersion": upstream.session.protocol_version if upstream.session else None,
    }
    if upstream.error:
        held["error"] = upstream.error.message
    return held


def _same_user(conn: socket.socket) -> bool:
    """The directory's 0700 keeps others out; the peer's credentials say so again (Linux)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return True
    try:
        _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    except OSError:
        return False
    return bool(uid == os.getuid())


def _listen(path: str) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the socket is born 0600: no window where others could connect, and no
    try:  # chmod by name afterwards (it would follow a link put in the socket's place meanwhile)
        listener.bind(path)  # bind() never follows a link: a name in the way is EADDRINUSE
    finally:
        os.umask(old)
    listener.listen(64)
    return listener


def main() -> int:

    config = json.loads(sys.stdin.read())
    ready = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)  # sys.stdin stays usable (isatty() is asked): it reads nothing now
    os.dup2(devnull, 1)  # once ready is sent, nothing may write to the starter's pipe
    keeper = Keeper(
        config["name"],
        [spec_from_json(s) for s in config["specs"]],
        float(config["idle"]),
        config.get("profile"),
        config.get("reach"),
    )
    path = str(socket_path(keeper.name))

    def stop(signum: int, frame: FrameType | None) -> None:
        keeper.stop(signal.Signals(signum).name)  # a repeated signal changes nothing

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        listener = _listen(path)
    except OSError as exc:
        ready.write(
            json.dumps(
                {
                    "llmc": "error",
                    "error": "connection",
                    "message": f"session {keeper.name}: cannot listen on {path}: {exc.strerror}",
                }
            )
            + "\n"
        )
        ready.close()
        return ExitCode.CONNECTION
    inode = os.stat(path).st_ino
    try:
        return keeper.run(listener, ready)
    finally:
        listener.close()
        try:
            if os.stat(path).st_ino == inode:  # still ours, not a successor's
                os.unlink(path)
        except OSError:
            pass
        log(f"session {keeper.name} stopped")
        if keeper.stop_reason in ("SIGTERM", "SIGINT"):  # its servers are stopped: nothing may kill the exit
            interrupts.ignore_further()


if __name__ == "__main__":
    sys.exit(main())
