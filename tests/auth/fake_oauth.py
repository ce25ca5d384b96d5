"""A small, real OAuth 2.1 authorization server and protected MCP resource on 127.0.0.1, for the
auth tests. It checks what a real one checks (PKCE S256, redirect URI, resource, client
authentication, refresh token rotation and revocation) and records every request.

Layout (one port): PRM at /.well-known/oauth-protected-resource/mcp, the authorization server's
issuer is BASE/as (metadata at /.well-known/oauth-authorization-server/as), the MCP endpoint is
/mcp. The MCP endpoint answers JSON-RPC with a tiny MCP server: initialize, tools/list,
tools/call of `whoami`; `server/discover` gets "method not found" (a legacy-era server).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

DEFAULTS: dict[str, Any] = {
    "resource": None,  # PRM resource; None = the MCP URL
    "metadata_issuer": None,  # issuer inside the AS metadata; None = the real one
    "pkce_methods": ["S256"],  # None = not advertised
    "expires_in": 3600,
    "scopes_supported": ["mcp:read"],
    "required_scope": "mcp:read",  # needed by tools/list
    "call_scope": None,  # extra scope needed by tools/call (403 insufficient_scope without it)
    "iss_in_redirect": None,  # None: no iss; "issuer": the right one; any other string: that
    "iss_supported": False,
    "registration": True,
    "auth_methods": ["none"],
    "clients": {},  # pre-registered: client_id -> secret
    "grant_only": None,  # grant this scope whatever was asked (a server that never steps up)
    "issuer_path": "/as",  # change it to migrate the resource to another authorization server
}


class FakeOAuthServer:
    def __init__(self, **options: Any) -> None:
        unknown = set(options) - set(DEFAULTS)
        assert not unknown, unknown
        self.options = {**DEFAULTS, **options}
        self.requests: list[dict[str, Any]] = []
        self.clients: dict[str, dict[str, Any]] = {k: {"secret": v} for k, v in self.options["clients"].items()}
        self.codes: dict[str, dict[str, Any]] = {}
        self.access: dict[str, dict[str, Any]] = {}
        self.refresh: dict[str, dict[str, Any]] = {}
        self.issued: list[str] = []  # every token value handed out, to look for leaks
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    def __enter__(self) -> FakeOAuthServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def mcp_url(self) -> str:
        return f"{self.base}/mcp"

    @property
    def issuer(self) -> str:
        return self.base + self.options["issuer_path"]

    def paths(self, method: str | None = None) -> list[str]:
        return [r["path"] for r in self.requests if method is None or r["method"] == method]

    def grants(self) -> list[str]:
        return [r["form"].get("grant_type", "") for r in self.requests if r["path"].endswith("/token")]

    def revoke_refresh_tokens(self) -> None:
        with self.lock:
            self.refresh.clear()

    def expire_access_tokens(self) -> None:
        with self.lock:
            for entry in self.access.values():
                entry["expires_at"] = 0

    # -- token bookkeeping ------------------------------------------------------------------------

    def _issue(self, client_id: str, scope: str, resource: str) -> dict[str, Any]:
        access, refresh = "at-" + secrets.token_urlsafe(16), "rt-" + secrets.token_urlsafe(16)
        scope = self.options["grant_only"] or scope
        expires_in = self.options["expires_in"]
        self.access[access] = {"scope": scope, "expires_at": time.time() + expires_in, "resource": resource}
        self.refresh[refresh] = {"client_id": client_id, "scope": scope, "resource": resource}
        self.issued += [access, refresh]
        return {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": expires_in,
            "refresh_token": refresh,
            "scope": scope,
        }


def _handler(fake: FakeOAuthServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _reply(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            if body is not None:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _record(self, form: dict[str, str], body: Any = None) -> None:
            parts = urlsplit(self.path)
            with fake.lock:
                fake.requests.append(
                    {
                        "method": self.command,
                        "path": parts.path,
                        "query": dict(parse_qsl(parts.query)),
                        "form": form,
                        "json": body,
                        "headers": dict(self.headers),
                    }
                )

        def do_GET(self) -> None:
            o = fake.options
            parts = urlsplit(self.path)
            query = dict(parse_qsl(parts.query))
            self._record({})
            if parts.path == "/.well-known/oauth-protected-resource/mcp":
                prm: dict[str, Any] = {"resource": o["resource"] or fake.mcp_url, "authorization_servers": [fake.issuer]}
                if o["scopes_supported"] is not None:
                    prm["scopes_supported"] = o["scopes_supported"]
                return self._reply(200, prm)
            asp = o["issuer_path"]
            if parts.path == "/.well-known/oauth-authorization-server" + asp:
                meta: dict[str, Any] = {
                    "issuer": o["metadata_issuer"] or fake.issuer,
                    "authorization_endpoint": f"{fake.issuer}/authorize",
                    "token_endpoint": f"{fake.issuer}/token",
                    "response_types_supported": ["code"],
                    "token_endpoint_auth_methods_supported": o["auth_methods"],
                    "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
                    "authorization_response_iss_parameter_supported": o["iss_supported"],
                }
                if o["pkce_methods"] is not None:
                    meta["code_challenge_methods_supported"] = o["pkce_methods"]
                if o["registration"]:
                    meta["registration_endpoint"] = f"{fake.issuer}/register"
                return self._reply(200, meta)
            if parts.path == asp + "/authorize":
                client = fake.clients.get(query.get("client_id", ""))
                redirect = query.get("redirect_uri", "")
                if client is None or (client.get("redirect_uris") and redirect not in client["redirect_uris"]):
                    return self._reply(400, {"error": "invalid_request", "error_description": "unknown client or redirect"})
                if query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
                    return self._reply(400, {"error": "invalid_request", "error_description": "PKCE S256 required"})
                code = "code-" + secrets.token_urlsafe(12)
                fake.codes[code] = {**query}
                back = {"code": code, "state": query.get("state", "")}
                if o["iss_in_redirect"] is not None:
                    back["iss"] = fake.issuer if o["iss_in_redirect"] == "issuer" else o["iss_in_redirect"]
                return self._reply(302, None, {"Location": f"{redirect}?{urlencode(back)}"})
            if parts.path == "/mcp":
                return self._reply(405)  # no standalone SSE stream
            self._reply(404, {"error": "not_found"})
            return None

        def do_DELETE(self) -> None:
            self._reply(405)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode()
            path = urlsplit(self.path).path
            asp = fake.options["issuer_path"]
            if path == asp + "/register":
                body = json.loads(raw)
                self._record({}, body)
                client_id = "dyn-" + secrets.token_urlsafe(8)
                fake.clients[client_id] = {"redirect_uris": body.get("redirect_uris", []), "secret": None}
                return self._reply(
                    201,
                    {
                        "client_id": client_id,
                        "redirect_uris": body.get("redirect_uris", []),
                        "token_endpoint_auth_method": "none",
                    },
                )
            if path == asp + "/token":
                form = dict(parse_qsl(raw))
                self._record(form)
                return self._token(form)
            if path == "/mcp":
                body = json.loads(raw or "null")
                self._record({}, body)
                return self._mcp(body)
            self._reply(404, {"error": "not_found"})
            return None

        def _client_ok(self, form: dict[str, str]) -> str | None:
            header = self.headers.get("Authorization", "")
            if header.startswith("Basic "):
                client_id, _, secret = base64.b64decode(header[6:]).decode().partition(":")
                client_id, secret = unquote(client_id), unquote(secret)
            else:
                client_id, secret = form.get("client_id", ""), form.get("client_secret")
            client = fake.clients.get(client_id)
            if client is None or (client.get("secret") and client["secret"] != secret):
                return None
            return client_id

        def _token(self, form: dict[str, str]) -> None:
            client_id = self._client_ok(form)
            if client_id is None:
                return self._reply(401, {"error": "invalid_client"})
            grant = form.get("grant_type")
            with fake.lock:
                if grant == "authorization_code":
                    code = fake.codes.pop(form.get("code", ""), None)
                    verifier = form.get("code_verifier", "")
                    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
                    if (
                        code is None
                        or code["client_id"] != client_id
                        or code["code_challenge"] != challenge
                        or code["redirect_uri"] != form.get("redirect_uri")
                        or code.get("resource") != form.get("resource")
                    ):
                        return self._reply(400, {"error": "invalid_grant"})
                    return self._reply(200, fake._issue(client_id, code.get("scope", ""), form.get("resource", "")))
                if grant == "refresh_token":
                    entry = fake.refresh.pop(form.get("refresh_token", ""), None)  # rotation: one use each
                    if entry is None or entry["client_id"] != client_id:
                        return self._reply(400, {"error": "invalid_grant", "error_description": "refresh token revoked"})
                    return self._reply(200, fake._issue(client_id, entry["scope"], entry["resource"]))
                if grant == "client_credentials":
                    return self._reply(200, fake._issue(client_id, form.get("scope", ""), form.get("resource", "")))
            self._reply(400, {"error": "unsupported_grant_type"})
            return None

        def _mcp(self, body: Any) -> None:
            o = fake.options
            method = body.get("method") if isinstance(body, dict) else None
            prm = f"{fake.base}/.well-known/oauth-protected-resource/mcp"
            token = (
                self.headers.get("Authorization", "")[7:] if self.headers.get("Authorization", "").startswith("Bearer ") else ""
            )
            entry = fake.access.get(token)
            if entry is None or entry["expires_at"] <= time.time():
                challenge = f'Bearer resource_metadata="{prm}", scope="{o["required_scope"]}"'
                return self._reply(401, {"error": "invalid_token"}, {"WWW-Authenticate": challenge})
            granted = entry["scope"].split()
            needed = [o["required_scope"]] + ([o["call_scope"]] if o["call_scope"] and method == "tools/call" else [])
            if not all(s in granted for s in needed):
                challenge = f'Bearer error="insufficient_scope", scope="{" ".join(needed)}", resource_metadata="{prm}"'
                return self._reply(403, {"error": "insufficient_scope"}, {"WWW-Authenticate": challenge})
            if "id" not in body:
                return self._reply(202)
            if method == "initialize":
                result: Any = {
                    "protocolVersion": body["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "fake-protected", "version": "1"},
                }
            elif method == "tools/list":
                result = {"tools": [{"name": "whoami", "inputSchema": {"type": "object"}}]}
            elif method == "tools/call":
                result = {"content": [{"type": "text", "text": f"scopes: {entry['scope']}"}]}
            elif method == "ping":
                result = {}
            else:
                return self._reply(
                    200, {"jsonrpc": "2.0", "id": body["id"], "error": {"code": -32601, "message": "Method not found"}}
                )
            self._reply(200, {"jsonrpc": "2.0", "id": body["id"], "result": result})
            return None

    return Handler
