"""A transport to a server held by a session keeper (`llmc session start`), over its Unix socket.

The keeper keeps the server process (or HTTP session) alive between llmc invocations and relays
protocol messages; the session on this side runs as over any transport, so policy and audit stay
in the calling process. Wire format: newline-delimited JSON, like stdio. The first line each way
is the keeper's own: {"llmc": "attach", "server": NAME, "reach": HMAC?} -> {"llmc": "attached", era, version,
serverInfo, capabilities, instructions, notice, servers, tools} or {"llmc": "error", ...};
`tools` (when the keeper keeps the server's listing: keeper/upstream.py) is the caller's first
tools listing, so a call makes no tools/list round trip (HeldSession). After that, JSON-RPC
messages both ways, and {"llmc": "closed", "message": ...} when the keeper lost the server.
Connections for one question and its answer: {"llmc": "status"}, {"llmc": "stop"}, and
{"llmc": "validate", tool, arguments, inputSchema} -> {"llmc": "valid"} or {"llmc": "invalid",
...the UsageError}.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, BinaryIO, NotRequired, TypedDict

from llmc_cli.errors import ConnectionFailed, LlmcError, ProtocolError, TimeoutExpired, from_json
from llmc_cli.mcp.hooks import ClientHooks
from llmc_cli.mcp.jsonrpc import has_lone_surrogate
from llmc_cli.mcp.messages import object_at
from llmc_cli.mcp.session import ClientSession
from llmc_cli.mcp.transports.base import Closed, Deliver
from llmc_cli.model import JSON, JSONObject, NamedTuple, compact_json

MAX_LINE = 64 * 1024 * 1024  # one message; a larger one is a broken peer, not a big result


# TypedDicts for the type checker only, plain dicts at run time (as mcp/messages.py's shapes):
# creating them cost 0.4 ms of every call through a keeper (issue 34).
if TYPE_CHECKING:

    class HeldServer(TypedDict):
        """One server in a keeper's status (`session start` adds the profile's unusable ones, with
        state "unusable" and the error only)."""

        name: str
        state: str  # starting | running | failed | unusable
        restarts: NotRequired[int]
        timeout: NotRequired[float]  # seconds per request, as the profile set it
        protocolVersion: NotRequired[str | None]
        error: NotRequired[str]

    class KeeperStatus(TypedDict):
        """What a keeper says about itself: its answer to {"llmc": "status"}, and the line it writes
        to `session start` when its servers are up (or failed)."""

        llmc: str  # "status"
        name: str
        pid: int
        profile: str | None
        started: str  # ISO time
        idleTimeout: float  # seconds; 0: never
        idleFor: float
        clients: int
        servers: list[HeldServer]

else:
    HeldServer = KeeperStatus = dict


class AttachReply(NamedTuple):
    """The keeper's answer to attach: how the server it holds speaks (it negotiated once, for
    every caller) and a notice for the caller (the server was restarted, say). A NamedTuple: a
    call through a keeper is mostly start-up, and a dataclass costs ~1 ms to create at import."""

    era: str
    protocol_version: str
    server_info: JSONObject
    capabilities: JSONObject
    instructions: str | None = None
    notice: str | None = None
    servers: list[JSON] | None = None  # every server the keeper holds (None: a keeper too old to say)
    tools: list[JSONObject] | None = None  # the server's tools as the keeper holds them (None: not sent)

    @classmethod
    def of(cls, session: ClientSession, notice: str | None) -> AttachReply:
        return cls(
            session.era or "",
            session.protocol_version or "",
            session.server_info,
            session.capabilities,
            session.instructions,
            notice,
        )

    def to_json(self) -> JSONObject:
        return {
            "llmc": "attached",
            "era": self.era,
            "protocolVersion": self.protocol_version,
            "serverInfo": self.server_info,
            "capabilities": self.capabilities,
            "instructions": self.instructions,
            "notice": self.notice,
        }

    @classmethod
    def from_json(cls, data: JSONObject, keeper_name: str) -> AttachReply:
        era, version = data.get("era"), data.get("protocolVersion")
        if not (isinstance(era, str) and era and isinstance(version, str) and version):
            raise ProtocolError(f"session {keeper_name}: its keeper did not say how {data.get('server', 'the server')} speaks")
        notice, instructions, servers, tools = (
            data.get("notice"),
            data.get("instructions"),
            data.get("servers"),
            data.get("tools"),
        )
        return cls(
            era,
            version,
            object_at(data, "serverInfo"),
            object_at(data, "capabilities"),
            instructions if isinstance(instructions, str) else None,
            notice if isinstance(notice, str) else None,
            servers if isinstance(servers, list) else None,
            [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else None,
        )


def connect_unix(path: str, timeout: float, keeper_name: str) -> socket.socket:
    """A connected socket, or the error a user can act on."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        raise ConnectionFailed(
            f"session {keeper_name} is not running (start it with `llmc session start {keeper_name}`)"
        ) from None
    except TimeoutError:
        sock.close()
        raise TimeoutExpired(f"session {keeper_name}: its keeper did not accept within {timeout:g}s") from None
    except OSError as exc:
        sock.close()
        raise ConnectionFailed(f"session {keeper_name}: cannot reach its keeper: {exc.strerror}") from None
    return sock


def send_line(sock: socket.socket, message: Mapping[str, object]) -> None:
    sock.sendall((compact_json(message) + "\n").encode("utf-8"))


def read_line(stream: BinaryIO) -> JSONObject | None:
    """The next message of a socket's binary file object; None at end of stream."""
    line = stream.readline(MAX_LINE + 1)
    if not line:
        return None
    if len(line) > MAX_LINE:
        raise ProtocolError("message too large")
    try:
        message = json.loads(line)
    except RecursionError:  # nested a hundred thousand deep: the parser gives up
        raise ProtocolError("message nested too deeply") from None
    if not isinstance(message, dict):
        raise ProtocolError("message is not a JSON object")
    return message


def exchange(path: str, request: JSONObject, keeper_name: str, timeout: float = 10.0) -> JSONObject:
    """One keeper command (status, stop): send a line, read the reply line."""
    sock = connect_unix(path, timeout, keeper_name)
    try:
        send_line(sock, request)
        with sock.makefile("rb") as stream:
            reply = read_line(stream)
    except TimeoutError:
        raise TimeoutExpired(f"session {keeper_name}: its keeper did not answer within {timeout:g}s") from None
    except (OSError, ValueError) as exc:
        raise ConnectionFailed(f"session {keeper_name}: broken reply from its keeper: {exc}") from None
    finally:
        sock.close()
    if reply is None:
        raise ConnectionFailed(f"session {keeper_name}: its keeper closed the connection")
    if reply.get("llmc") == "error":
        raise from_json(reply)
    return reply


class KeeperTransport:
    def __init__(self, path: str, keeper_name: str, server: str, timeout: float = 60.0, reach: str | None = None) -> None:
        self.path = path
        self.reach = reach  # how the caller would reach the server (ServerSpec.reach): the keeper checks it
        self.keeper_name = keeper_name
        self.server = server
        self.timeout = timeout
        self.protocol_version: str | None = None
        self.attached: AttachReply | None = None  # the keeper's answer to attach
        self._sock: socket.socket | None = None
        self._send_lock = threading.Lock()
        self._reader: threading.Thread | None = None

    def start(self, deliver: Deliver, closed: Closed) -> None:
        sock = connect_unix(self.path, self.timeout, self.keeper_name)
        stream = sock.makefile("rb")
        try:
            send_line(sock, {"llmc": "attach", "server": self.server, **({"reach": self.reach} if self.reach else {})})
            # The keeper may restart a dead server before it answers: allow a server's start-up.
            reply = read_line(stream)
        except TimeoutError:
            sock.close()
            raise TimeoutExpired(f"session {self.keeper_name}: no answer from its keeper within {self.timeout:g}s") from None
        except (OSError, ValueError) as exc:
            sock.close()
            raise ConnectionFailed(f"session {self.keeper_name}: broken reply from its keeper: {exc}") from None
        if reply is None or reply.get("llmc") != "attached":
            sock.close()
            if reply is not None and reply.get("llmc") == "error":
                raise from_json(reply)
            raise ConnectionFailed(f"session {self.keeper_name}: its keeper closed the connection")
        try:
            self.attached = AttachReply.from_json({"server": self.server, **reply}, self.keeper_name)
        except ProtocolError:
            sock.close()
            raise
        sock.settimeout(None)  # from here on the session's per-request timeouts govern
        self._sock = sock
        self._reader = threading.Thread(
            target=self._read, args=(stream, deliver, closed), daemon=True, name=f"llmc-keeper-{self.server}"
        )
        self._reader.start()

    def _read(self, stream: BinaryIO, deliver: Deliver, closed: Closed) -> None:
        error: LlmcError | None = None
        try:
            while True:
                message = read_line(stream)
                if message is None:
                    error = ConnectionFailed(f"session {self.keeper_name}: its keeper went away")
                    break
                if message.get("llmc") == "closed":
                    error = ConnectionFailed(str(message.get("message") or "the keeper lost the server"))
                    break
                deliver(message)
        except (OSError, ValueError, LlmcError) as exc:
            error = (
                None
                if self._sock is None
                else ConnectionFailed(f"session {self.keeper_name}: connection to its keeper broke: {exc}")
            )
        finally:
            stream.close()
        if self._sock is not None:
            closed(error)

    def send(self, message: JSONObject) -> None:
        sock = self._sock
        if sock is None:
            raise ConnectionFailed(f"session {self.keeper_name}: not connected to its keeper")
        try:
            with self._send_lock:
                send_line(sock, message)
        except OSError as exc:
            raise ConnectionFailed(f"session {self.keeper_name}: cannot write to its keeper: {exc}") from None

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is None:
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(timeout=2.0)

    def diagnostics(self) -> str:
        return ""


def validate_in_keeper(path: str, keeper_name: str, arguments: JSONObject, schema: Any, tool: str) -> bool:
    """The keeper checks the arguments against the tool's inputSchema (mcp/validation.py, with
    jsonschema loaded once for all its callers): UsageError when they do not fit, exactly as the
    check raises it here. False when the keeper cannot (a keeper started by an older llmc, one
    that went away, text no UTF-8 writer takes): then the caller checks them itself."""

    if has_lone_surrogate(arguments):
        return False  # cannot be sent; the policy refuses such a call after the check
    try:
        reply = exchange(path, {"llmc": "validate", "tool": tool, "arguments": arguments, "inputSchema": schema}, keeper_name)
    except LlmcError:
        return False
    if reply.get("llmc") == "invalid":
        raise from_json(reply)
    return reply.get("llmc") == "valid"


class HeldSession(ClientSession):
    """A session with a server a keeper holds. Its first tools listing is the one the keeper
    sent with its attach reply: a call needs no tools/list round trip before its tools/call.
    A tools/list_changed from the server makes it stale: every listing then asks the server."""

    keeper_listing_used = False  # only ever set (from the reader thread too): no lock needed

    def list_tools_fresh(self) -> tuple[list[JSONObject], float | None]:
        attached = getattr(self.transport, "attached", None)
        if not self.keeper_listing_used:
            self.keeper_listing_used = True
            if isinstance(attached, AttachReply) and attached.tools is not None:
                return attached.tools, None  # the keeper hears the server's changes (its listen stream)
        return super().list_tools_fresh()

    def listing_changed(self, then: Callable[[str, str], None] | None, server: str, method: str) -> None:
        if method == "notifications/tools/list_changed":
            self.keeper_listing_used = True
        if then is not None:
            then(server, method)


def attach(
    socket_path: str,
    keeper_name: str,
    server: str,
    *,
    timeout: float = 60.0,
    hooks: ClientHooks | None = None,
    reach: str | None = None,
) -> ClientSession:
    """A session with a server that a session keeper holds: no probe and no handshake (the keeper
    did both when it started the server); the era and version are the keeper's, and so is the
    first tools listing (HeldSession)."""
    transport = KeeperTransport(socket_path, keeper_name, server, timeout, reach)
    hooks = hooks or ClientHooks()
    session = HeldSession(transport, name=server, timeout=timeout, hooks=hooks)
    # set before the connection starts: a list_changed may follow the attach reply at once
    session.hooks = replace(hooks, on_list_changed=partial(session.listing_changed, hooks.on_list_changed))
    session.start()
    info = transport.attached
    assert info is not None  # start() raised otherwise
    session.adopt(info.era, info.protocol_version)
    session.server_info, session.capabilities, session.instructions = info.server_info, info.capabilities, info.instructions
    if info.notice and session.hooks.on_notice:
        session.hooks.on_notice(info.notice)
    return session
