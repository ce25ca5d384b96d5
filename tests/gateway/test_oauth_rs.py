"""`llmc serve --http` as an OAuth 2.1 resource server (`[serve.oauth]`): Protected Resource
Metadata, 401 with resource_metadata, JWT access tokens signed by a real key of a small
authorization server on 127.0.0.1 (its metadata and JWKS), audience binding, scopes, and the
claim -> profile mapping, with the `mcp` SDK client as the host."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.test_http import INIT, Gateway, sdk_host, start, stop
from tests.gateway.test_stdio import run
from tests.helpers import free_port

jwt = pytest.importorskip("jwt")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class AuthServer:
    """Publishes RFC 8414 metadata at /.well-known/oauth-authorization-server/as and a JWKS with
    an RSA and an EC key; mints tokens with them (tokens are what a real AS would issue)."""

    def __init__(self) -> None:
        from cryptography.hazmat.primitives.asymmetric import ec, rsa

        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.other = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # not in the JWKS
        self.fetches: list[str] = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/as"

    def jwks(self) -> dict[str, Any]:
        from jwt.algorithms import ECAlgorithm, RSAAlgorithm

        rsa_jwk = {**json.loads(RSAAlgorithm.to_jwk(self.rsa.public_key())), "kid": "rsa-1", "use": "sig"}
        ec_jwk = {**json.loads(ECAlgorithm.to_jwk(self.ec.public_key())), "kid": "ec-1", "use": "sig"}
        return {"keys": [rsa_jwk, ec_jwk]}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server.fetches.append(self.path)
                base = server.issuer.removesuffix("/as")
                documents = {
                    "/.well-known/oauth-authorization-server/as": {
                        "issuer": server.issuer,
                        "jwks_uri": base + "/as/jwks",
                        "authorization_endpoint": base + "/as/authorize",
                        "token_endpoint": base + "/as/token",
                        "response_types_supported": ["code"],
                    },
                    "/as/jwks": server.jwks(),
                }
                body = json.dumps(documents[self.path]).encode() if self.path in documents else b"{}"
                self.send_response(200 if self.path in documents else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler

    def token(self, resource: str, *, alg: str = "RS256", key: Any = None, kid: str | None = None, **claims: Any) -> str:
        now = int(time.time())
        payload = {
            "iss": self.issuer,
            "aud": resource,
            "sub": "alice",
            "iat": now,
            "exp": now + 300,
            "scope": "mcp:tools",
            "client_id": "host",
            **claims,
        }
        payload = {k: v for k, v in payload.items() if v is not None}
        signing = key or (self.ec if alg == "ES256" else self.rsa)
        return jwt.encode(payload, signing, algorithm=alg, headers={"kid": kid or ("ec-1" if alg == "ES256" else "rsa-1")})

    def unsigned(self, resource: str, alg: str, secret: bytes = b"") -> str:
        """A token with alg `none` or an HMAC 'signed' with the public key: libraries that trust the
        header's alg accept these (the classic algorithm-confusion attacks)."""
        now = int(time.time())
        header = _b64(json.dumps({"alg": alg, "typ": "JWT", "kid": "rsa-1"}).encode())
        body = _b64(
            json.dumps({"iss": self.issuer, "aud": resource, "sub": "alice", "exp": now + 300, "scope": "mcp:tools"}).encode()
        )
        signature = _b64(hmac.new(secret, f"{header}.{body}".encode(), hashlib.sha256).digest()) if secret else ""
        return f"{header}.{body}.{signature}"

    def public_pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return self.rsa.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


@pytest.fixture
def auth_server() -> Iterator[AuthServer]:
    server = AuthServer()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


@pytest.fixture
def oauth_gateway(gateway_profile: Path, auth_server: AuthServer) -> Iterator[Gateway]:
    # alice gets the served profile ("gw"); the ci-bot a profile that allows sdk.add only
    config = Path(os.environ["LLMC_CONFIG_DIR"]) / "profiles"
    config.mkdir(parents=True, exist_ok=True)
    sdk = gateway_profile.read_text().split("[servers.sdk]\n")[1].split("\n\n")[0]
    (config / "ci-only.toml").write_text(
        "[servers.sdk]\n" + sdk + '\n\n[policy]\ndefault = "deny"\n'
        'allow = ["sdk.add"]\n\n[policy.hints."sdk.add"]\nreadOnly = true\n'
    )
    port = free_port()
    with gateway_profile.open("a") as fh:
        fh.write(
            f'\n[serve.oauth]\nissuer = "{auth_server.issuer}"\nresource = "http://127.0.0.1:{port}/mcp"\n'
            'scopes = ["mcp:tools"]\nprofiles = { alice = "gw", ci-bot = "ci-only" }\n'
        )
    running = start(gateway_profile, port=port)
    yield running
    assert "Traceback" not in stop(running)


def test_protected_resource_metadata(oauth_gateway: Gateway, auth_server: AuthServer) -> None:
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
        status, _, body = oauth_gateway.request("GET", path)
        assert status == 200
        assert json.loads(body) == {
            "resource": oauth_gateway.url,
            "authorization_servers": [auth_server.issuer],
            "bearer_methods_supported": ["header"],
            "scopes_supported": ["mcp:tools"],
            "resource_signing_alg_values_supported": ["RS256", "ES256"],
        }
    status, headers, _ = oauth_gateway.request("POST", "/mcp", INIT)
    assert status == 401
    prm = f"http://127.0.0.1:{oauth_gateway.port}/.well-known/oauth-protected-resource/mcp"
    assert headers["www-authenticate"] == f'Bearer resource_metadata="{prm}", scope="mcp:tools"'
    assert oauth_gateway.request("GET", "/status")[0] == 401
    assert oauth_gateway.request("GET", "/healthz")[0] == 200


def test_valid_tokens_get_their_profiles_tools(oauth_gateway: Gateway, auth_server: AuthServer) -> None:
    from mcp.shared.exceptions import MCPError

    alice = auth_server.token(oauth_gateway.url)
    bot = auth_server.token(oauth_gateway.url, alg="ES256", sub="ci-bot")

    async def work() -> None:
        async with sdk_host(oauth_gateway.url, "auto", alice) as client:
            assert "sdk.weather" in {t.name for t in (await client.list_tools()).tools}
        async with sdk_host(oauth_gateway.url, "legacy", bot) as client:
            assert {t.name for t in (await client.list_tools()).tools} == {"sdk.add"}
            assert (await client.call_tool("sdk.add", {"a": 2, "b": 3})).structured_content == {"result": 5}
            with pytest.raises(MCPError, match="Unknown tool"):
                await client.call_tool("sdk.weather", {"city": "Oslo"})

    run(work)
    # the JWKS was found through the issuer's metadata and fetched once for both tokens
    assert auth_server.fetches.count("/as/jwks") == 1


# (what is wrong with the token, how to make it, status, error in the challenge)
BAD_TOKENS = [
    ("another resource", lambda a, url: a.token("http://127.0.0.1:1/mcp"), 401, "invalid_token"),
    ("audience list without us", lambda a, url: a.token(["https://other.example/mcp"]), 401, "invalid_token"),
    ("expired", lambda a, url: a.token(url, exp=int(time.time()) - 120), 401, "invalid_token"),
    ("not yet valid", lambda a, url: a.token(url, nbf=int(time.time()) + 600), 401, "invalid_token"),
    ("no exp", lambda a, url: a.token(url, exp=None), 401, "invalid_token"),
    ("another issuer", lambda a, url: a.token(url, iss="http://127.0.0.1:1/as"), 401, "invalid_token"),
    ("bad signature", lambda a, url: a.token(url, key=a.other), 401, "invalid_token"),
    ("unknown kid", lambda a, url: a.token(url, key=a.other, kid="rsa-2"), 401, "invalid_token"),
    ("alg none", lambda a, url: a.unsigned(url, "none"), 401, "invalid_token"),
    ("HS256 with the public key", lambda a, url: a.unsigned(url, "HS256", a.public_pem()), 401, "invalid_token"),
    ("RSA key named for ES256", lambda a, url: a.token(url, alg="ES256", kid="rsa-1"), 401, "invalid_token"),
    ("not a JWT", lambda a, url: "opaque-token-0123456789", 401, "invalid_token"),
    ("missing scope", lambda a, url: a.token(url, scope="mcp:other"), 403, "insufficient_scope"),
    ("unmapped subject", lambda a, url: a.token(url, sub="mallory"), 403, "insufficient_scope"),
]


@pytest.mark.parametrize("case, make, status, error", BAD_TOKENS, ids=[c[0] for c in BAD_TOKENS])
def test_bad_tokens_are_refused(
    oauth_gateway: Gateway, auth_server: AuthServer, case: str, make: Any, status: int, error: str
) -> None:
    token = make(auth_server, oauth_gateway.url)
    got, headers, body = oauth_gateway.request("POST", "/mcp", INIT, {"Authorization": f"Bearer {token}"})
    assert got == status, body
    challenge = headers["www-authenticate"]
    assert challenge.startswith("Bearer resource_metadata=") and f'error="{error}"' in challenge
    assert token not in body.decode()


def test_a_session_belongs_to_its_subject(oauth_gateway: Gateway, auth_server: AuthServer) -> None:
    alice = auth_server.token(oauth_gateway.url)
    bot = auth_server.token(oauth_gateway.url, sub="ci-bot")
    session = oauth_gateway.request("POST", "/mcp", INIT, {"Authorization": f"Bearer {alice}"})[1]["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    assert oauth_gateway.request("POST", "/mcp", listing, {"Mcp-Session-Id": session, "Authorization": f"Bearer {bot}"})[0] == 404
    assert (
        oauth_gateway.request("POST", "/mcp", listing, {"Mcp-Session-Id": session, "Authorization": f"Bearer {alice}"})[0] == 200
    )


def test_oauth_principals_have_the_shares_serve_oauth_gives(gateway_profile: Path, auth_server: AuthServer) -> None:
    """`[serve.oauth] max_sessions` bounds each subject's sessions: alice's second ends her first
    (404 from then on), and the ci-bot's session is untouched."""
    port = free_port()
    with gateway_profile.open("a") as fh:
        fh.write(
            f'\n[serve.oauth]\nissuer = "{auth_server.issuer}"\nresource = "http://127.0.0.1:{port}/mcp"\n'
            'profiles = { "*" = "gw" }\nmax_sessions = 1\n'
        )
    running = start(gateway_profile, port=port)
    try:
        alice, bot = (auth_server.token(running.url, sub=sub) for sub in ("alice", "ci-bot"))
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}

        def session(token: str) -> str:
            status, headers, body = running.request("POST", "/mcp", INIT, {"Authorization": f"Bearer {token}"})
            assert status == 200, body
            return headers["mcp-session-id"]

        def used(token: str, session_id: str) -> int:
            return running.request("POST", "/mcp", listing, {"Mcp-Session-Id": session_id, "Authorization": f"Bearer {token}"})[0]

        first, bots = session(alice), session(bot)
        second = session(alice)
        assert (used(alice, first), used(alice, second), used(bot, bots)) == (404, 200, 200)
    finally:
        assert "Traceback" not in stop(running)


# a [serve.oauth] that would be unsafe or cannot work: refused at start, one line, no traceback
BAD_CONFIG = [
    ('algorithms = ["HS256"]\nprofiles = { alice = "gw" }', "asymmetric"),
    ('algorithms = ["none"]\nprofiles = { alice = "gw" }', "asymmetric"),
    ("", "profiles"),
]


@pytest.mark.parametrize("extra, message", BAD_CONFIG)
def test_bad_oauth_config(gateway_profile: Path, extra: str, message: str) -> None:
    from tests.helpers import llmc

    with gateway_profile.open("a") as fh:
        fh.write(f'\n[serve.oauth]\nissuer = "https://as.example/as"\nresource = "http://127.0.0.1:1/mcp"\n{extra}\n')
    proc = llmc("serve", "-p", str(gateway_profile), "--http", f"127.0.0.1:{free_port()}")
    assert proc.returncode == 3 and message in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""
