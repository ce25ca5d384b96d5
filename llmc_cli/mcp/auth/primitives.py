"""The pure parts of OAuth for MCP: challenges, canonical URIs, well-known metadata URLs, PKCE
(RFC 6750, RFC 9728, RFC 8414, RFC 7636, and the spec's Canonical Server URI)."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from urllib.parse import urlsplit, urlunsplit

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
_PARAM = re.compile(r'([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,"]+))')


def parse_www_authenticate(header: str | None) -> dict[str, str]:
    """Parameters of the Bearer challenge (RFC 6750 section 3, RFC 9728 section 5.1), lower-case
    names; {} when the header has no Bearer challenge."""
    match = re.search(r"(?i)(?:^|[\s,])bearer(?:\s|$)", header or "")
    if not match:
        return {}
    out: dict[str, str] = {}
    for name, quoted, token in _PARAM.findall(header[match.end() :]):  # type: ignore[index]
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
        return [
            f"{origin}/.well-known/oauth-authorization-server{path}",
            f"{origin}/.well-known/openid-configuration{path}",
            f"{origin}{path}/.well-known/openid-configuration",
        ]
    return [f"{origin}/.well-known/oauth-authorization-server", f"{origin}/.well-known/openid-configuration"]


def pkce_pair() -> tuple[str, str]:
    """(code_verifier, S256 code_challenge) as RFC 7636 defines them."""
    verifier = secrets.token_urlsafe(64)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def one_line(text: object, limit: int = 200) -> str:
    return " ".join(str(text).split())[:limit]


def is_loopback_url(url: str) -> bool:
    return (urlsplit(url).hostname or "").lower() in LOOPBACK_HOSTS
