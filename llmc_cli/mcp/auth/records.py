"""The token record: what llmc keeps per (authorization server, resource) for one MCP server.

Typed here, stored as JSON by a TokenStore (the field names are the stored format: files written
by earlier llmc versions load unchanged). from_json is lenient: a damaged or foreign record
is no record (the server's 401 then starts a new authorization), never a crash.
"""

from __future__ import annotations

import time
from dataclasses import asdict, field
from typing import Any

from llmc_cli.model import JSONObject, dataclass


@dataclass
class Tokens:
    access_token: str | None = None
    refresh_token: str | None = None
    expires_at: float | None = None  # epoch seconds
    scope: str = ""

    @classmethod
    def from_json(cls, data: object) -> Tokens:
        if not isinstance(data, dict):
            return cls()
        expires_at = data.get("expires_at")
        return cls(
            _str(data.get("access_token")),
            _str(data.get("refresh_token")),
            float(expires_at) if isinstance(expires_at, (int, float)) else None,
            _str(data.get("scope")) or "",
        )


@dataclass
class Client:
    """The OAuth client llmc authenticates as with this authorization server."""

    client_id: str
    source: str  # profile | metadata_document | dynamic (registered by llmc)
    auth_method: str = "none"  # none | client_secret_basic | client_secret_post
    redirect_uri: str | None = None  # a dynamically registered client's
    client_secret: str | None = None  # a dynamically registered client's; a profile's stays in the environment

    @classmethod
    def from_json(cls, data: object) -> Client | None:
        if not isinstance(data, dict) or not isinstance(data.get("client_id"), str):
            return None
        return cls(
            data["client_id"],
            str(data.get("source") or "dynamic"),
            str(data.get("auth_method") or "none"),
            _str(data.get("redirect_uri")),
            _str(data.get("client_secret")),
        )


@dataclass
class TokenRecord:
    server_url: str  # the MCP server's canonical URI: how a connection finds its record
    server: str  # its name in the profile, for `auth status`
    resource: str  # sent as `resource` (RFC 8707)
    issuer: str  # the authorization server
    token_endpoint: str
    client: Client | None
    tokens: Tokens = field(default_factory=Tokens)
    updated_at: float = 0.0

    def to_json(self) -> JSONObject:
        data = asdict(self)
        if data["client"] is not None:
            data["client"] = {k: v for k, v in data["client"].items() if v is not None}
        return data

    @classmethod
    def from_json(cls, data: object) -> TokenRecord | None:
        if not isinstance(data, dict):
            return None
        needed = ("server_url", "resource", "issuer", "token_endpoint")
        if not all(isinstance(data.get(k), str) for k in needed):
            return None
        updated_at = data.get("updated_at")
        return cls(
            data["server_url"],
            str(data.get("server") or ""),
            data["resource"],
            data["issuer"],
            data["token_endpoint"],
            Client.from_json(data.get("client")),
            Tokens.from_json(data.get("tokens")),
            float(updated_at) if isinstance(updated_at, (int, float)) else 0.0,
        )

    def public_view(self) -> dict[str, Any]:
        """What `auth status` may show: never a token or a secret."""
        expires_at = self.tokens.expires_at
        return {
            "server": self.server,
            "serverUrl": self.server_url,
            "resource": self.resource,
            "issuer": self.issuer,
            "clientId": self.client.client_id if self.client else None,
            "registration": self.client.source if self.client else None,
            "scope": self.tokens.scope,
            "hasAccessToken": bool(self.tokens.access_token),
            "hasRefreshToken": bool(self.tokens.refresh_token),
            "expiresAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires_at)) if expires_at else None,
            "expired": bool(expires_at and expires_at <= time.time()),
        }


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
