"""OAuth 2.1 for remote MCP servers (2025-03-26, 2025-11-25 and 2026-07-28 basic/authorization).

oauth.py       OAuth: the hooks an HTTP transport consults, login/logout, the authorization
               code flow with PKCE, refresh, step-up, client credentials
discovery.py   where to authorize: resource and authorization server metadata, their checks
registration.py  which client llmc is: the profile's, a metadata document, dynamic registration
records.py     the typed token record (TokenRecord, Client, Tokens) a TokenStore keeps
primitives.py  pure functions of the RFCs: challenges, canonical URIs, metadata URLs, PKCE
loopback.py    the redirect listener on 127.0.0.1

Tokens are kept by a TokenStore handed in from above (mcp.stores); without one, in memory.
"""

from llmc_cli.mcp.auth.discovery import Discovery
from llmc_cli.mcp.auth.oauth import OAuth
from llmc_cli.mcp.auth.primitives import (
    authorization_server_metadata_urls,
    canonical_uri,
    parse_www_authenticate,
    pkce_pair,
    protected_resource_metadata_urls,
    resource_matches,
)
from llmc_cli.mcp.auth.records import Client, TokenRecord, Tokens

__all__ = [
    "OAuth",
    "Discovery",
    "TokenRecord",
    "Client",
    "Tokens",
    "parse_www_authenticate",
    "canonical_uri",
    "resource_matches",
    "protected_resource_metadata_urls",
    "authorization_server_metadata_urls",
    "pkce_pair",
]
