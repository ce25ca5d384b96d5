"""The gateway over Streamable HTTP (2025-11-25 and 2026-07-28 basic/transports.mdx): one
endpoint, /mcp, plus GET /healthz (liveness: the process answers), GET /readyz (readiness: and
its state database, when it has one, too) and GET /status (the asking principal's own sessions
and servers).

- Binds 127.0.0.1 unless told otherwise; a non-loopback address needs principals (tokens).
- Once the profile has principals (`[serve.principals]`, even empty) or OAuth, or says
  `[serve] auth = "required"`, every request needs a token (or, with `--tls-client-ca`, a client
  certificate a principal names): no principal left means nobody.
- Admission (admission.py): an admitted request counts against its principal's share and the
  gateway's; connections that show no token get a short deadline (protocol.py).
- DNS rebinding: the Host header must name a loopback host (or one the profile allows), and an
  Origin header, when a browser sends one, a loopback origin (or one the profile allows): 403.
- OAuth discovery and registration paths of a gateway without OAuth answer 404 with an OAuth
  error naming static bearer tokens (clients that assume OAuth stop there, clearly).
- Initialize era: `initialize` starts a session (Mcp-Session-Id, a random 256-bit id), later
  requests carry it (404 once it is gone), GET opens the session's stream for notifications,
  DELETE ends it; sessions idle longer than their limit are ended (hosts.py). A host that
  cancels its own request (notifications/cancelled) ends the response still open for it.
- 2026-07-28: no session; each POST is served on its own by a fresh connection.
- A tools/call is answered on an SSE stream when the client accepts one, so progress, logs and
  requests to the client (elicitation) travel before the result; other requests get JSON. A
  client that drops the stream cancels its request (2026-07-28).

What the handlers share is hosts.py's HttpGateway (no HTTP in it); how replies and streams are
written, replies.py's ReplyWriter, the handler's base class. A Handler answers one request on a
worker thread of asgi.py's app, which uvicorn serves (http_server.py).
"""

from __future__ import annotations

import contextlib
import json
import time
from urllib.parse import urlsplit

from llmc_cli.errors import ProtocolError
from llmc_cli.gateway.access import oauth_probe
from llmc_cli.gateway.admission import Refused
from llmc_cli.gateway.connection import HTTP_PEER, GatewayConnection
from llmc_cli.gateway.hosts import HttpGateway
from llmc_cli.gateway.modern import OPEN_ENDED, REMOVED, modern_problem, params_of
from llmc_cli.gateway.principals import Principal
from llmc_cli.gateway.replies import REPLY_SECONDS, ReplyWriter
from llmc_cli.gateway.sessions import HostSession
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.messages import JSON, JSONObject, RequestId, request_id
from llmc_cli.mcp.versions import MODERN_VERSIONS
from llmc_cli.model import MAX_MESSAGE_DEPTH, nesting_depth

ENDPOINT = "/mcp"
MAX_BODY_BYTES = 4 * 1024 * 1024
SESSION_HEADER = "Mcp-Session-Id"


class Handler(ReplyWriter):
    """One request to the gateway: routes, the door, which connection answers."""

    gateway: HttpGateway  # the app sets it on each (asgi.py)

    def _refuse(
        self,
        status: int,
        message: str,
        code: int = jsonrpc.INVALID_REQUEST,
        headers: dict[str, str] | None = None,
        msg_id: RequestId | None = None,
        data: JSON = None,
    ) -> None:
        # A refused host starts afresh on a new connection.
        self._send(status, jsonrpc.error(msg_id, code, message, data), {**(headers or {}), "Connection": "close"})

    def _admit(self, *, needs_auth: bool = True) -> tuple[bool, Principal | None]:
        """Host and Origin checks, then who is asking (access.py), then the principal's share of
        requests in flight (admission.py). Answers the refusal itself."""
        door = self.gateway.door
        try:
            door.check_origin(self.headers.get("Host"), self.headers.get("Origin"))
            if not needs_auth:
                return True, None  # a public page, answered at once: the connection stays among the pending
            principal = door.principal_of(self.headers.get("Authorization"), self.tls_subject(), self.arrived)
            self.admit(principal.name if principal else None, principal.max_requests if principal else 0)
        except Refused as exc:
            self._refuse(exc.status, exc.message, headers=exc.headers)
            return False, None
        return True, principal

    def _admit_to_endpoint(self) -> tuple[bool, Principal | None]:
        """The MCP endpoint's door for every method: 404 elsewhere, then _admit."""
        if urlsplit(self.path).path != ENDPOINT:
            self._refuse(404, "Not Found")
            return False, None
        return self._admit()

    def _public(self, path: str) -> bool:
        """Answer a page anyone may read (health, readiness, OAuth metadata or its absence);
        False: not one of them."""
        gateway = self.gateway
        oauth = gateway.door.oauth
        if path == "/healthz":
            page: tuple[int, JSONObject, dict[str, str]] = (200, {"status": "ok"}, {})
        elif path == "/readyz":  # why not is on the gateway's stderr: the database's address is not for anyone who asks
            page = (200, {"status": "ready"}, {}) if gateway.ready() else (503, {"status": "not ready"}, {"Retry-After": "1"})
        elif oauth is not None and path in oauth.prm_paths():
            page = (200, oauth.metadata(), {})  # public: it is how a client finds where to log in
        elif (probe := oauth_probe(path, oauth)) is not None:
            page = (404, probe, {"Cache-Control": "no-store"})
        else:
            return False
        if self._admit(needs_auth=False)[0]:
            self._send(*page)
        return True

    # -- methods ---------------------------------------------------------------------------------

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if self._public(path):
            return
        if path == "/status":
            ok, principal = self._admit()
            if ok:
                self._send(200, self.gateway.status(principal))
            return
        ok, principal = self._admit_to_endpoint()
        if not ok:
            return
        session_id = self.headers.get(SESSION_HEADER)
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
        session_id = self.headers.get(SESSION_HEADER) or ""
        if self.gateway.find_host_session(session_id, principal) is None:
            self._refuse(404, "Session not found")
            return
        self.gateway.end_host_session(session_id, forget=True, why="the host ended it")
        self._send(200, None)

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        if path != ENDPOINT and oauth_probe(path, None) is not None:
            self._public(path)  # a client's dynamic registration, where this gateway has none
            return
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
        kind = jsonrpc.kind_of(message)
        modern = self._era(message, kind)
        if modern is None:
            return
        found = self._connection_for(message, kind, principal, modern)
        if found is None:
            return
        connection, session, extra = found
        stateless = connection if session is None and SESSION_HEADER not in extra else None
        try:
            self._dispatch(connection, message, kind, modern, session, extra)
        finally:
            if stateless is not None:
                stateless.close()

    def _era(self, message: JSONObject, kind: str) -> bool | None:
        """Whether a request is a 2026-07-28 one (well formed, or refused here: None)."""
        meta = params_of(message).get("_meta")
        modern = isinstance(meta, dict) and "io.modelcontextprotocol/protocolVersion" in meta
        header_version = (self.headers.get("MCP-Protocol-Version") or "").strip()
        if kind == "request" and not self.headers.get(SESSION_HEADER) and (modern or header_version in MODERN_VERSIONS):
            problem = modern_problem(message, self.headers.get)
            if problem is not None:
                self._refuse(400, problem[1], problem[0], msg_id=request_id(message), data=problem[2])
                return None
            return True
        return False

    def _connection_for(
        self, message: JSONObject, kind: str, principal: Principal | None, modern: bool
    ) -> tuple[GatewayConnection, HostSession | None, dict[str, str]] | None:
        """Which connection answers: the session's, a new session's (initialize: its id in the
        extra headers), or one of its own (2026-07-28). None: refused here."""
        gateway = self.gateway
        session_id = self.headers.get(SESSION_HEADER)
        if session_id:
            session = gateway.find_host_session(session_id, principal)
            if session is None:
                self._refuse(
                    404,
                    "Session not found: it ended, expired, or its server state was lost with the "
                    "gateway replica that held it; send initialize to start a new session",
                    msg_id=request_id(message),
                )
                return None
            session.saw(message.get("method") if kind == "request" else None)
            return session.connection, session, {}
        if kind == "request" and message.get("method") == "initialize" and not modern:
            try:
                opened_id, opened = gateway.open_host_session(principal)
            except Refused as exc:
                self._refuse(exc.status, exc.message, headers=exc.headers, msg_id=request_id(message))
                return None
            return opened.connection, None, {SESSION_HEADER: opened_id}  # the id goes only with a result
        if modern or kind != "request":
            if modern:
                meta = params_of(message).get("_meta")
                gateway.log.request(principal.name if principal else None, meta if isinstance(meta, dict) else {}, "2026-07-28")
            return gateway.upstreams.stateless_connection(principal), None, {}
        self._refuse(
            400,
            "Bad Request: no Mcp-Session-Id; send initialize first (MCP up to 2025-11-25) or put "
            "the protocol version in the request's _meta (2026-07-28)",
            msg_id=request_id(message),
        )
        return None

    def _dispatch(
        self,
        connection: GatewayConnection,
        message: JSONObject,
        kind: str,
        modern: bool,
        session: HostSession | None,
        extra: dict[str, str],
    ) -> None:
        gateway = self.gateway
        method = message.get("method")
        if kind != "request":  # a notification, or the client's answer to our request
            connection.handle(message, lambda reply: None)
            if method == "notifications/cancelled" and session is not None:
                session.cancel(params_of(message).get("requestId"))  # its open response ends now
            self._send(202, None, extra)
            return
        if modern and method in REMOVED:
            self._refuse(
                404, f"Method not found: {method} (removed in 2026-07-28)", jsonrpc.METHOD_NOT_FOUND, msg_id=request_id(message)
            )
            return
        listening = gateway.listen_stream(connection) if method == OPEN_ENDED else contextlib.nullcontext()
        opened_id = extra.get(SESSION_HEADER)  # set by initialize only

        def settle(reply: JSONObject) -> None:
            if opened_id is not None and "result" not in reply:
                gateway.end_host_session(opened_id, why="initialize failed")

        with listening, gateway.in_use(session):
            answered = self._answer(connection, message, extra, modern=modern, session=session, settle=settle)
        if opened_id is not None and answered is None:  # the host went away before its reply
            gateway.end_host_session(opened_id, why="the host left during initialize")

    def _read_message(self) -> JSONObject | None:
        # Where the body ends was settled on the event loop (asgi.py: one Content-Length, no
        # Transfer-Encoding, within the limits and the request's deadline).
        return self._parse(self.body)

    def _parse(self, body: bytes) -> JSONObject | None:
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
