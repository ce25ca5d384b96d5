"""OAuth against a real (small) authorization server on 127.0.0.1 (tests/auth/fake_oauth.py); the
browser step is headless: BROWSER points at tests/auth/browser.py, which follows the redirect."""

from __future__ import annotations

import stat
from pathlib import Path

import httpx2
import pytest

from llmc_cli.errors import AuthError
from llmc_cli.mcp.auth import OAuth, Tokens
from llmc_cli.mcp.auth.discovery import require_secure
from llmc_cli.model import OAuthSpec, ServerSpec
from llmc_cli.store import client_stores
from tests.auth.fake_oauth import FakeOAuthServer

BROWSER = str(Path(__file__).with_name("browser.py"))


@pytest.fixture(autouse=True)
def headless_browser(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROWSER", BROWSER)


def oauth_for(fake: FakeOAuthServer, oauth: OAuthSpec | None = None, **kwargs) -> OAuth:
    messages: list[str] = []
    auth = OAuth(
        ServerSpec(name="erp", url=fake.mcp_url, oauth=oauth),
        notify=messages.append,
        login_timeout=20,
        store=client_stores().tokens,
        **kwargs,
    )
    auth.messages = messages  # type: ignore[attr-defined]
    return auth


def rpc(auth: OAuth, url: str, method: str = "tools/list") -> httpx2.Response:
    """What an HTTP transport does with the hooks: header before, on_unauthorized after a 401/403."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {}}
    for _ in range(6):
        header = auth.authorization_header()
        response = httpx2.post(url, json=body, headers={"Authorization": header} if header else {})
        if response.status_code in (401, 403) and auth.on_unauthorized(
            response.status_code, response.headers.get("www-authenticate")
        ):
            continue
        return response
    raise AssertionError("OAuth did not bound the retries")


def test_login_on_401_with_pkce_resource_and_dynamic_registration(isolated_dirs):
    with FakeOAuthServer() as fake:
        auth = oauth_for(fake, interactive=True)
        response = rpc(auth, fake.mcp_url)
        assert response.status_code == 200 and response.json()["result"]["tools"][0]["name"] == "whoami"
        register = next(r for r in fake.requests if r["path"] == "/as/register")
        assert register["json"]["application_type"] == "native"
        assert register["json"]["redirect_uris"][0].startswith("http://127.0.0.1:")
        authorize = next(r for r in fake.requests if r["path"] == "/as/authorize")
        assert authorize["query"]["resource"] == fake.mcp_url
        assert authorize["query"]["code_challenge_method"] == "S256"
        assert authorize["query"]["scope"] == "mcp:read"  # from the WWW-Authenticate challenge
        token = next(r for r in fake.requests if r["path"] == "/as/token")
        assert token["form"]["resource"] == fake.mcp_url and token["form"]["code_verifier"]
        # Stored privately, keyed by server; a second connection needs no authorization server.
        directory = isolated_dirs / "state" / "oauth"
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
        files = list(directory.glob("*.json"))
        assert len(files) == 1 and stat.S_IMODE(files[0].stat().st_mode) == 0o600
        before = len(fake.requests)
        assert rpc(oauth_for(fake, interactive=False), fake.mcp_url).status_code == 200
        assert [r["path"] for r in fake.requests[before:]] == ["/mcp"]
        # No message for people carries a token.
        assert not any(t in m for t in fake.issued for m in auth.messages)  # type: ignore[attr-defined]


def test_resource_mismatch_is_refused(isolated_dirs):
    with FakeOAuthServer(resource="https://evil.example.com/mcp") as fake:
        with pytest.raises(AuthError, match=r"names resource 'https://evil\.example\.com/mcp'.*refusing") as info:
            rpc(oauth_for(fake, interactive=True), fake.mcp_url)
        assert info.value.exit_code == 9
        assert "/as/authorize" not in fake.paths() and "/as/register" not in fake.paths()


def test_wrong_issuer_is_refused(isolated_dirs):
    with FakeOAuthServer(metadata_issuer="https://honest.example") as fake:
        with pytest.raises(AuthError, match=r"issuer 'https://honest\.example', expected"):
            rpc(oauth_for(fake, interactive=True), fake.mcp_url)
        assert "/as/authorize" not in fake.paths()


@pytest.mark.parametrize("methods", [None, ["plain"]])
def test_server_without_pkce_s256_is_refused(isolated_dirs, methods):
    with FakeOAuthServer(pkce_methods=methods) as fake:
        with pytest.raises(AuthError, match="does not advertise PKCE S256"):
            rpc(oauth_for(fake, interactive=True), fake.mcp_url)
        assert "/as/authorize" not in fake.paths() and "/as/token" not in fake.paths()


@pytest.mark.parametrize(
    "iss, supported, error",
    [
        ("https://other.example", False, "came from issuer 'https://other.example'"),
        (None, True, "lacks the iss parameter"),
    ],
)
def test_authorization_response_iss_is_checked(isolated_dirs, iss, supported, error):
    with FakeOAuthServer(iss_in_redirect=iss, iss_supported=supported) as fake:
        with pytest.raises(AuthError, match=error):
            rpc(oauth_for(fake, interactive=True), fake.mcp_url)
        assert "/as/token" not in fake.paths()  # the code never reached the token endpoint


def test_right_iss_is_accepted(isolated_dirs):
    with FakeOAuthServer(iss_in_redirect="issuer", iss_supported=True) as fake:
        assert rpc(oauth_for(fake, interactive=True), fake.mcp_url).status_code == 200


def test_expired_token_is_refreshed_before_the_request(isolated_dirs):
    with FakeOAuthServer(expires_in=30) as fake:  # inside the refresh margin: refreshed at once
        assert rpc(oauth_for(fake, interactive=True), fake.mcp_url).status_code == 200
        logins = fake.paths().count("/as/authorize")
        fake.requests.clear()
        assert rpc(oauth_for(fake, interactive=False), fake.mcp_url).status_code == 200
        assert fake.grants() == ["refresh_token"]
        assert fake.paths() == ["/as/token", "/mcp"]  # refreshed first, no 401 round trip
        assert fake.paths().count("/as/authorize") == 0 and logins == 1


def test_token_revoked_early_is_refreshed_on_401(isolated_dirs):
    with FakeOAuthServer() as fake:
        assert rpc(oauth_for(fake, interactive=True), fake.mcp_url).status_code == 200
        fake.expire_access_tokens()
        fake.requests.clear()
        assert rpc(oauth_for(fake, interactive=False), fake.mcp_url).status_code == 200
        assert fake.grants() == ["refresh_token"] and "/as/authorize" not in fake.paths()


def test_revoked_refresh_token_without_a_browser_is_a_clear_auth_error(isolated_dirs):
    with FakeOAuthServer(expires_in=30) as fake:
        assert rpc(oauth_for(fake, interactive=True), fake.mcp_url).status_code == 200
        fake.revoke_refresh_tokens()
        with pytest.raises(AuthError) as info:
            rpc(oauth_for(fake, interactive=False), fake.mcp_url)
        assert info.value.exit_code == 9
        assert info.value.message == ("erp: the stored refresh token was refused (invalid_grant); run `llmc auth login erp`")
        # The dead tokens are gone; the next run says "log in" without asking the server again.
        record = client_stores().tokens.find(fake.mcp_url)
        assert record and record.tokens == Tokens()
        with pytest.raises(AuthError, match="requires authorization; run `llmc auth login erp`"):
            rpc(oauth_for(fake, interactive=False), fake.mcp_url)


def test_revoked_refresh_token_with_a_browser_logs_in_again(isolated_dirs):
    with FakeOAuthServer(expires_in=30) as fake:
        assert rpc(oauth_for(fake, interactive=True), fake.mcp_url).status_code == 200
        fake.revoke_refresh_tokens()
        assert rpc(oauth_for(fake, interactive=True), fake.mcp_url).status_code == 200
        assert fake.paths().count("/as/authorize") == 2


def test_step_up_on_insufficient_scope_then_bounded(isolated_dirs):
    with FakeOAuthServer(call_scope="mcp:write") as fake:
        auth = oauth_for(fake, interactive=True)
        assert rpc(auth, fake.mcp_url).status_code == 200
        response = rpc(auth, fake.mcp_url, "tools/call")
        assert response.json()["result"]["content"][0]["text"] == "scopes: mcp:read mcp:write"
        scopes = [r["query"].get("scope") for r in fake.requests if r["path"] == "/as/authorize"]
        assert scopes == ["mcp:read", "mcp:read mcp:write"]
    # An authorization server that never grants the scope: the step-ups stop after two.
    with FakeOAuthServer(call_scope="mcp:admin", grant_only="mcp:read") as fake:
        auth = oauth_for(fake, interactive=True)
        assert rpc(auth, fake.mcp_url).status_code == 200
        with pytest.raises(AuthError, match="still insufficient scope after 2 step-up"):
            rpc(auth, fake.mcp_url, "tools/call")
        assert fake.paths().count("/as/authorize") == 3


def test_client_credentials_with_secret_from_environment(isolated_dirs, monkeypatch):
    monkeypatch.setenv("ERP_SECRET", "s3cret-value")
    with FakeOAuthServer(clients={"machine": "s3cret-value"}, auth_methods=["client_secret_basic"]) as fake:
        spec = OAuthSpec(client_id="machine", client_secret_env="ERP_SECRET", grant="client_credentials")
        assert rpc(oauth_for(fake, spec, interactive=False), fake.mcp_url).status_code == 200
        token = next(r for r in fake.requests if r["path"] == "/as/token")
        assert token["form"]["grant_type"] == "client_credentials" and token["form"]["scope"] == "mcp:read"
        assert token["headers"]["Authorization"].startswith("Basic ") and "client_secret" not in token["form"]
        assert "/as/authorize" not in fake.paths() and "/as/register" not in fake.paths()
        # The profile's secret is never written to the token store.
        assert all("s3cret-value" not in p.read_text() for p in (isolated_dirs / "state").rglob("*.json"))


def test_preregistered_client_secret_post(isolated_dirs, monkeypatch):
    monkeypatch.setenv("ERP_SECRET", "pre-secret")
    with FakeOAuthServer(clients={"pre": "pre-secret"}, auth_methods=["client_secret_post"], registration=False) as fake:
        spec = OAuthSpec(client_id="pre", client_secret_env="ERP_SECRET")
        assert rpc(oauth_for(fake, spec, interactive=True), fake.mcp_url).status_code == 200
        token = next(r for r in fake.requests if r["path"] == "/as/token")
        assert token["form"]["client_id"] == "pre" and token["form"]["client_secret"] == "pre-secret"
        assert "Authorization" not in token["headers"]


def test_no_registration_possible_says_what_to_configure(isolated_dirs):
    with (
        FakeOAuthServer(registration=False) as fake,
        pytest.raises(AuthError, match=r"offers no client registration; set client_id .*\[servers.erp.oauth\]"),
    ):
        rpc(oauth_for(fake, interactive=True), fake.mcp_url)


def test_missing_secret_variable_is_named(isolated_dirs):
    with FakeOAuthServer(clients={"pre": "x"}) as fake:
        spec = OAuthSpec(client_id="pre", client_secret_env="NOT_SET_ANYWHERE", grant="client_credentials")
        with pytest.raises(AuthError, match="environment variable NOT_SET_ANYWHERE"):
            rpc(oauth_for(fake, spec, interactive=False), fake.mcp_url)


def test_plain_http_authorization_server_is_refused_unless_loopback():
    auth = OAuth(ServerSpec(name="erp", url="https://mcp.example.com/mcp"), interactive=False)
    with pytest.raises(AuthError, match="not https"):
        require_secure(auth.name, "http://auth.example.com/token", "token_endpoint")
    require_secure(auth.name, "http://127.0.0.1:9/token", "token_endpoint")
    require_secure(auth.name, "https://auth.example.com/token", "token_endpoint")


def test_logout_deletes_the_tokens(isolated_dirs):
    with FakeOAuthServer() as fake:
        auth = oauth_for(fake, interactive=True)
        rpc(auth, fake.mcp_url)
        assert client_stores().tokens.find(fake.mcp_url)
        assert auth.logout() == 1
        assert client_stores().tokens.find(fake.mcp_url) is None and not list((isolated_dirs / "state" / "oauth").glob("*"))


def test_migrated_authorization_server_means_registering_again(isolated_dirs):
    with FakeOAuthServer() as fake:
        assert rpc(oauth_for(fake, interactive=True), fake.mcp_url).status_code == 200
        fake.options["issuer_path"] = "/as2"  # the resource now names another authorization server
        fake.expire_access_tokens()
        fake.requests.clear()
        auth = oauth_for(fake, interactive=True)
        assert rpc(auth, fake.mcp_url).status_code == 200
        assert "/as2/register" in fake.paths() and "/as2/authorize" in fake.paths()
        assert not any(p.startswith("/as/") for p in fake.paths())  # nothing sent to the old one
        assert client_stores().tokens.find(fake.mcp_url).issuer == fake.issuer
        assert len(list((isolated_dirs / "state" / "oauth").glob("*.json"))) == 1
        assert any("authorization server changed" in m for m in auth.messages)  # type: ignore[attr-defined]


def test_migration_with_a_preregistered_client_is_an_error(isolated_dirs, monkeypatch):
    monkeypatch.setenv("ERP_SECRET", "pre-secret")
    with FakeOAuthServer(clients={"pre": "pre-secret"}) as fake:
        spec = OAuthSpec(client_id="pre", client_secret_env="ERP_SECRET")
        assert rpc(oauth_for(fake, spec, interactive=True), fake.mcp_url).status_code == 200
        fake.options["issuer_path"] = "/as2"
        fake.expire_access_tokens()
        with pytest.raises(AuthError, match="client_id was issued by the old one"):
            rpc(oauth_for(fake, spec, interactive=True), fake.mcp_url)


def test_concurrent_401s_authorize_once(isolated_dirs):
    import concurrent.futures

    with FakeOAuthServer() as fake:
        auth = oauth_for(fake, interactive=True)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            statuses = list(pool.map(lambda _: rpc(auth, fake.mcp_url).status_code, range(4)))
        assert statuses == [200] * 4
        assert fake.paths().count("/as/authorize") == 1


def test_pasted_redirect_address_is_accepted(monkeypatch):
    """--no-browser over SSH: the person pastes the address the browser was sent to."""
    import io

    from llmc_cli.mcp.auth.loopback import LoopbackListener

    monkeypatch.setattr("sys.stdin", io.StringIO("http://127.0.0.1:1/callback?code=abc&state=xyz\n"))
    listener = LoopbackListener(0)
    try:
        assert listener.wait(10, paste=True) == {"code": "abc", "state": "xyz"}
    finally:
        listener.close()


def test_no_redirect_in_time_is_an_auth_error():
    from llmc_cli.mcp.auth.loopback import LoopbackListener

    listener = LoopbackListener(0)
    try:
        with pytest.raises(AuthError, match="no authorization response within 0 s"):
            listener.wait(0.2, paste=False)
    finally:
        listener.close()
