"""The gateway over Streamable HTTP (2025-11-25 and 2026-07-28 basic/transports.mdx), on the
standard library's threading HTTP server: one endpoint, /mcp, plus GET /healthz (liveness: the
process answers), GET /readyz (readiness: and its state database, when it has one, too) and GET
/status.

- Binds 127.0.0.1 unless told otherwise; a non-loopback address needs principals (tokens).
- Once the profile has principals (`[serve.principals]`, even empty) or OAuth, or says
  `[serve] auth = "required"`, every request needs a token: no principal left means nobody.
- Admission (admission.py): connections wait for their first request in a small pool of their
  own with a short deadline; an admitted request counts against its principal's share.
- DNS rebinding: the Host header must name a loopback host (or one the profile allows), and an
  Origin header, when a browser sends one, a loopback origin (or one the profile allows): 403.
- Inbound auth: with `[serve.principals]` every request carries `Authorization: Bearer TOKEN`;
  401 with WWW-Authenticate otherwise. The principal picks the profile whose tools it gets.
- Initialize era: `initialize` starts a session (Mcp-Session-Id, a random 256-bit id), later
  requests carry it (404 once it is gone), GET opens the session's stream for notifications,
  DELETE ends it; sessions idle longer than the limit are ended. With a state database the
  session's handshake is shared (store/state.py HostSessions), so any replica resumes a session another one
  opened (a replica that died, a balancer that does not pin sessions).
- 2026-07-28: no session; each POST is served on its own by a fresh connection.
- A tools/call is answered on an SSE stream when the client accepts one, so progress, logs and
  requests to the client (elicitation) travel before the result; other requests get JSON. A
  client that drops the stream cancels its request.

What the handlers share (principals, toolboxes, host sessions) is hosts.py's HttpGateway; how
replies and streams are written, replies.py's ReplyWriter, the handler's base class.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

from llmc_cli import interrupts
from llmc_cli.errors import LlmcError, ProtocolError
from llmc_cli.gateway.admission import MAX_PENDING, PENDING_SECONDS, Admission, Refused
from llmc_cli.gateway.connection import HTTP_PEER
from llmc_cli.gateway.hosts import IDLE_SECONDS, MAX_CONNECTIONS, REQUEST_SECONDS, HostSession, HttpGateway, parse_address
from llmc_cli.gateway.principals import Principal, authenticate
from llmc_cli.gateway.replies import OPEN_ENDED, REPLY_SECONDS, Arrivals, ReplyWriter, params_of
from llmc_cli.gateway.toolbox import Toolbox
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.messages import JSON, JSONObject, RequestId, request_id
from llmc_cli.mcp.versions import LEGACY_VERSIONS, MODERN_VERSIONS
from llmc_cli.mcp.versions import META_PREFIX as META
from llmc_cli.model import MAX_MESSAGE_DEPTH, nesting_depth

ENDPOINT = "/mcp"
MAX_BODY_BYTES = 4 * 1024 * 1024
REMOVED = {"initialize", "ping", "logging/setLevel"}  # initialize-era methods a 2026-07-28 request cannot use
NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}  # what Mcp-Name repeats
SESSION_HEADER = "Mcp-Session-Id"


class Handler(ReplyWriter):
    server_version = "llmc-gateway"
    sys_version = ""
    gateway: HttpGateway  # set on the subclass serve() makes

    def _refuse(
        self,
        status: int,
        message: str,
        code: int = jsonrpc.INVALID_REQUEST,
        headers: dict[str, str] | None = None,
        msg_id: RequestId | None = None,
        data: JSON = None,
    ) -> None:
        # The request's body may be unread: the connection cannot carry another request.
        self.close_connection = True
        self._send(status, jsonrpc.error(msg_id, code, message, data), {**(headers or {}), "Connection": "close"})

    def _admit(self, *, needs_auth: bool = True) -> tuple[bool, Principal | None]:
        """Host and Origin checks, then the bearer token. Answers the refusal itself."""
        gateway = self.gateway
        if not gateway.host_allowed(self.headers.get("Host")):
            self._refuse(403, "Forbidden: Host header not allowed (DNS rebinding protection)")
            return False, None
        if not gateway.origin_allowed(self.headers.get("Origin")):
            self._refuse(403, "Forbidden: Origin not allowed (DNS rebinding protection)")
            return False, None
        if not needs_auth:
            return True, None  # a public page, answered at once: the connection stays among the pending
        principals = gateway.current_principals()
        if not gateway.auth_required():
            return self._admitted(None)
        principal = authenticate(principals, self.headers.get("Authorization"))
        if principal is None and gateway.oauth is not None:
            from llmc_cli.gateway.oauth_rs import Refusal

            verdict = gateway.oauth.authenticate(self.headers.get("Authorization"))
            if isinstance(verdict, Refusal):
                self._refuse(verdict.status, verdict.message, headers={"WWW-Authenticate": verdict.challenge})
                return False, None
            principal = verdict
        if principal is None:
            challenge = 'Bearer realm="llmc"'
            if self.headers.get("Authorization"):
                challenge += ', error="invalid_token", error_description="unknown bearer token"'
            message = "Unauthorized: a valid bearer token is required"
            if not principals and gateway.oauth is None:
                message += "; no principal can reach this gateway now (its operator adds one with `llmc serve token create`)"
            self._refuse(401, message, headers={"WWW-Authenticate": challenge})
            return False, None
        return self._admitted(principal)

    def _admitted(self, principal: Principal | None) -> tuple[bool, Principal | None]:
        """Within the principal's share of requests in flight and the gateway's (admission.py)."""
        try:
            self.admit(principal.name if principal else None, principal.max_requests if principal else 0)
        except Refused as exc:
            self._refuse(exc.status, exc.message, headers={"Retry-After": "1"})
            return False, None
        return True, principal

    def _admit_to_endpoint(self) -> tuple[bool, Principal | None]:
        """The MCP endpoint's door for every method: 404 elsewhere, then _admit."""
        if urlsplit(self.path).path != ENDPOINT:
            self._refuse(404, "Not Found")
            return False, None
        return self._admit()

    # -- methods ---------------------------------------------------------------------------------

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/healthz":
            ok, _ = self._admit(needs_auth=False)
            if ok:
                self._send(200, {"status": "ok"})
            return
        if path == "/readyz":
            ok, _ = self._admit(needs_auth=False)
            if ok and self.gateway.ready():
                self._send(200, {"status": "ready"})
            elif ok:  # why is on the gateway's stderr: the database's address is not for anyone who asks
                self._send(503, {"status": "not ready"}, {"Retry-After": "1"})
            return
        if self.gateway.oauth is not None and path in self.gateway.oauth.prm_paths():
            ok, _ = self._admit(needs_auth=False)  # public: it is how a client finds where to log in
            if ok:
                self._send(200, self.gateway.oauth.metadata())
            return
        if path == "/status":
            ok, _ = self._admit()
            if ok:
                self._send(200, self.gateway.status())
            return
        ok, principal = self._admit_to_endpoint()
        if not ok:
            return
        session_id = self.headers.get("Mcp-Session-Id")
        if not session_id:
            self._send(405, None, {"Allow": "POST, DELETE"})
            return
        session = self.gateway.find_host_session(session_id, principal)
        if session is None:
            self._refuse(404, "Session not found")
            return
        stream_id, _, seen = (self.headers.get("Last-Event-ID") or "").rpartition("-")
        resumed = session.streams.get(stream_id)
        if resumed is not None and seen.isdigit():
            self._start_stream({})
            self._pump(resumed, stream_id, int(seen), time.monotonic() + REPLY_SECONDS)
            return
        self._session_stream(session, self.gateway.stopped)

    def do_DELETE(self) -> None:
        ok, principal = self._admit_to_endpoint()
        if not ok:
            return
        session_id = self.headers.get("Mcp-Session-Id") or ""
        if self.gateway.find_host_session(session_id, principal) is None:
            self._refuse(404, "Session not found")
            return
        self.gateway.end_host_session(session_id, forget=True)
        self._send(200, None)

    def do_POST(self) -> None:
        peer = HTTP_PEER.set((str(self.client_address[0]), int(self.client_address[1])))
        try:
            self._post()
        finally:
            HTTP_PEER.reset(peer)

    def _post(self) -> None:
        ok, principal = self._admit_to_endpoint()
        if not ok:
            return
        message = self._read_message()
        if message is None:
            return
        gateway = self.gateway
        kind = jsonrpc.kind_of(message)
        method = message.get("method")
        session_id = self.headers.get("Mcp-Session-Id")
        params = params_of(message)
        meta = params.get("_meta")
        modern = isinstance(meta, dict) and "io.modelcontextprotocol/protocolVersion" in meta
        header_version = (self.headers.get("MCP-Protocol-Version") or "").strip()
        if kind == "request" and not session_id and (modern or header_version in MODERN_VERSIONS):
            problem = self._modern_problem(message, header_version)
            if problem is not None:
                self._refuse(400, problem[1], problem[0], msg_id=request_id(message), data=problem[2])
                return
            modern = True
        extra: dict[str, str] = {}
        stateless = None
        session: HostSession | None = None  # initialize-era session of the request (not initialize's own)
        if session_id:
            session = gateway.find_host_session(session_id, principal)
            if session is None:
                self._refuse(
                    404,
                    "Session not found: it ended, expired, or its server state was lost with the "
                    "gateway replica that held it; send initialize to start a new session",
                    msg_id=request_id(message),
                )
                return
            connection = session.connection
        elif kind == "request" and method == "initialize":
            try:
                opened = gateway.open_host_session(principal)
            except Refused as exc:
                self._refuse(exc.status, exc.message, headers={"Retry-After": "1"}, msg_id=request_id(message))
                return
            extra[SESSION_HEADER] = opened[0]  # sent only with a result: a refused initialize starts no session
            connection = opened[1].connection
        elif modern or kind != "request":
            connection = stateless = gateway.stateless_connection(principal)
        else:
            self._refuse(
                400,
                "Bad Request: no Mcp-Session-Id; send initialize first (MCP up to 2025-11-25) or put "
                "the protocol version in the request's _meta (2026-07-28)",
                msg_id=request_id(message),
            )
            return
        try:
            if kind != "request":  # a notification, or the client's answer to our request
                connection.handle(message, lambda reply: None)
                self._send(202, None, extra)
                return
            if modern and method in REMOVED:
                self._refuse(
                    404,
                    f"Method not found: {method} (removed in 2026-07-28)",
                    jsonrpc.METHOD_NOT_FOUND,
                    msg_id=request_id(message),
                )
                return
            listening = gateway.listen_stream(connection) if method == OPEN_ENDED else contextlib.nullcontext()
            opened_id = extra.get(SESSION_HEADER)  # set by initialize only

            def settle(reply: JSONObject) -> None:
                if opened_id is not None and "result" not in reply:
                    gateway.end_host_session(opened_id)

            with listening, gateway.in_use(session):
                answered = self._answer(
                    connection,
                    message,
                    extra,
                    modern=modern and not session_id,
                    session=session,
                    alone=stateless is not None,
                    settle=settle,
                )
            if opened_id is not None and answered is None:  # the host went away before its reply
                gateway.end_host_session(opened_id)
        finally:
            if stateless is not None:
                stateless.close()

    def _modern_problem(self, message: JSONObject, header_version: str) -> tuple[int, str, JSON] | None:
        """What makes a 2026-07-28 request malformed (basic/index.mdx _meta; transports, Server
        Validation): (JSON-RPC code, message, data), answered with 400; None when it is well formed."""
        method = message["method"]
        params = params_of(message)
        stated = params.get("_meta")
        meta: JSONObject = stated if isinstance(stated, dict) else {}
        version = meta.get(META + "protocolVersion")
        if not isinstance(version, str):
            return jsonrpc.INVALID_PARAMS, f"missing _meta['{META}protocolVersion']", None
        if header_version != version:
            return (
                jsonrpc.HEADER_MISMATCH,
                (f"Header mismatch: MCP-Protocol-Version {header_version or '(missing)'} does not match the body's {version}"),
                None,
            )
        if version not in MODERN_VERSIONS:
            return (
                jsonrpc.UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                {"supported": list(MODERN_VERSIONS + LEGACY_VERSIONS), "requested": version},
            )
        if not isinstance(meta.get(META + "clientCapabilities"), dict):
            return jsonrpc.INVALID_PARAMS, f"missing _meta['{META}clientCapabilities']", None
        header_method = (self.headers.get("Mcp-Method") or "").strip()
        if header_method != method:
            return (
                jsonrpc.HEADER_MISMATCH,
                (f"Header mismatch: Mcp-Method {header_method or '(missing)'} does not match the body's {method}"),
                None,
            )
        field = NAMED.get(method)
        if field and isinstance(params.get(field), str):
            header_name = _decoded(self.headers.get("Mcp-Name"))
            if header_name != params[field]:
                return (
                    jsonrpc.HEADER_MISMATCH,
                    (f"Header mismatch: Mcp-Name {header_name!r} does not match the body's {field} {params[field]!r}"),
                    None,
                )
        return None

    def _read_message(self) -> JSONObject | None:
        # Where a message ends must be read the way any proxy in front reads it, or the rest of a
        # body becomes a request of its own (request smuggling, RFC 9112 6.1 and 6.3). The parser
        # refuses a Content-Length that is not one number (400); on top of it: no
        # Transfer-Encoding (this endpoint reads none). _refuse closes the connection.
        if self.headers.get("Transfer-Encoding") is not None:
            self._refuse(501, "Not Implemented: Transfer-Encoding; send the message with a Content-Length")
            return None
        length_header = self.headers.get("Content-Length")
        if length_header is None:
            self._refuse(411, "Length Required")
            return None
        if int(length_header) > MAX_BODY_BYTES:
            self._refuse(413, f"Payload Too Large: at most {MAX_BODY_BYTES} bytes per message")
            return None
        body = self.read_body()  # within the request's deadline (replies.Arrivals cuts a late one off)
        self.arrivals.arrived(self)
        if self.late:
            self.close_connection = True
            return None  # cut off: nobody is left to answer
        try:
            message = json.loads(body)
        except RecursionError:  # arrays nested a million deep: the parser gives up
            self._refuse(400, f"Parse error: JSON nested more than {MAX_MESSAGE_DEPTH} levels deep", jsonrpc.PARSE_ERROR)
            return None
        except ValueError:
            self._refuse(400, "Parse error: not JSON", jsonrpc.PARSE_ERROR)
            return None
        try:
            if not isinstance(message, dict):
                raise ProtocolError("one JSON-RPC message per POST")
            if (
                jsonrpc.kind_of(message) != "request"
                and body.count(b"[") + body.count(b"{") > MAX_MESSAGE_DEPTH
                and nesting_depth(message, MAX_MESSAGE_DEPTH + 1) > MAX_MESSAGE_DEPTH
            ):  # a request: too_deep
                raise ProtocolError(f"a message nested more than {MAX_MESSAGE_DEPTH} levels deep")
        except ProtocolError as exc:
            self._refuse(400, exc.message)
            return None
        return message


def _decoded(value: str | None) -> str | None:
    """A header value as sent: surrounding whitespace is not part of it (RFC 9110 5.5), and the
    =?base64?...?= form carries what a header cannot (2026-07-28 transports, Value Encoding)."""
    if value is None:
        return None
    value = value.strip()
    if value.startswith("=?base64?") and value.endswith("?="):
        import base64
        import binascii

        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    return value


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # hosts connecting at once are queued, not reset
    admission: Admission

    def process_request(self, request: Any, client_address: Any) -> None:
        """A thread per connection, from the pending pool until a request of it is admitted
        (admission.py): the pool bounds the threads that connections nobody vouches for hold."""
        self.admission.connected(request)
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread started (out of threads)
            self.admission.closed(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.admission.closed(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A peer that hung up (a load balancer's health check resets its connection) is not an
        error worth a traceback; anything else still gets socketserver's report."""
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


def serve(
    toolbox: Toolbox,
    address: str,
    *,
    idle_seconds: float = IDLE_SECONDS,
    max_connections: int = MAX_CONNECTIONS,
    request_seconds: float = REQUEST_SECONDS,
    max_pending: int = MAX_PENDING,
    pending_seconds: float = PENDING_SECONDS,
    log: Callable[[str], None] | None = None,
) -> None:
    """Serve until SIGINT, SIGTERM or SIGHUP; then end sessions and stop the upstream servers (exit 0)."""
    host, port = parse_address(address)
    try:
        gateway = HttpGateway(toolbox, host, port, idle_seconds=idle_seconds)
    except LlmcError:
        toolbox.close()
        raise
    arrivals = Arrivals()
    admission = Admission(max_connections, max_pending, pending_seconds)
    handler = type(
        "GatewayHandler",
        (Handler,),
        {"gateway": gateway, "timeout": request_seconds, "arrivals": arrivals, "admission": admission},
    )
    server_class: type[_Server] = _Server
    if ":" in host:
        server_class = type("_Server6", (_Server,), {"address_family": socket.AF_INET6})
    try:
        httpd = server_class((host, port), handler)
    except OSError as exc:
        gateway.close()
        from llmc_cli.errors import ConnectionFailed

        raise ConnectionFailed(f"cannot listen on {address}: {exc.strerror or exc}") from None
    httpd.admission = admission
    bound = httpd.server_address[1]
    shown = f"[{host}]" if ":" in host else host
    if log:
        mode = gateway.auth_mode()
        if mode == "none":
            mode = (
                "none, loopback only"
                if toolbox.profile.profile.serve.auth == "none"
                else 'none: any local process may call; add a principal, or say [serve] auth = "none"'
            )
        log(f"profile {toolbox.profile.name}: http://{shown}:{bound}{ENDPOINT} (inbound auth: {mode})")
    threading.Thread(target=gateway.expire_idle, daemon=True, name="llmc-gateway-idle").start()
    gateway.start_sharing(log or (lambda message: print(f"llmc serve: {message}", file=sys.stderr, flush=True)))
    threading.Thread(target=arrivals.run, daemon=True, name="llmc-gateway-arrivals").start()

    signalled = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        if not signalled.is_set():  # once: a repeated signal changes nothing
            signalled.set()
            threading.Thread(target=httpd.shutdown, daemon=True).start()

    for signum in interrupts.SIGNAL_EXIT_CODES:  # SIGHUP too: a closed terminal must not orphan the upstreams
        signal.signal(signum, stop)
    try:
        httpd.serve_forever(poll_interval=0.5)
    finally:
        arrivals.stop()
        httpd.server_close()
        gateway.close()
        if signalled.is_set():
            interrupts.ignore_further()
