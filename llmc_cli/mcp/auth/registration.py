"""Which OAuth client llmc is towards an authorization server, in the spec's order: the
profile's pre-registered client, a client ID metadata document, a client llmc registered
earlier, dynamic client registration (RFC 7591). A profile's client secret stays in the
environment variable the profile names; it is read when needed, never stored."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from llmc_cli.errors import AuthError
from llmc_cli.mcp.auth.discovery import AuthHttp, Discovery
from llmc_cli.mcp.auth.records import Client, TokenRecord
from llmc_cli.model import OAuthSpec

CLIENT_NAME = "llmc"


class Registration:
    def __init__(self, name: str, settings: OAuthSpec, http: AuthHttp) -> None:
        self.name = name
        self.settings = settings
        self.http = http

    def client(self, d: Discovery, redirect_uri: str, record: TokenRecord | None) -> Client:
        """Registration in the spec's order: the profile's client, a client ID metadata document,
        a client registered earlier with this server and redirect URI, dynamic registration."""
        s = self.settings
        if s.client_id:
            return self.preregistered(d)
        if s.client_metadata_url and d.metadata.get("client_id_metadata_document_supported") is True:
            if not s.client_metadata_url.startswith("https://") or not urlsplit(s.client_metadata_url).path.strip("/"):
                raise AuthError(f"{self.name}: client_metadata_url must be an https URL with a path")
            return Client(s.client_metadata_url, "metadata_document")
        stored = record.client if record else None
        if stored and stored.source == "dynamic" and stored.redirect_uri == redirect_uri and record and record.issuer == d.issuer:
            return stored
        if isinstance(d.metadata.get("registration_endpoint"), str):
            return self._register(d, redirect_uri)
        raise AuthError(
            f"{self.name}: the authorization server {d.issuer} offers no client registration;"
            f" set client_id (and client_secret_env) or client_metadata_url under"
            f" [servers.{self.name}.oauth] in the profile"
        )

    def preregistered(self, d: Discovery) -> Client:
        s = self.settings
        if not s.client_id:
            raise AuthError(
                f"{self.name}: the client_credentials grant needs client_id and client_secret_env"
                f" under [servers.{self.name}.oauth] in the profile"
            )
        secret = self.secret()
        if self.settings.grant == "client_credentials" and not secret:
            raise AuthError(f"{self.name}: the client_credentials grant needs client_secret_env")
        return Client(s.client_id, "profile", self._auth_method(d, bool(secret), None))

    def secret(self) -> str | None:
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
            return registered
        if not has_secret:
            return "none"
        # RFC 8414: client_secret_basic is the default when the server lists nothing.
        supported = d.metadata.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
        return (
            "client_secret_post"
            if "client_secret_basic" not in supported and "client_secret_post" in supported
            else "client_secret_basic"
        )

    def _register(self, d: Discovery, redirect_uri: str) -> Client:
        supported = d.metadata.get("token_endpoint_auth_methods_supported") or ["none"]
        wanted = self.settings.token_auth_method
        if wanted == "auto":
            wanted = next((m for m in ("none", "client_secret_basic", "client_secret_post") if m in supported), "none")
        body = {
            "client_name": CLIENT_NAME,
            "redirect_uris": [redirect_uri],
            "application_type": "native",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": wanted,
        }
        response = self.http.request("POST", d.metadata["registration_endpoint"], json=body)
        reply = self.http.json_of(response)
        if response.status_code not in (200, 201) or not isinstance(reply.get("client_id"), str):
            raise AuthError(f"{self.name}: dynamic client registration failed: {self.http.oauth_error(response, reply)}")
        secret = reply.get("client_secret") if isinstance(reply.get("client_secret"), str) else None
        return Client(
            reply["client_id"],
            "dynamic",
            self._auth_method(d, bool(secret), reply.get("token_endpoint_auth_method")),
            redirect_uri,
            secret,
        )
