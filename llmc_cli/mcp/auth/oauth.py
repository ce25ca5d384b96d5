"""OAuth 2.1 for one remote MCP server, as the spec's authorization pages define it (2025-03-26,
2025-11-25 and 2026-07-28 basic/authorization): the hooks its HTTP transport consults, login and
logout, client registration, the authorization code flow with PKCE, refresh, step-up.

The HTTP transports stay small: they hold an `OAuth` object and consult it.

    header = auth.authorization_header()          # before each request: "Bearer ..." or None
    if status in (401, 403) and auth.on_unauthorized(status, www_authenticate):
        ...send the same request again...          # bounded here; False or AuthError otherwise

Tokens live in a TokenStore handed in from above (llmc_cli/store/tokens.py: the state
directory's oauth/, one 0600 file per authorization server and resource) as TokenRecords
(records.py). No token, secret or authorization code is ever put into a message or an exception.
"""

from __future__ import annotations

import base64
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urlsplit

from llmc_cli.errors import AuthError
from llmc_cli.mcp.auth.discovery import HTTP_TIMEOUT, AuthHttp, Discovery, discover
from llmc_cli.mcp.auth.loopback import LoopbackListener
from llmc_cli.mcp.auth.primitives import canonical_uri, one_line, parse_www_authenticate, pkce_pair
from llmc_cli.mcp.auth.records import Client, TokenRecord, Tokens
from llmc_cli.mcp.auth.registration import Registration
from llmc_cli.mcp.stores import MemoryTokenStore
from llmc_cli.model import OAuthSpec, ServerSpec

if TYPE_CHECKING:
    from llmc_cli.mcp.stores import TokenStore

REFRESH_MARGIN = 60.0  # refresh an access token this many seconds before it expires
MAX_STEP_UPS = 2  # re-authorizations for 403 insufficient_scope per connection
MAX_LOGINS = 2  # fresh authorizations for 401 per connection
LOGIN_TIMEOUT = 300.0  # seconds to wait for the browser to come back


class OAuth:
    """Authorization for one remote server, consulted by its HTTP transport."""

    def __init__(
        self,
        spec: ServerSpec,
        *,
        interactive: bool | None = None,
        open_browser: bool = True,
        notify: Callable[[str], None] | None = None,
        store: TokenStore | None = None,
        login_timeout: float = LOGIN_TIMEOUT,
    ) -> None:
        if not spec.url:
            raise AuthError(f"{spec.name}: OAuth needs a remote server (url)")
        self.name = spec.name
        self.url = spec.url
        self.server_url = canonical_uri(spec.url)
        self.settings = spec.oauth or OAuthSpec()
        self.oauth_configured = spec.oauth is not None  # the profile says this server uses OAuth
        if interactive is None:
            # A browser login needs a person at a terminal, or a BROWSER that can do it headlessly.
            interactive = bool(os.environ.get("BROWSER")) or (sys.stdin.isatty() and sys.stderr.isatty())
        self.interactive = interactive
        self.open_browser = open_browser
        self.notify = notify or (lambda message: print(message, file=sys.stderr, flush=True))
        self.store: TokenStore = store if store is not None else MemoryTokenStore()
        self.login_timeout = login_timeout
        # What to tell a user to run; an ad-hoc --url target is logged in by URL.
        self.login_command = f"llmc auth login {spec.url if spec.adhoc else spec.name}"
        self.scheme = "Bearer"  # the authentication scheme of the server's last 401 challenge
        self._record: TokenRecord | None = None
        self._loaded = False
        self._step_ups = 0
        self._logins = 0
        self.http = AuthHttp(spec.name)
        self.registration = Registration(spec.name, self.settings, self.http)
        # Requests may run on several threads: one authorization at a time, and a thread whose
        # token was replaced meanwhile just retries with the new one.
        self._lock = threading.RLock()
        self._sent = threading.local()
        self._refreshed_token: str | None = None

    @classmethod
    def for_spec(cls, spec: ServerSpec, store: TokenStore | None = None) -> OAuth | None:
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
                self._refreshed_token = self._tokens().access_token
            header = self._sent.header = self._header()
            return header

    def on_unauthorized(self, status: int, www_authenticate: str | None) -> bool:
        """True: authorized anew, send the request again. False: not an auth matter. Raises
        AuthError when authorization failed or the retry budget is spent."""
        if status not in (401, 403):
            return False
        with self._lock:
            current = self._header()
            if current and current != getattr(self._sent, "header", None):
                return True  # another thread authorized meanwhile
            self.scheme = (www_authenticate or "").split(" ", 1)[0].strip(",") or "Bearer"
            try:
                return self._unauthorized(status, parse_www_authenticate(www_authenticate))
            finally:
                self.close()  # the HTTP client to the authorization server is needed only now

    def _unauthorized(self, status: int, challenge: dict[str, str]) -> bool:
        if status == 403:
            if challenge.get("error") != "insufficient_scope":
                return False
            if self._step_ups >= MAX_STEP_UPS:
                raise AuthError(
                    f"{self.name}: still insufficient scope after {MAX_STEP_UPS} step-up authorizations"
                    f" (server asks for: {one_line(challenge.get('scope', '?'))})"
                )
            self._step_ups += 1
            granted = self._tokens().scope.split()
            wanted = list(dict.fromkeys(granted + challenge.get("scope", "").split()))
            self.authorize(challenge, wanted)
            return True
        if self._logins >= MAX_LOGINS:
            raise AuthError(f"{self.name}: the server still answers 401 after authorization")
        self._logins += 1
        record = self._load()
        discovery = self.discover(challenge.get("resource_metadata"))
        if record and record.issuer != discovery.issuer:
            # The server moved to another authorization server: its tokens and clients are useless
            # (2026-07-28 client-registration, Authorization Server Binding).
            if record.client and record.client.source == "profile":
                raise AuthError(
                    f"{self.name}: the authorization server changed from {record.issuer} to"
                    f" {discovery.issuer}; the profile's client_id was issued by the old one: update"
                    f" [servers.{self.name}.oauth] and run `llmc auth logout {self.name}`"
                )
            self.notify(f"llmc: {self.name}: the authorization server changed to {discovery.issuer}; registering again")
            self.store.delete(self.server_url)
            self._record = record = None
        if self._logins == 1 and record and record.tokens.refresh_token and self._refresh(record):
            return True  # the access token was revoked or expired early: a refresh may be enough
        self.authorize(challenge, discovery=discovery)
        return True

    def _tokens(self) -> Tokens:
        record = self._load()
        return record.tokens if record else Tokens()

    def _header(self) -> str | None:
        token = self._tokens().access_token
        return f"Bearer {token}" if token else None

    def _expiring(self) -> bool:
        tokens = self._tokens()
        if not (tokens.access_token and tokens.expires_at):
            return False
        # A token this process just refreshed is used until it really expires: a server that
        # issues tokens shorter-lived than the margin must not get a refresh per request.
        margin = 0.0 if tokens.access_token == self._refreshed_token else REFRESH_MARGIN
        return tokens.expires_at - margin <= time.time()

    def _refresh_shared(self) -> None:
        """Refresh under a file lock: another llmc may be refreshing the same (rotating) refresh
        token; if it did, use its result."""
        try:
            with self.store.refresh_lock(HTTP_TIMEOUT):
                self._loaded = False
                record = self._load()
                if not self._expiring():
                    return
                assert record is not None  # _expiring() needs one
                if not record.tokens.refresh_token or not self._refresh(record):
                    # No way to refresh: send no token, the server's 401 starts a new authorization.
                    record.tokens = Tokens()
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
        return self._record.public_view() if self._record else {}

    def logout(self) -> int:
        self._record, self._loaded = None, True
        return self.store.delete(self.server_url)

    def authorize(
        self,
        challenge: dict[str, str],
        scopes: list[str] | None = None,
        *,
        force_interactive: bool = False,
        discovery: Discovery | None = None,
    ) -> None:
        discovery = discovery or self.discover(challenge.get("resource_metadata"))
        if scopes is None:
            scopes = self._choose_scopes(challenge, discovery)
        if self.settings.grant == "client_credentials":
            client = self.registration.preregistered(discovery)
            form = {"grant_type": "client_credentials", **({"scope": " ".join(scopes)} if scopes else {})}
            tokens = self._token_request(discovery.metadata["token_endpoint"], discovery.resource, client, form)
        else:
            if not (discovery.advertised or force_interactive or self.oauth_configured):
                # No OAuth metadata anywhere and none in the profile: most likely a static token
                # (a gateway's principals), which no login can get; `llmc auth login` still tries
                # the 2025-03-26 default endpoints.
                scheme = one_line(self.scheme, 40)
                raise AuthError(
                    f"{self.name}: the server requires authorization (WWW-Authenticate: {scheme}) and "
                    f"publishes no OAuth metadata: give it a token, --header 'Authorization: {scheme} "
                    f"${{TOKEN}}' (or `headers` in the profile); only if it uses OAuth without metadata, "
                    f"run `{self.login_command}`"
                )
            if not (self.interactive or force_interactive):
                raise AuthError(f"{self.name}: the server requires authorization; run `{self.login_command}`")
            client, tokens = self._authorization_code(discovery, scopes)
        self._save(discovery, client, tokens)

    def discover(self, resource_metadata: str | None = None) -> Discovery:
        return discover(self.http, self.url, self.settings, resource_metadata)

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

    # -- authorization code -------------------------------------------------------------------------

    def _authorization_code(self, d: Discovery, scopes: list[str]) -> tuple[Client, Tokens]:
        listener = self._listener()
        try:
            client = self.registration.client(d, listener.redirect_uri, self._load())
            verifier, challenge = pkce_pair()
            state = secrets.token_urlsafe(32)
            params = {
                "response_type": "code",
                "client_id": client.client_id,
                "redirect_uri": listener.redirect_uri,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "state": state,
                "resource": d.resource,
            }
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
        form = {
            "grant_type": "authorization_code",
            "code": reply["code"],
            "redirect_uri": listener.redirect_uri,
            "code_verifier": verifier,
        }
        if scopes and "offline_access" in scopes:
            form["scope"] = " ".join(scopes)  # SEP-2207: offline_access on the token request too
        return client, self._token_request(d.metadata["token_endpoint"], d.resource, client, form, scopes)

    def _listener(self) -> LoopbackListener:
        """The redirect listener: the port of a dynamically registered client when it is free
        (its redirect URI stays valid), else a random one."""
        record = self._load()
        stored = record.client.redirect_uri if record and record.client else None
        port = urlsplit(stored).port if stored else None
        if port:
            try:
                return LoopbackListener(port)
            except OSError:
                pass
        return LoopbackListener(0)

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
            self.notify(
                "llmc: waiting for the browser; from another machine, paste the address it was"
                " redirected to (http://127.0.0.1:...) here and press Enter"
            )

    def _check_reply(self, reply: dict[str, str], state: str, d: Discovery) -> None:
        """RFC 9207 `iss` first (on a mismatch not even the error is shown), then `state`."""
        expected = d.metadata.get("issuer") or d.issuer
        if "iss" in reply:
            if reply["iss"] != expected:
                raise AuthError(
                    f"{self.name}: the authorization response came from issuer"
                    f" {one_line(reply['iss'])!r}, expected {expected!r}; refusing it"
                )
        elif d.metadata.get("authorization_response_iss_parameter_supported") is True:
            raise AuthError(f"{self.name}: the authorization response lacks the iss parameter the server advertises")
        if reply.get("state") != state:
            raise AuthError(f"{self.name}: the authorization response has a wrong state; refusing it")
        if "error" in reply:
            detail = f": {one_line(reply['error_description'])}" if reply.get("error_description") else ""
            raise AuthError(f"{self.name}: authorization failed: {one_line(reply['error'], 60)}{detail}")
        if not reply.get("code"):
            raise AuthError(f"{self.name}: the authorization response has no code")

    # -- tokens -------------------------------------------------------------------------------------

    def _token_request(
        self,
        endpoint: str,
        resource: str,
        client: Client,
        form: dict[str, str],
        scopes: list[str] | None = None,
        old: Tokens | None = None,
    ) -> Tokens:
        form = {**form, "resource": resource}
        headers = {"Accept": "application/json"}
        method = client.auth_method
        secret = client.client_secret if client.source != "profile" else self.registration.secret()
        if method == "client_secret_basic" and secret:
            pair = f"{quote(client.client_id, safe='')}:{quote(secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        else:
            form["client_id"] = client.client_id
            if method == "client_secret_post" and secret:
                form["client_secret"] = secret
        response = self.http.request("POST", endpoint, data=form, headers=headers)
        reply = self.http.json_of(response)
        if response.status_code != 200 or not isinstance(reply.get("access_token"), str):
            raise AuthError(
                f"{self.name}: token request failed: {self.http.oauth_error(response, reply)}",
                oauthError=reply.get("error") if isinstance(reply.get("error"), str) else None,
            )
        if str(reply.get("token_type", "")).lower() != "bearer":
            raise AuthError(
                f"{self.name}: the token endpoint issued a {one_line(reply.get('token_type'), 40)!r}"
                " token; only Bearer is supported"
            )
        expires_in = reply.get("expires_in")
        granted = reply.get("scope") if isinstance(reply.get("scope"), str) else " ".join(scopes or [])
        refresh_token = reply.get("refresh_token") if isinstance(reply.get("refresh_token"), str) else None
        return Tokens(
            access_token=reply["access_token"],
            # A server that does not rotate refresh tokens keeps the old one valid.
            refresh_token=refresh_token or (old.refresh_token if old else None),
            expires_at=time.time() + float(expires_in) if isinstance(expires_in, (int, float)) else None,
            scope=granted or (old.scope if old else ""),
        )

    def _refresh(self, record: TokenRecord) -> bool:
        """A new access token from the refresh token. False when the refresh token was refused
        (or there is none) and a person can log in again; AuthError when nobody can."""
        old = record.tokens
        if not old.refresh_token or record.client is None:
            return False
        try:
            tokens = self._token_request(
                record.token_endpoint,
                record.resource,
                record.client,
                {"grant_type": "refresh_token", "refresh_token": old.refresh_token},
                old=old,
            )
        except AuthError as exc:
            record.tokens = Tokens()  # dead tokens are worth nothing; keep the client registration
            self.store.save(record)
            if self.interactive and self.settings.grant != "client_credentials":
                self.notify(f"llmc: {self.name}: the refresh token was refused; authorizing again")
                return False
            reason = exc.details.get("oauthError") or "refused"
            raise AuthError(
                f"{self.name}: the stored refresh token was refused ({one_line(reason, 60)}); run `{self.login_command}`"
            ) from None
        record.tokens = tokens
        self.store.save(record)
        return True

    def _save(self, d: Discovery, client: Client, tokens: Tokens) -> None:
        record = TokenRecord(self.server_url, self.name, d.resource, d.issuer, d.metadata["token_endpoint"], client, tokens)
        self.store.save(record)
        self._record, self._loaded = record, True

    def _load(self) -> TokenRecord | None:
        if not self._loaded:
            self._record, self._loaded = self.store.find(self.server_url), True
        return self._record

    # -- HTTP ---------------------------------------------------------------------------------------

    def _probe(self) -> str | None:
        """The WWW-Authenticate of an unauthenticated request (None when the server lets it pass)."""
        body = {"jsonrpc": "2.0", "id": 0, "method": "ping"}
        response = self.http.request("POST", self.url, json=body, headers={"Accept": "application/json, text/event-stream"})
        return response.headers.get("www-authenticate") if response.status_code in (401, 403) else None

    def close(self) -> None:
        """Close the HTTP client to the authorization server: it is needed only while authorizing."""
        self.http.close()
