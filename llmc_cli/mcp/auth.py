"""OAuth 2.1 for remote MCP servers, as the spec's authorization pages define it (2025-03-26,
2025-11-25 and 2026-07-28 basic/authorization).

The HTTP transports stay small: they hold an `OAuth` object and consult it.

    header = auth.authorization_header()          # before each request: "Bearer ..." or None
    if status in (401, 403) and auth.on_unauthorized(status, www_authenticate):
        ...send the same request again...          # bounded here; False or AuthError otherwise

What happens behind that: protected resource metadata (RFC 9728: the `resource_metadata` of the
challenge, else the well-known paths), authorization server metadata (RFC 8414 / OpenID paths in
the spec's order, 2025-03-26 fallbacks for old servers), the `resource` and `issuer` checks,
client registration (profile, client ID metadata document, dynamic registration), authorization
code + PKCE S256 through a loopback listener with `state` and `iss` (RFC 9207) checks, refresh
before expiry, step-up on 403 insufficient_scope, client credentials for machines.

Tokens live in a TokenStore handed in from above (llmc_cli/store/tokens.py: the state
directory's oauth/, one 0600 file per authorization server and resource). No token, secret or authorization code is ever put into a message or an exception.
"""

from __future__ import annotations

import base64
import hashlib
import os
import queue
import re
import secrets
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from llmc_cli.errors import AuthError
from llmc_cli.mcp.stores import MemoryTokenStore, TokenStore
from llmc_cli.mcp.transports.base import max_message_bytes, too_large
from llmc_cli.model import OAuthSpec, ServerSpec

REFRESH_MARGIN = 60.0  # refresh an access token this many seconds before it expires
MAX_STEP_UPS = 2  # re-authorizations for 403 insufficient_scope per connection
MAX_LOGINS = 2  # fresh authorizations for 401 per connection
LOGIN_TIMEOUT = 300.0  # seconds to wait for the browser to come back
HTTP_TIMEOUT = 30.0
CLIENT_NAME = "llmc"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
_PARAM = re.compile(r'([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,"]+))')


# -- pure helpers ---------------------------------------------------------------------------------

def parse_www_authenticate(header: str | None) -> dict[str, str]:
    """Parameters of the Bearer challenge (RFC 6750 section 3, RFC 9728 section 5.1), lower-case
    names; {} when the header has no Bearer challenge."""
    match = re.search(r"(?i)(?:^|[\s,])bearer(?:\s|$)", header or "")
    if not match:
        return {}
    out: dict[str, str] = {}
    for name, quoted, token in _PARAM.findall(header[match.end():]):  # type: ignore[index]
        out.setdefault(name.lower(), re.sub(r"\\(.)", r"\1", quoted) if quoted else token)
    return out


def canonical_uri(url: str) -> str:
    """The canonical server URI (2025-11-25 Canonical Server URI): lower-case scheme and host, no
    fragment, no trailing slash."""
    p = urlsplit(url)
    return urlunsplit((p.scheme.lower(), p.netloc.lower(), p.path.rstrip("/"), p.query, ""))


def resource_matches(resource: str, server_url: str) -> bool:
    """Is the protected resource named by metadata this server? Same origin, and the server's path
    is the resource's path or below it (a root-level resource covers /mcp)."""
    r, s = urlsplit(canonical_uri(resource)), urlsplit(canonical_uri(server_url))
    if (r.scheme, r.netloc) != (s.scheme, s.netloc) or r.query:
        return False
    return s.path == r.path or s.path.startswith(r.path + "/")


def protected_resource_metadata_urls(server_url: str) -> list[str]:
    """RFC 9728 well-known URIs in the spec's order: path-aware first, then the root."""
    p = urlsplit(server_url)
    origin, path = f"{p.scheme}://{p.netloc}", p.path.rstrip("/")
    root = f"{origin}/.well-known/oauth-protected-resource"
    return [root + path, root] if path else [root]


def authorization_server_metadata_urls(issuer: str) -> list[str]:
    """RFC 8414 and OpenID Connect discovery URLs in the order of the spec."""
    p = urlsplit(issuer)
    origin, path = f"{p.scheme}://{p.netloc}", p.path.rstrip("/")
    if path:
        return [f"{origin}/.well-known/oauth-authorization-server{path}",
                f"{origin}/.well-known/openid-configuration{path}",
                f"{origin}{path}/.well-known/openid-configuration"]
    return [f"{origin}/.well-known/oauth-authorization-server", f"{origin}/.well-known/openid-configuration"]


def pkce_pair() -> tuple[str, str]:
    """(code_verifier, S256 code_challenge) as RFC 7636 defines them."""
    verifier = secrets.token_urlsafe(64)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _one_line(text: Any, limit: int = 200) -> str:
    return " ".join(str(text).split())[:limit]


def _is_loopback(url: str) -> bool:
    return (urlsplit(url).hostname or "").lower() in LOOPBACK_HOSTS


def public_view(record: dict[str, Any]) -> dict[str, Any]:
    """What `auth status` may show: never a token or a secret."""
    tokens = record.get("tokens") or {}
    expires_at = tokens.get("expires_at")
    return {
        "server": record.get("server"),
        "server_url": record.get("server_url"),
        "resource": record.get("resource"),
        "issuer": record.get("issuer"),
        "client_id": (record.get("client") or {}).get("client_id"),
        "registration": (record.get("client") or {}).get("source"),
        "scope": tokens.get("scope"),
        "has_access_token": bool(tokens.get("access_token")),
        "has_refresh_token": bool(tokens.get("refresh_token")),
        "expires_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires_at)) if expires_at else None,
        "expired": bool(expires_at and expires_at <= time.time()),
    }


# -- the flow -------------------------------------------------------------------------------------

@dataclass
class Discovery:
    resource: str  # sent as `resource` (RFC 8707)
    issuer: str  # the authorization server's identifier: expected `iss`, key of the store
    metadata: dict[str, Any]  # authorization server metadata (or the 2025-03-26 defaults)
    scopes_supported: list[str] | None  # from the protected resource metadata


class OAuth:
    """Authorization for one remote server, consulted by its HTTP transport."""

    def __init__(self, spec: ServerSpec, *, interactive: bool | None = None, open_browser: bool = True,
                 notify: Callable[[str], None] | None = None, store: TokenStore | None = None,
                 login_timeout: float = LOGIN_TIMEOUT) -> None:
        if not spec.url:
            raise AuthError(f"{spec.name}: OAuth needs a remote server (url)")
        self.name = spec.name
        self.url = spec.url
        self.server_url = canonical_uri(spec.url)
        self.settings = spec.oauth or OAuthSpec()
        if interactive is None:
            # A browser login needs a person at a terminal, or a BROWSER that can do it headlessly.
            interactive = bool(os.environ.get("BROWSER")) or (sys.stdin.isatty() and sys.stderr.isatty())
        self.interactive = interactive
        self.open_browser = open_browser
        self.notify = notify or (lambda message: print(message, file=sys.stderr, flush=True))
        self.store: TokenStore = store if store is not None else MemoryTokenStore()
        self.login_timeout = login_timeout
        # What to tell a user to run; an ad-hoc --url target (named "server") is logged in by URL.
        self.login_command = f"llmc auth login {spec.url if spec.name == 'server' else spec.name}"
        self._record: dict[str, Any] | None = None
        self._loaded = False
        self._step_ups = 0
        self._logins = 0
        self._http_client: Any = None
        # Requests may run on several threads: one authorization at a time, and a thread whose
        # token was replaced meanwhile just retries with the new one.
        self._lock = threading.RLock()
        self._sent = threading.local()
        self._refreshed_token: str | None = None

    @classmethod
    def for_spec(cls, spec: ServerSpec, store: TokenStore | None = None) -> "OAuth | None":
        """The auth a transport should use: none for a server with a static Authorization header."""
        if spec.kind != "remote" or any(k.lower() == "authorization" for k in spec.headers):
            return None
        return cls(spec, store=store)

    # -- the transport hooks ----------------------------------------------------------------------

    def authorization_header(self) -> str | None:
        with self._lock:
            if self._expiring():
                try:
                    self._refresh_shared()
                finally:
                    self.close()
                self._refreshed_token = ((self._load() or {}).get("tokens") or {}).get("access_token")
            self._sent.header = self._header()
            return self._sent.header

    def on_unauthorized(self, status: int, www_authenticate: str | None) -> bool:
        """True: authorized anew, send the request again. False: not an auth matter. Raises
        AuthError when authorization failed or the retry budget is spent."""
        if status not in (401, 403):
            return False
        with self._lock:
            current = self._header()
            if current and current != getattr(self._sent, "header", None):
                return True  # another thread authorized meanwhile
            try:
                return self._unauthorized(status, parse_www_authenticate(www_authenticate))
            finally:
                self.close()  # the HTTP client to the authorization server is needed only now

    def _unauthorized(self, status: int, challenge: dict[str, str]) -> bool:
        if status == 403:
            if challenge.get("error") != "insufficient_scope":
                return False
            if self._step_ups >= MAX_STEP_UPS:
                raise AuthError(f"{self.name}: still insufficient scope after {MAX_STEP_UPS} step-up authorizations"
                                f" (server asks for: {_one_line(challenge.get('scope', '?'))})")
            self._step_ups += 1
            granted = ((self._load() or {}).get("tokens") or {}).get("scope", "").split()
            wanted = list(dict.fromkeys(granted + challenge.get("scope", "").split()))
            self.authorize(challenge, wanted)
            return True
        if self._logins >= MAX_LOGINS:
            raise AuthError(f"{self.name}: the server still answers 401 after authorization")
        self._logins += 1
        record = self._load()
        discovery = self.discover(challenge.get("resource_metadata"))
        if record and record.get("issuer") != discovery.issuer:
            # The server moved to another authorization server: its tokens and clients are useless
            # (2026-07-28 client-registration, Authorization Server Binding).
            if (record.get("client") or {}).get("source") == "profile":
                raise AuthError(f"{self.name}: the authorization server changed from {record.get('issuer')} to"
                                f" {discovery.issuer}; the profile's client_id was issued by the old one: update"
                                f" [servers.{self.name}.oauth] and run `llmc auth logout {self.name}`")
            self.notify(f"llmc: {self.name}: the authorization server changed to {discovery.issuer}; registering again")
            self.store.delete(self.server_url)
            self._record = record = None
        if self._logins == 1 and record and (record.get("tokens") or {}).get("refresh_token") and self._refresh(record):
            return True  # the access token was revoked or expired early: a refresh may be enough
        self.authorize(challenge, discovery=discovery)
        return True

    def _header(self) -> str | None:
        token = (((self._load() or {}).get("tokens") or {}).get("access_token"))
        return f"Bearer {token}" if token else None

    def _expiring(self) -> bool:
        tokens = (self._load() or {}).get("tokens") or {}
        expires_at = tokens.get("expires_at")
        if not (tokens.get("access_token") and expires_at):
            return False
        # A token this process just refreshed is used until it really expires: a server that
        # issues tokens shorter-lived than the margin must not get a refresh per request.
        margin = 0.0 if tokens.get("access_token") == self._refreshed_token else REFRESH_MARGIN
        return expires_at - margin <= time.time()

    def _refresh_shared(self) -> None:
        """Refresh under a file lock: another llmc may be refreshing the same (rotating) refresh
        token; if it did, use its result."""
        try:
            with self.store.refresh_lock(HTTP_TIMEOUT):
                self._loaded = False
                record = self._load()
                if not self._expiring():
                    return
                if not ((record or {}).get("tokens") or {}).get("refresh_token") or not self._refresh(record):  # type: ignore[arg-type]
                    # No way to refresh: send no token, the server's 401 starts a new authorization.
                    record["tokens"] = {}  # type: ignore[index]
        except TimeoutError:
            raise AuthError(f"{self.name}: another llmc holds the token refresh lock for too long") from None

    # -- commands -----------------------------------------------------------------------------------

    def login(self) -> dict[str, Any]:
        """`llmc auth login`: probe the server for its challenge, then authorize; the stored
        record's public view."""
        try:
            challenge = parse_www_authenticate(self._probe())
            self.authorize(challenge, force_interactive=True)
        finally:
            self.close()
        return public_view(self._record or {})

    def logout(self) -> int:
        self._record, self._loaded = None, True
        return self.store.delete(self.server_url)

    def authorize(self, challenge: dict[str, str], scopes: list[str] | None = None, *,
                  force_interactive: bool = False, discovery: Discovery | None = None) -> None:
        discovery = discovery or self.discover(challenge.get("resource_metadata"))
        if scopes is None:
            scopes = self._choose_scopes(challenge, discovery)
        if self.settings.grant == "client_credentials":
            client = self._preregistered(discovery)
            form = {"grant_type": "client_credentials", **({"scope": " ".join(scopes)} if scopes else {})}
            tokens = self._token_request(discovery.metadata["token_endpoint"], discovery.resource, client, form)
        else:
            if not (self.interactive or force_interactive):
                raise AuthError(f"{self.name}: the server requires authorization; run `{self.login_command}`")
            client, tokens = self._authorization_code(discovery, scopes)
        self._save(discovery, client, tokens)

    # -- discovery ----------------------------------------------------------------------------------

    def discover(self, resource_metadata: str | None = None) -> Discovery:
        candidates = protected_resource_metadata_urls(self.url)
        if resource_metadata:
            candidates = [resource_metadata] + [u for u in candidates if u != resource_metadata]
        prm = None
        for url in candidates:
            prm = self._get_json(url)
            if prm is not None:
                break
        if prm is None:
            return self._discover_2025_03_26()
        resource = prm.get("resource")
        if not isinstance(resource, str) or not resource_matches(resource, self.url):
            raise AuthError(f"{self.name}: the protected resource metadata names resource {_one_line(resource)!r},"
                            f" not this server ({self.url}); refusing to authorize")
        servers = prm.get("authorization_servers")
        if not isinstance(servers, list) or not servers or not isinstance(servers[0], str):
            raise AuthError(f"{self.name}: the protected resource metadata names no authorization server")
        issuer = servers[0]
        self._require_secure(issuer, "authorization server")
        metadata = None
        for url in authorization_server_metadata_urls(issuer):
            metadata = self._get_json(url)
            if metadata is not None:
                break
        if metadata is None:
            raise AuthError(f"{self.name}: no authorization server metadata found for {issuer}")
        if metadata.get("issuer") != issuer:
            raise AuthError(f"{self.name}: authorization server metadata names issuer"
                            f" {_one_line(metadata.get('issuer'))!r}, expected {issuer!r}; refusing it")
        scopes = prm.get("scopes_supported")
        discovery = Discovery(resource, issuer, metadata, scopes if isinstance(scopes, list) else None)
        self._check_metadata(discovery)
        return discovery

    def _discover_2025_03_26(self) -> Discovery:
        """No protected resource metadata: the 2025-03-26 rules. Metadata at the authorization
        base URL (the server URL without its path), else the default endpoints."""
        p = urlsplit(self.url)
        base = f"{p.scheme}://{p.netloc}"
        metadata = self._get_json(f"{base}/.well-known/oauth-authorization-server")
        if metadata is None:
            # PKCE is mandatory in 2025-03-26, so a server without metadata still gets S256.
            metadata = {"issuer": base, "authorization_endpoint": f"{base}/authorize",
                        "token_endpoint": f"{base}/token", "registration_endpoint": f"{base}/register",
                        "code_challenge_methods_supported": ["S256"]}
        # 2025-03-26 defines no issuer check; the metadata's own issuer is what `iss` must match.
        issuer = metadata.get("issuer") if isinstance(metadata.get("issuer"), str) else base
        discovery = Discovery(self.server_url, issuer, metadata, None)
        self._check_metadata(discovery)
        return discovery

    def _check_metadata(self, d: Discovery) -> None:
        needed = ["token_endpoint"]
        if self.settings.grant != "client_credentials":
            needed.append("authorization_endpoint")
            if "S256" not in (d.metadata.get("code_challenge_methods_supported") or []):
                raise AuthError(f"{self.name}: the authorization server {d.issuer} does not advertise PKCE S256"
                                " (code_challenge_methods_supported); refusing to authorize")
        for key in needed + ["registration_endpoint"]:
            value = d.metadata.get(key)
            if key in needed and not isinstance(value, str):
                raise AuthError(f"{self.name}: the authorization server metadata has no {key}")
            if isinstance(value, str):
                self._require_secure(value, key)

    def _choose_scopes(self, challenge: dict[str, str], d: Discovery) -> list[str]:
        """The challenge's scope, else the profile's, else the resource's scopes_supported, else
        none; plus offline_access when the authorization server lists it (for a refresh token)."""
        if challenge.get("scope"):
            scopes = challenge["scope"].split()
        elif self.settings.scopes:
            scopes = list(self.settings.scopes)
        else:
            scopes = [s for s in d.scopes_supported or [] if isinstance(s, str)]
        offered = d.metadata.get("scopes_supported") or []
        if self.settings.grant != "client_credentials" and "offline_access" in offered and "offline_access" not in scopes:
            scopes.append("offline_access")
        return scopes

    # -- registration -------------------------------------------------------------------------------

    def _client(self, d: Discovery, redirect_uri: str) -> dict[str, Any]:
        """Registration in the spec's order: the profile's client, a client ID metadata document,
        a client registered earlier with this server and redirect URI, dynamic registration."""
        s = self.settings
        if s.client_id:
            return self._preregistered(d)
        if s.client_metadata_url and d.metadata.get("client_id_metadata_document_supported") is True:
            if not s.client_metadata_url.startswith("https://") or not urlsplit(s.client_metadata_url).path.strip("/"):
                raise AuthError(f"{self.name}: client_metadata_url must be an https URL with a path")
            return {"client_id": s.client_metadata_url, "source": "metadata_document", "auth_method": "none"}
        stored = (self._load() or {}).get("client") or {}
        if (stored.get("source") == "dynamic" and stored.get("redirect_uri") == redirect_uri
                and (self._record or {}).get("issuer") == d.issuer):
            return stored
        if isinstance(d.metadata.get("registration_endpoint"), str):
            return self._register(d, redirect_uri)
        raise AuthError(f"{self.name}: the authorization server {d.issuer} offers no client registration;"
                        f" set client_id (and client_secret_env) or client_metadata_url under"
                        f" [servers.{self.name}.oauth] in the profile")

    def _preregistered(self, d: Discovery) -> dict[str, Any]:
        s = self.settings
        if not s.client_id:
            raise AuthError(f"{self.name}: the client_credentials grant needs client_id and client_secret_env"
                            f" under [servers.{self.name}.oauth] in the profile")
        secret = self._secret()
        if self.settings.grant == "client_credentials" and not secret:
            raise AuthError(f"{self.name}: the client_credentials grant needs client_secret_env")
        return {"client_id": s.client_id, "source": "profile", "auth_method": self._auth_method(d, bool(secret), None)}

    def _secret(self) -> str | None:
        name = self.settings.client_secret_env
        if not name:
            return None
        value = os.environ.get(name)
        if not value:
            raise AuthError(f"{self.name}: environment variable {name} (the OAuth client secret) is not set")
        return value

    def _auth_method(self, d: Discovery, has_secret: bool, registered: str | None) -> str:
        if self.settings.token_auth_method != "auto":
            return self.settings.token_auth_method
        if registered in ("none", "client_secret_basic", "client_secret_post"):
            return registered  # type: ignore[return-value]
        if not has_secret:
            return "none"
        # RFC 8414: client_secret_basic is the default when the server lists nothing.
        supported = d.metadata.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
        return "client_secret_post" if "client_secret_basic" not in supported and "client_secret_post" in supported \
            else "client_secret_basic"

    def _register(self, d: Discovery, redirect_uri: str) -> dict[str, Any]:
        supported = d.metadata.get("token_endpoint_auth_methods_supported") or ["none"]
        wanted = self.settings.token_auth_method
        if wanted == "auto":
            wanted = next((m for m in ("none", "client_secret_basic", "client_secret_post") if m in supported), "none")
        body = {"client_name": CLIENT_NAME, "redirect_uris": [redirect_uri], "application_type": "native",
                "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
                "token_endpoint_auth_method": wanted}
        response = self._request("POST", d.metadata["registration_endpoint"], json=body)
        reply = self._json_of(response)
        if response.status_code not in (200, 201) or not isinstance(reply.get("client_id"), str):
            raise AuthError(f"{self.name}: dynamic client registration failed: {self._oauth_error(response, reply)}")
        client = {"client_id": reply["client_id"], "source": "dynamic", "redirect_uri": redirect_uri}
        if isinstance(reply.get("client_secret"), str):
            client["client_secret"] = reply["client_secret"]
        client["auth_method"] = self._auth_method(d, "client_secret" in client, reply.get("token_endpoint_auth_method"))
        return client

    # -- authorization code -------------------------------------------------------------------------

    def _authorization_code(self, d: Discovery, scopes: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
        listener = self._listener()
        try:
            client = self._client(d, listener.redirect_uri)
            verifier, challenge = pkce_pair()
            state = secrets.token_urlsafe(32)
            params = {"response_type": "code", "client_id": client["client_id"], "redirect_uri": listener.redirect_uri,
                      "code_challenge": challenge, "code_challenge_method": "S256", "state": state,
                      "resource": d.resource}
            if scopes:
                params["scope"] = " ".join(scopes)
            endpoint = d.metadata["authorization_endpoint"]
            url = endpoint + ("&" if "?" in endpoint else "?") + urlencode(params)
            paste = not self.open_browser and sys.stdin.isatty()
            self._show(url, paste)
            reply = listener.wait(self.login_timeout, paste)
        finally:
            listener.close()
        self._check_reply(reply, state, d)
        form = {"grant_type": "authorization_code", "code": reply["code"], "redirect_uri": listener.redirect_uri,
                "code_verifier": verifier}
        if scopes and "offline_access" in scopes:
            form["scope"] = " ".join(scopes)  # SEP-2207: offline_access on the token request too
        return client, self._token_request(d.metadata["token_endpoint"], d.resource, client, form, scopes)

    def _listener(self) -> "_Loopback":
        """The redirect listener: the port of a dynamically registered client when it is free
        (its redirect URI stays valid), else a random one."""
        stored = ((self._load() or {}).get("client") or {}).get("redirect_uri")
        port = urlsplit(stored).port if stored else None
        if port:
            try:
                return _Loopback(port)
            except OSError:
                pass
        return _Loopback(0)

    def _show(self, url: str, paste: bool) -> None:
        if self.open_browser:
            import webbrowser  # honours BROWSER

            self.notify(f"llmc: opening a browser to authorize {self.name} ...")
            try:
                if webbrowser.open(url):
                    return
            except webbrowser.Error:
                pass
        self.notify(f"llmc: to authorize {self.name}, open this URL in a browser:\n  {url}")
        if paste:
            self.notify("llmc: waiting for the browser; from another machine, paste the address it was"
                        " redirected to (http://127.0.0.1:...) here and press Enter")

    def _check_reply(self, reply: dict[str, str], state: str, d: Discovery) -> None:
        """RFC 9207 `iss` first (on a mismatch not even the error is shown), then `state`."""
        expected = d.metadata.get("issuer") or d.issuer
        if "iss" in reply:
            if reply["iss"] != expected:
                raise AuthError(f"{self.name}: the authorization response came from issuer"
                                f" {_one_line(reply['iss'])!r}, expected {expected!r}; refusing it")
        elif d.metadata.get("authorization_response_iss_parameter_supported") is True:
            raise AuthError(f"{self.name}: the authorization response lacks the iss parameter the server advertises")
        if reply.get("state") != state:
            raise AuthError(f"{self.name}: the authorization response has a wrong state; refusing it")
        if "error" in reply:
            detail = f": {_one_line(reply['error_description'])}" if reply.get("error_description") else ""
            raise AuthError(f"{self.name}: authorization failed: {_one_line(reply['error'], 60)}{detail}")
        if not reply.get("code"):
            raise AuthError(f"{self.name}: the authorization response has no code")

    # -- tokens -------------------------------------------------------------------------------------

    def _token_request(self, endpoint: str, resource: str, client: dict[str, Any], form: dict[str, str],
                       scopes: list[str] | None = None, old: dict[str, Any] | None = None) -> dict[str, Any]:
        form = {**form, "resource": resource}
        headers = {"Accept": "application/json"}
        method = client.get("auth_method", "none")
        secret = client.get("client_secret") if client.get("source") != "profile" else self._secret()
        if method == "client_secret_basic" and secret:
            pair = f"{quote(client['client_id'], safe='')}:{quote(secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        else:
            form["client_id"] = client["client_id"]
            if method == "client_secret_post" and secret:
                form["client_secret"] = secret
        response = self._request("POST", endpoint, data=form, headers=headers)
        reply = self._json_of(response)
        if response.status_code != 200 or not isinstance(reply.get("access_token"), str):
            raise AuthError(f"{self.name}: token request failed: {self._oauth_error(response, reply)}",
                            oauth_error=reply.get("error") if isinstance(reply.get("error"), str) else None)
        if str(reply.get("token_type", "")).lower() != "bearer":
            raise AuthError(f"{self.name}: the token endpoint issued a {_one_line(reply.get('token_type'), 40)!r}"
                            " token; only Bearer is supported")
        expires_in = reply.get("expires_in")
        granted = reply.get("scope") if isinstance(reply.get("scope"), str) else " ".join(scopes or [])
        return {
            "access_token": reply["access_token"],
            # A server that does not rotate refresh tokens keeps the old one valid.
            "refresh_token": reply.get("refresh_token") or (old or {}).get("refresh_token"),
            "expires_at": time.time() + float(expires_in) if isinstance(expires_in, (int, float)) else None,
            "scope": granted or (old or {}).get("scope", ""),
        }

    def _refresh(self, record: dict[str, Any]) -> bool:
        """A new access token from the refresh token. False when the refresh token was refused
        and a person can log in again; AuthError when nobody can."""
        old = record.get("tokens") or {}
        try:
            tokens = self._token_request(record["token_endpoint"], record["resource"], record.get("client") or {},
                                         {"grant_type": "refresh_token", "refresh_token": old["refresh_token"]},
                                         old=old)
        except AuthError as exc:
            record["tokens"] = {}  # dead tokens are worth nothing; keep the client registration
            self.store.save(record)
            if self.interactive and self.settings.grant != "client_credentials":
                self.notify(f"llmc: {self.name}: the refresh token was refused; authorizing again")
                return False
            reason = exc.details.get("oauth_error") or "refused"
            raise AuthError(f"{self.name}: the stored refresh token was refused ({_one_line(reason, 60)});"
                            f" run `{self.login_command}`") from None
        record["tokens"] = tokens
        self.store.save(record)
        return True

    def _save(self, d: Discovery, client: dict[str, Any], tokens: dict[str, Any]) -> None:
        record = {"server_url": self.server_url, "server": self.name, "resource": d.resource, "issuer": d.issuer,
                  "token_endpoint": d.metadata["token_endpoint"], "client": client, "tokens": tokens}
        self.store.save(record)
        self._record, self._loaded = record, True

    def _load(self) -> dict[str, Any] | None:
        if not self._loaded:
            self._record, self._loaded = self.store.find(self.server_url), True
        return self._record

    # -- HTTP ---------------------------------------------------------------------------------------

    def _probe(self) -> str | None:
        """The WWW-Authenticate of an unauthenticated request (None when the server lets it pass)."""
        body = {"jsonrpc": "2.0", "id": 0, "method": "ping"}
        response = self._request("POST", self.url, json=body,
                                 headers={"Accept": "application/json, text/event-stream"})
        return response.headers.get("www-authenticate") if response.status_code in (401, 403) else None

    def _get_json(self, url: str) -> dict[str, Any] | None:
        response = self._request("GET", url)
        if response.status_code != 200:
            return None
        reply = self._json_of(response)
        return reply or None

    def _request(self, method: str, url: str, **kwargs: Any) -> Any:
        import httpx2

        if self._http_client is None:
            self._http_client = httpx2.Client(timeout=HTTP_TIMEOUT, follow_redirects=False,
                                              headers={"Accept": "application/json"})
        limit = max_message_bytes()
        try:
            # Streamed and counted: a server (or one it names as its authorization server) that
            # sends an endless body is stopped at the message limit, not read into memory.
            request = self._http_client.build_request(method, url, **kwargs)
            response = self._http_client.send(request, stream=True)
            try:
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > limit:
                    raise too_large(limit, "an authorization reply")
                body, size = [], 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > limit:
                        raise too_large(limit, "an authorization reply")
                    body.append(chunk)
            finally:
                response.close()
            # Decoded already: the rebuilt reply must not claim an encoding or length of the wire's.
            headers = [(k, v) for k, v in response.headers.multi_items()
                       if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
            return httpx2.Response(response.status_code, headers=headers, content=b"".join(body), request=request)
        except httpx2.HTTPError as exc:
            raise AuthError(f"{self.name}: cannot reach {urlsplit(url).netloc} for authorization:"
                            f" {_one_line(exc, 120) or type(exc).__name__}") from None

    @staticmethod
    def _json_of(response: Any) -> dict[str, Any]:
        try:
            data = response.json()
        except (ValueError, RecursionError):
            return {}
        return data if isinstance(data, dict) else {}

    @staticmethod
    def _oauth_error(response: Any, reply: dict[str, Any]) -> str:
        error = reply.get("error") if isinstance(reply.get("error"), str) else f"HTTP {response.status_code}"
        desc = reply.get("error_description")
        return _one_line(error, 60) + (f": {_one_line(desc)}" if isinstance(desc, str) and desc else "")

    def _require_secure(self, url: str, what: str) -> None:
        """OAuth 2.1 section 1.5: authorization server endpoints over HTTPS (loopback excepted)."""
        scheme = urlsplit(url).scheme
        if scheme != "https" and not (scheme == "http" and _is_loopback(url)):
            raise AuthError(f"{self.name}: refusing {what} {url}: not https")

    def close(self) -> None:
        if self._http_client is not None:
            self._http_client.close()
            self._http_client = None


class _Loopback:
    """The redirect listener on 127.0.0.1: it takes the first request to /callback."""

    def __init__(self, port: int) -> None:
        from http.server import BaseHTTPRequestHandler, HTTPServer

        replies: queue.Queue[dict[str, str]] = queue.Queue()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                parts = urlsplit(self.path)
                if parts.path != "/callback":
                    self.send_error(404)
                    return
                replies.put(dict(parse_qsl(parts.query)))
                page = b"<!doctype html><title>llmc</title><p>llmc received the authorization. You can close this tab.</p>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *args: Any) -> None:
                pass  # the request line carries the authorization code: never log it

        self.replies = replies
        self.server = HTTPServer(("127.0.0.1", port), Handler)
        self.redirect_uri = f"http://127.0.0.1:{self.server.server_address[1]}/callback"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    def wait(self, timeout: float, paste: bool) -> dict[str, str]:
        if paste:
            def read_pasted() -> None:
                line = sys.stdin.readline().strip()
                if line:
                    self.replies.put(dict(parse_qsl(urlsplit(line).query or line)))

            threading.Thread(target=read_pasted, daemon=True).start()
        try:
            return self.replies.get(timeout=timeout)
        except queue.Empty:
            raise AuthError(f"no authorization response within {timeout:.0f} s") from None

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


__all__ = ["OAuth", "Discovery", "parse_www_authenticate", "canonical_uri", "resource_matches",
           "protected_resource_metadata_urls", "authorization_server_metadata_urls", "pkce_pair", "public_view"]
