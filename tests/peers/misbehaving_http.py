"""A legacy-era (2025-11-25) Streamable HTTP server that misbehaves on purpose, for the transport
tests. The first path segment picks the misbehaviour of `tools/call` (and friends):

  /ok/mcp          behaves (the control)
  /500/mcp         tools/call -> 500 with a text body; /late500/mcp -> the same after 1.5 s
  /invalid-json/mcp  tools/call -> 200 application/json that is no JSON
  /html/mcp        tools/call -> 200 text/html; /html400/mcp -> 400 text/html
  /hang/mcp        tools/call and notifications/cancelled -> never answer (bounded at 60 s)
  /resume/mcp      tools/call -> SSE priming event (id, retry: 300) then closed; the reply comes
                   on GET with Last-Event-ID
  /cut/mcp         tools/call -> SSE stream closed early without event ids (not resumable)
  /expire/mcp      the first tools/list of every odd-numbered session -> 404 (session expired),
                   so a client that initializes again gets an even-numbered one that works
  /modern-error/mcp  server/discover -> 400 with a modern JSON-RPC error (-32022, no common version)
  /moved/mcp       307 to /ok/mcp (same origin); /moved-away/mcp -> 307 to another origin
  /modern-tools/mcp  a 2026-07-28 server listing a valid tool and one with an invalid
                   x-mcp-header annotation (which clients must leave out)
  /huge-json/mcp   tools/call -> 200 application/json body of HUGE bytes without Content-Length;
                   /huge-declared/mcp -> a Content-Length of 10 GB (then a bounded body)
  /endless-line/mcp  tools/call -> SSE whose `data:` line never ends (HUGE bytes, then closed)
  /endless-event/mcp tools/call -> SSE event of short `data:` lines that never ends (HUGE bytes)
  /sse-endless/sse legacy HTTP+SSE: the endpoint event, then an event that never ends (HUGE bytes)
  /oauth-huge/mcp  every POST -> 401 naming resource metadata whose JSON never ends (HUGE bytes)
  /sse-elsewhere/sse  legacy HTTP+SSE whose endpoint event points to another origin
  /sse-silent/sse  legacy HTTP+SSE that never sends its endpoint event
  /drip-json/mcp   tools/call -> 200 application/json whose body comes one byte every DRIP s
  /drip-head/mcp   tools/call -> the reply's head itself one byte every DRIP s (then a body)
  /drip-sse/mcp    tools/call -> SSE whose comment lines come one byte every DRIP s, no event
  /endless-trailer/mcp  tools/call -> a whole chunked JSON body, then one trailer field that
                   never ends (HUGE bytes); /many-trailers/mcp -> endless short trailer fields
(the dripping modes give up after DRIP_FOR s, or when the client hangs up)

GET /stats returns what the server saw (method, path, JSON-RPC method, selected headers, time).
Usage: python misbehaving_http.py --port N
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SEEN: list[dict[str, Any]] = []
SESSIONS: list[str] = []  # /expire/ sessions in order of creation
EXPIRED: set[str] = set()
PENDING: dict[str, Any] = {}  # resume: last event id -> the reply to send on reconnection
LOCK = threading.Lock()
RETRY_MS = 300
DRIP, DRIP_FOR = 0.5, 120.0
HUGE = 4 * 1024 * 1024  # what the "endless" modes send before they give up: far over a test's lowered limit
TOOL = {
    "name": "echo",
    "description": "Echo a message.",
    "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}},
}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    # -- helpers ------------------------------------------------------------------------------

    def _record(self, rpc: dict[str, Any] | None) -> None:
        keep = (
            "mcp-session-id",
            "mcp-protocol-version",
            "last-event-id",
            "accept",
            "x-custom",
            "authorization",
            "mcp-method",
            "mcp-name",
        )
        with LOCK:
            SEEN.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "t": time.monotonic(),
                    "rpc": (rpc or {}).get("method"),
                    "id": (rpc or {}).get("id"),
                    "headers": {k: v for k, v in ((k.lower(), v) for k, v in self.headers.items()) if k in keep},
                }
            )

    def _send(self, status: int, body: bytes = b"", ctype: str | None = None, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, value: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(value).encode(), "application/json", headers)

    def _sse_start(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()

    def _event(self, text: str) -> None:
        self.wfile.write(text.encode())
        self.wfile.flush()

    def _stream(self, head: bytes, filler: bytes) -> None:
        """`head`, then `filler` repeated up to HUGE bytes; the client hanging up ends it early."""
        try:
            self.wfile.write(head)
            for _ in range(HUGE // len(filler)):
                self.wfile.write(filler)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def _drip(self, data: bytes) -> None:
        """`data` one byte every DRIP seconds (at most DRIP_FOR seconds; a hang-up ends it)."""
        until = time.monotonic() + DRIP_FOR
        try:
            for byte in data:
                if time.monotonic() > until:
                    break
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(DRIP)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def _trailers(self, body: bytes, filler: bytes) -> None:
        """A whole chunked body, then trailer bytes (`filler` repeated) up to HUGE."""
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        chunk = b"%x\r\n%s\r\n0\r\n" % (len(body), body)
        self._stream(head + chunk + (b"X-Trailer: " if filler == b"a" * 65536 else b""), filler)

    def _moved(self) -> bool:
        if self.mode == "moved":
            self._send(307, headers={"Location": "/ok/mcp"})
        elif self.mode == "moved-away":
            self._send(307, headers={"Location": "http://elsewhere.invalid:9/mcp"})
        else:
            return False
        return True

    @property
    def mode(self) -> str:
        return self.path.strip("/").split("/")[0]

    # -- verbs --------------------------------------------------------------------------------

    def do_GET(self) -> None:
        if self.path == "/stats":
            with LOCK:
                return self._json(SEEN)
        self._record(None)
        if self._moved():
            return None
        if self.mode == "sse-elsewhere":
            self._sse_start()
            self._event("event: endpoint\ndata: http://elsewhere.invalid:9/messages\n\n")
            time.sleep(2)
            return None
        if self.mode == "sse-endless":
            self._sse_start()
            self._event("event: endpoint\ndata: /sse-endless/messages\n\n")
            self._stream(b"event: message\ndata: ", b"x" * 65536)
            return None
        if self.mode == "oauth-huge":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            self.end_headers()
            self._stream(b'{"resource": "', b"x" * 65536)
            return None
        if self.mode == "sse-silent":
            self._sse_start()
            for _ in range(100):  # bounded: 10 s of keep-alive comments, no endpoint
                self._event(": waiting\n\n")
                time.sleep(0.1)
            return None
        last = self.headers.get("Last-Event-ID")
        with LOCK:
            reply = PENDING.pop(last, None) if last else None
        if reply is None:
            return self._send(405, b"Method Not Allowed", "text/plain")
        self._sse_start()
        self._event(f"id: {last}-r\nevent: message\ndata: {json.dumps(reply)}\n\n")
        return None

    def do_DELETE(self) -> None:
        self._record(None)
        self._send(200)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
        try:
            rpc = json.loads(raw)
        except ValueError:
            self._record(None)
            return self._json({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}, 400)
        self._record(rpc)
        if self._moved():
            return None
        method, rid, mode = rpc.get("method"), rpc.get("id"), self.mode
        if mode == "sse-endless":  # a legacy server: no POST on its stream's URL (so the client falls back to
            # HTTP+SSE), and messages answered on the stream (stuck in the endless event), never here
            return self._send(202 if self.path.endswith("/messages") else 405)
        if mode == "oauth-huge":
            metadata = f"http://{self.headers['Host']}/oauth-huge/.well-known/oauth-protected-resource"
            return self._send(401, b"", "text/plain", {"WWW-Authenticate": f'Bearer resource_metadata="{metadata}"'})
        session = self.headers.get("Mcp-Session-Id")
        if mode == "modern-tools":
            if method == "server/discover":
                return self._json(
                    {"jsonrpc": "2.0", "id": rid, "result": {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}}
                )
            bad = {
                "name": "bad",
                "inputSchema": {
                    "type": "object",
                    "properties": {"xs": {"type": "array", "items": {"type": "string", "x-mcp-header": "X"}}},
                },
            }
            return self._json({"jsonrpc": "2.0", "id": rid, "result": {"tools": [TOOL, bad]}})
        if method == "server/discover":
            if mode == "modern-error":
                return self._json(
                    {
                        "jsonrpc": "2.0",
                        "id": rid,
                        "error": {
                            "code": -32022,
                            "message": "Unsupported protocol version",
                            "data": {"supported": ["2099-01-01"], "requested": "2026-07-28"},
                        },
                    },
                    400,
                )
            return self._send(400)  # a legacy server: 400, empty body
        if method == "initialize":
            session = uuid.uuid4().hex
            if mode == "expire":
                with LOCK:
                    SESSIONS.append(session)
            return self._json(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "result": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": f"misbehaving-{mode}", "version": "0"},
                    },
                },
                headers={"Mcp-Session-Id": session},
            )
        if not session:
            return self._json({"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": "no session"}}, 400)
        if mode == "hang" and method == "notifications/cancelled":
            time.sleep(60)
            return None
        if rid is None or "method" not in rpc:
            return self._send(202)
        if method == "tools/list":
            if mode == "expire" and session not in EXPIRED and session in SESSIONS[::2]:
                EXPIRED.add(session)
                return self._json({"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "Session not found"}}, 404)
            return self._json({"jsonrpc": "2.0", "id": rid, "result": {"tools": [TOOL]}})
        if method != "tools/call":
            return self._json({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
        result = {
            "jsonrpc": "2.0",
            "id": rid,
            "result": {
                "content": [{"type": "text", "text": str((rpc.get("params") or {}).get("arguments", {}).get("message", ""))}]
            },
        }
        if mode == "late500":
            time.sleep(1.5)
        if mode in ("500", "late500"):
            return self._send(500, b"Internal Server Error: database on fire", "text/plain")
        if mode == "invalid-json":
            return self._send(200, b"{this is not json", "application/json")
        if mode in ("html", "html400"):
            return self._send(200 if mode == "html" else 400, b"<html><body><h1>Proxy error</h1></body></html>", "text/html")
        if mode == "hang":
            time.sleep(60)
            return None
        if mode in ("huge-json", "huge-declared"):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if mode == "huge-declared":
                self.send_header("Content-Length", str(10 * 1024**3))
            else:
                self.send_header("Connection", "close")  # no length: the body ends when the connection does
            self.end_headers()
            return self._stream(
                b'{"jsonrpc": "2.0", "id": %d, "result": {"content": [{"type": "text", "text": "' % rid, b"x" * 65536
            )
        if mode == "drip-json":
            body = json.dumps(result).encode()
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
            return self._drip(body)
        if mode == "drip-head":
            body = json.dumps(result).encode()
            return self._drip(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
            )
        if mode == "drip-sse":
            self._sse_start()
            return self._drip(b": " + b"." * 1000 + b"\n")
        if mode in ("endless-trailer", "many-trailers"):
            body = json.dumps(result).encode()
            return self._trailers(body, b"a" * 65536 if mode == "endless-trailer" else b"X-T: a\r\n" * 1024)
        if mode == "endless-line":
            self._sse_start()
            return self._stream(b"event: message\ndata: ", b"x" * 65536)
        if mode == "endless-event":
            self._sse_start()
            return self._stream(b"event: message\n", b"data: " + b"x" * 1018 + b"\n")
        if mode == "resume":
            event_id = uuid.uuid4().hex
            with LOCK:
                PENDING[event_id] = result
            self._sse_start()
            self._event(f"id: {event_id}\nretry: {RETRY_MS}\ndata: \n\n")
            return None  # the connection closes: the client must come back with GET + Last-Event-ID
        if mode == "cut":
            self._sse_start()
            progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": rid, "progress": 1}}
            self._event(f"event: message\ndata: {json.dumps(progress)}\n\n")
            return None
        self._json(result)
        return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
