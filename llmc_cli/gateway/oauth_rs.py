"""OAuth 2.1 resource-server mode of the HTTP gateway (2025-11-25 basic/authorization.mdx):
Protected Resource Metadata (RFC 9728), `WWW-Authenticate: Bearer resource_metadata=...`, and
access tokens that are JWTs (RFC 9068) from the configured issuer, verified against its JWKS.

What a token must be: signed with one of the configured asymmetric algorithms (never `none`, never
HMAC: a public key used as an HMAC secret would let anyone sign) by a key of the issuer's JWKS;
`iss` the issuer; `aud` this resource's canonical URI (audience binding: a token minted for another
resource is refused, so tokens cannot be passed through); `exp` in the future and `nbf` in the past
(with a small leeway). PyJWT does the cryptography; it is imported only when this mode is on.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from llmc_cli.config.schema import ServeOAuthConfig
from llmc_cli.errors import ConfigError, optional_module
from llmc_cli.gateway.principals import MAX_REQUESTS, MAX_SESSIONS, Principal

FETCH_SECONDS = 5.0  # one JWKS or metadata fetch; a request waits at most this long for it
MAX_DOCUMENT_BYTES = 1024 * 1024
JWKS_MAX_AGE = 3600.0  # keys are re-read at least this often (key rotation)
REFRESH_AT_MOST_EVERY = 30.0  # an unknown kid refetches the JWKS, but not on every forged token
PRM_PATH = "/.well-known/oauth-protected-resource"


@dataclass(frozen=True)
class Refusal:
    """Why a request is not let in: the HTTP status and the WWW-Authenticate challenge."""

    status: int
    challenge: str
    message: str


def _is_loopback_url(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    return host in ("localhost", "127.0.0.1", "::1")


def _fetch_json(url: str) -> dict[str, Any]:
    parts = urlsplit(url)
    if parts.scheme != "https" and not (parts.scheme == "http" and _is_loopback_url(url)):
        raise ConfigError(f"[serve.oauth]: {url} must be https (http only on loopback)")
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=FETCH_SECONDS) as response:
        body = response.read(MAX_DOCUMENT_BYTES + 1)
    if len(body) > MAX_DOCUMENT_BYTES:
        raise ValueError(f"{url}: document larger than {MAX_DOCUMENT_BYTES} bytes")
    data = json.loads(body)
    if not isinstance(data, dict):
        raise ValueError(f"{url}: not a JSON object")
    return data


def metadata_urls(issuer: str) -> list[str]:
    """Where the issuer's metadata may be: RFC 8414 (path inserted), then OpenID Connect Discovery."""
    parts = urlsplit(issuer)
    origin, path = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
    return [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}/.well-known/openid-configuration{path}",
        f"{origin}{path}/.well-known/openid-configuration",
    ]


class ResourceServer:
    def __init__(self, config: ServeOAuthConfig) -> None:
        # Checked at start, not at the first request; the crypto backend too (RS256/ES256 keys).
        optional_module("jwt", "oauth", "[serve.oauth]")
        optional_module("cryptography", "oauth", "[serve.oauth]")
        self.config = config
        parts = urlsplit(config.resource)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment:
            raise ConfigError(
                f"[serve.oauth] resource {config.resource!r}: must be an absolute http(s) URL "
                "without a fragment (this gateway's MCP endpoint)"
            )
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.metadata_url = self.origin + PRM_PATH + parts.path.rstrip("/")
        self.lock = threading.Lock()
        self.jwks_uri = config.jwks_uri
        self.keys: dict[str, dict[str, Any]] = {}  # kid -> JWK
        self.fetched_at = -1e9

    # -- what the gateway publishes --------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        """The Protected Resource Metadata document (RFC 9728 section 2)."""
        document: dict[str, Any] = {
            "resource": self.config.resource,
            "authorization_servers": [self.config.issuer],
            "bearer_methods_supported": ["header"],
            "resource_signing_alg_values_supported": list(self.config.algorithms),
        }
        if self.config.scopes:
            document["scopes_supported"] = list(self.config.scopes)
        return document

    def prm_paths(self) -> set[str]:
        """The well-known paths the metadata answers on: bare, and suffixed with the MCP path."""
        return {PRM_PATH, urlsplit(self.metadata_url).path}

    def challenge(self, error: str | None = None, description: str | None = None) -> str:
        parts = [f'resource_metadata="{self.metadata_url}"']
        if self.config.scopes:
            parts.append(f'scope="{" ".join(self.config.scopes)}"')
        if error:
            parts.append(f'error="{error}"')
        if description:
            parts.append(f'error_description="{description}"')
        return "Bearer " + ", ".join(parts)

    # -- keys ------------------------------------------------------------------------------------

    def _refresh(self) -> None:
        """Re-read the JWKS (under the lock); finds jwks_uri in the issuer's metadata the first time."""
        self.fetched_at = time.monotonic()  # also after a failure: the AS is not hammered
        if self.jwks_uri is None:
            for url in metadata_urls(self.config.issuer):
                try:
                    document = _fetch_json(url)
                except (OSError, ValueError):
                    continue
                # RFC 8414 section 3.3: the metadata's issuer must be the one asked about
                if document.get("issuer") == self.config.issuer and isinstance(document.get("jwks_uri"), str):
                    self.jwks_uri = document["jwks_uri"]
                    break
            else:
                return
        try:
            document = _fetch_json(self.jwks_uri)
        except (OSError, ValueError):
            return  # keep the keys we have: a brief AS outage does not lock everyone out
        keys = document.get("keys")
        if isinstance(keys, list):
            self.keys = {str(k.get("kid", "")): k for k in keys if isinstance(k, dict)}

    def key_for(self, kid: str) -> dict[str, Any] | None:
        with self.lock:
            now = time.monotonic()
            stale = now - self.fetched_at > JWKS_MAX_AGE
            if stale or (kid not in self.keys and now - self.fetched_at > REFRESH_AT_MOST_EVERY):
                self._refresh()
            return self.keys.get(kid)

    # -- tokens ----------------------------------------------------------------------------------

    def authenticate(self, authorization: str | None) -> Principal | Refusal:
        import jwt  # PyJWT: only when OAuth mode is configured

        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return Refusal(401, self.challenge(), "Unauthorized: an OAuth access token is required")

        def invalid(why: str) -> Refusal:
            return Refusal(401, self.challenge("invalid_token", why), f"Unauthorized: {why}")

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return invalid("not a JWT")
        alg = header.get("alg")
        if alg not in self.config.algorithms:
            return invalid(f"algorithm {alg!r} not accepted")
        jwk = self.key_for(str(header.get("kid", "")))
        if jwk is None:
            return invalid("signed by an unknown key")
        if jwk.get("alg") not in (None, alg) or jwk.get("use") not in (None, "sig"):
            return invalid("the key is not for this algorithm")
        try:
            key = jwt.PyJWK(jwk, algorithm=alg)
            claims = jwt.decode(
                token,
                key=key.key,
                algorithms=[alg],
                audience=self.config.resource,
                issuer=self.config.issuer,
                leeway=self.config.leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            return invalid("the token has expired")
        except jwt.InvalidAudienceError:
            return invalid("the token is for another resource")
        except jwt.InvalidIssuerError:
            return invalid("the token is from another issuer")
        except jwt.PyJWTError as exc:
            return invalid(f"the token is not valid ({type(exc).__name__})")
        granted = _scopes_of(claims)
        missing = [s for s in self.config.scopes if s not in granted]
        if missing:
            return Refusal(
                403, self.challenge("insufficient_scope", "missing scope " + " ".join(missing)), "Forbidden: insufficient scope"
            )
        return self._principal(claims)

    def _principal(self, claims: Mapping[str, object]) -> Principal | Refusal:
        value = claims.get(self.config.claim)
        values = [v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str)]
        shares = (self.config.max_sessions or MAX_SESSIONS, self.config.max_requests or MAX_REQUESTS)
        for candidate in values:  # the first value the mapping names, in the token's order
            if candidate in self.config.profiles:
                return Principal(f"oauth:{candidate}", "", self.config.profiles[candidate], *shares)
        if "*" in self.config.profiles and values:
            return Principal(f"oauth:{values[0]}", "", self.config.profiles["*"], *shares)
        return Refusal(
            403,
            self.challenge("insufficient_scope", "no profile for this principal"),
            f"Forbidden: claim {self.config.claim!r} maps to no profile",
        )


def _scopes_of(claims: Mapping[str, object]) -> set[str]:
    """RFC 9068 `scope` (space-separated), or the `scp` list some servers send."""
    scope = claims.get("scope")
    if isinstance(scope, str):
        return set(scope.split())
    scp = claims.get("scp")
    return {s for s in scp if isinstance(s, str)} if isinstance(scp, list) else set()
