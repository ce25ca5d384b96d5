"""Where to authorize: protected resource metadata (RFC 9728), authorization server metadata
(RFC 8414 / OpenID discovery), the `resource` and `issuer` checks, and the HTTP client that
talks to both. httpx2 is imported only when a request is made."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from llmc_cli.errors import AuthError
from llmc_cli.mcp.auth.primitives import (
    authorization_server_metadata_urls,
    canonical_uri,
    is_loopback_url,
    one_line,
    protected_resource_metadata_urls,
    resource_matches,
)
from llmc_cli.mcp.transports.base import max_message_bytes, too_large
from llmc_cli.model import OAuthSpec, dataclass

if TYPE_CHECKING:
    import httpx2

HTTP_TIMEOUT = 30.0


@dataclass
class Discovery:
    resource: str  # sent as `resource` (RFC 8707)
    issuer: str  # the authorization server's identifier: expected `iss`, key of the store
    metadata: dict[str, Any]  # authorization server metadata (or the 2025-03-26 defaults)
    scopes_supported: list[str] | None  # from the protected resource metadata
    advertised: bool = True  # False: no metadata at all, the 2025-03-26 default endpoints assumed


class AuthHttp:
    """HTTP to the resource's metadata and the authorization server, for one MCP server (`name`
    prefixes every error). Opened on first use; OAuth closes it after each authorization."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._client: httpx2.Client | None = None

    def get_json(self, url: str) -> dict[str, Any] | None:
        response = self.request("GET", url)
        if response.status_code != 200:
            return None
        reply = self.json_of(response)
        return reply or None

    def request(
        self,
        method: str,
        url: str,
        *,
        data: dict[str, str] | None = None,
        json: object = None,
        headers: dict[str, str] | None = None,
    ) -> httpx2.Response:
        """One request (a form, or a JSON body); the reply is read whole, at most the message limit."""
        import httpx2

        if self._client is None:
            self._client = httpx2.Client(timeout=HTTP_TIMEOUT, follow_redirects=False, headers={"Accept": "application/json"})
        limit = max_message_bytes()
        try:
            # Streamed and counted: a server (or one it names as its authorization server) that
            # sends an endless body is stopped at the message limit, not read into memory.
            request = self._client.build_request(method, url, data=data, json=json, headers=headers)
            response = self._client.send(request, stream=True)
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
            kept = [
                (k, v)
                for k, v in response.headers.multi_items()
                if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
            ]
            return httpx2.Response(response.status_code, headers=kept, content=b"".join(body), request=request)
        except httpx2.HTTPError as exc:
            raise AuthError(
                f"{self.name}: cannot reach {urlsplit(url).netloc} for authorization: {one_line(exc, 120) or type(exc).__name__}"
            ) from None

    @staticmethod
    def json_of(response: httpx2.Response) -> dict[str, Any]:
        try:
            data = response.json()
        except (ValueError, RecursionError):
            return {}
        return data if isinstance(data, dict) else {}

    @staticmethod
    def oauth_error(response: httpx2.Response, reply: dict[str, Any]) -> str:
        error = reply.get("error") if isinstance(reply.get("error"), str) else f"HTTP {response.status_code}"
        desc = reply.get("error_description")
        return one_line(error, 60) + (f": {one_line(desc)}" if isinstance(desc, str) and desc else "")

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def discover(http: AuthHttp, url: str, settings: OAuthSpec, resource_metadata: str | None = None) -> Discovery:
    """Where to authorize for the MCP server at `url` (2025-11-25 and 2026-07-28 authorization:
    protected resource metadata first, the 2025-03-26 rules for servers without it)."""
    name = http.name
    candidates = protected_resource_metadata_urls(url)
    if resource_metadata:
        candidates = [resource_metadata] + [u for u in candidates if u != resource_metadata]
    prm = None
    for candidate in candidates:
        prm = http.get_json(candidate)
        if prm is not None:
            break
    if prm is None:
        return _discover_2025_03_26(http, url, settings)
    resource = prm.get("resource")
    if not isinstance(resource, str) or not resource_matches(resource, url):
        raise AuthError(
            f"{name}: the protected resource metadata names resource {one_line(resource)!r},"
            f" not this server ({url}); refusing to authorize"
        )
    servers = prm.get("authorization_servers")
    if not isinstance(servers, list) or not servers or not isinstance(servers[0], str):
        raise AuthError(f"{name}: the protected resource metadata names no authorization server")
    issuer = servers[0]
    require_secure(name, issuer, "authorization server")
    metadata = None
    for candidate in authorization_server_metadata_urls(issuer):
        metadata = http.get_json(candidate)
        if metadata is not None:
            break
    if metadata is None:
        raise AuthError(f"{name}: no authorization server metadata found for {issuer}")
    if metadata.get("issuer") != issuer:
        raise AuthError(
            f"{name}: authorization server metadata names issuer"
            f" {one_line(metadata.get('issuer'))!r}, expected {issuer!r}; refusing it"
        )
    scopes = prm.get("scopes_supported")
    discovery = Discovery(resource, issuer, metadata, scopes if isinstance(scopes, list) else None)
    check_metadata(name, discovery, settings)
    return discovery


def _discover_2025_03_26(http: AuthHttp, url: str, settings: OAuthSpec) -> Discovery:
    """No protected resource metadata: the 2025-03-26 rules. Metadata at the authorization
    base URL (the server URL without its path), else the default endpoints."""
    p = urlsplit(url)
    base = f"{p.scheme}://{p.netloc}"
    metadata = http.get_json(f"{base}/.well-known/oauth-authorization-server")
    advertised = metadata is not None
    if metadata is None:
        # PKCE is mandatory in 2025-03-26, so a server without metadata still gets S256.
        metadata = {
            "issuer": base,
            "authorization_endpoint": f"{base}/authorize",
            "token_endpoint": f"{base}/token",
            "registration_endpoint": f"{base}/register",
            "code_challenge_methods_supported": ["S256"],
        }
    # 2025-03-26 defines no issuer check; the metadata's own issuer is what `iss` must match.
    stated = metadata.get("issuer")
    issuer = stated if isinstance(stated, str) else base
    discovery = Discovery(canonical_uri(url), issuer, metadata, None, advertised)
    check_metadata(http.name, discovery, settings)
    return discovery


def check_metadata(name: str, d: Discovery, settings: OAuthSpec) -> None:
    needed = ["token_endpoint"]
    if settings.grant != "client_credentials":
        needed.append("authorization_endpoint")
        if "S256" not in (d.metadata.get("code_challenge_methods_supported") or []):
            raise AuthError(
                f"{name}: the authorization server {d.issuer} does not advertise PKCE S256"
                " (code_challenge_methods_supported); refusing to authorize"
            )
    for key in [*needed, "registration_endpoint"]:
        value = d.metadata.get(key)
        if key in needed and not isinstance(value, str):
            raise AuthError(f"{name}: the authorization server metadata has no {key}")
        if isinstance(value, str):
            require_secure(name, value, key)


def require_secure(name: str, url: str, what: str) -> None:
    """OAuth 2.1 section 1.5: authorization server endpoints over HTTPS (loopback excepted)."""
    scheme = urlsplit(url).scheme
    if scheme != "https" and not (scheme == "http" and is_loopback_url(url)):
        raise AuthError(f"{name}: refusing {what} {url}: not https")
