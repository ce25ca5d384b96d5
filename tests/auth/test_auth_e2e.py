"""A protected server used the way a user does: `llmc tools list` and `llmc call` against a remote
server that answers 401, through the real HTTP transport and the auth hooks. No token ever
appears in stdout, stderr, or any state file other than the token store (the audit log included)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmc_cli.cli.targets import url_name
from tests.auth.fake_oauth import FakeOAuthServer
from tests.helpers import llmc

BROWSER = str(Path(__file__).with_name("browser.py"))


@pytest.fixture(autouse=True)
def no_browser_of_the_developer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run without BROWSER must not open the developer's browser."""
    monkeypatch.delenv("BROWSER", raising=False)


def leaks(fake: FakeOAuthServer, state: Path, *outputs: str) -> list[str]:
    """Every issued token found in the outputs or in a state file outside oauth/."""
    texts = list(outputs) + [
        p.read_text(errors="replace") for p in state.rglob("*") if p.is_file() and "oauth" not in p.relative_to(state).parts
    ]
    return [t for t in fake.issued if any(t in text for text in texts)]


def test_tools_list_and_call_log_in_on_401_without_leaking_tokens(isolated_dirs):
    with FakeOAuthServer(call_scope="mcp:write") as fake:
        listed = llmc("-v", "tools", "list", "--url", fake.mcp_url, env={"BROWSER": BROWSER})  # -v: logs too
        assert listed.returncode == 0, listed.stderr
        assert "whoami" in listed.stdout
        assert fake.paths().count("/as/authorize") == 1
        # The call needs more scope: step-up, with the stored token as the starting point.
        called = llmc("call", "whoami", "--yes", "--url", fake.mcp_url, env={"BROWSER": BROWSER})
        assert called.returncode == 0, called.stderr
        assert "scopes: mcp:read mcp:write" in called.stdout
        assert fake.paths().count("/as/authorize") == 2
        # Stored tokens serve the next run without any authorization server round trip.
        fake.requests.clear()
        again = llmc("tools", "list", "--url", fake.mcp_url)
        assert again.returncode == 0, again.stderr
        assert not any(p.startswith("/as/") for p in fake.paths())
        assert fake.issued
        assert not leaks(
            fake, isolated_dirs / "state", listed.stdout, listed.stderr, called.stdout, called.stderr, again.stdout, again.stderr
        )


def test_expired_token_is_refreshed_and_a_revoked_refresh_token_is_exit_9(isolated_dirs):
    with FakeOAuthServer(expires_in=30) as fake:
        assert llmc("auth", "login", fake.mcp_url, env={"BROWSER": BROWSER}).returncode == 0
        # Expiring within the margin: refreshed before the request, no browser needed.
        refreshed = llmc("tools", "list", "--url", fake.mcp_url)
        assert refreshed.returncode == 0, refreshed.stderr
        assert fake.grants() == ["authorization_code", "refresh_token"]
        fake.revoke_refresh_tokens()
        failed = llmc("tools", "list", "--url", fake.mcp_url)
        assert failed.returncode == 9  # the only server failed: its own exit code
        assert json.loads(failed.stdout) == {"tools": [], "errors": [{**json.loads(failed.stdout)["errors"][0], "exitCode": 9}]}
        assert failed.stderr.strip().splitlines() == [
            f"llmc: {url_name(fake.mcp_url)}: the stored refresh token was refused (invalid_grant); run `llmc auth login {fake.mcp_url}`"
        ]
        assert not leaks(fake, isolated_dirs / "state", refreshed.stdout, refreshed.stderr, failed.stdout, failed.stderr)


def test_no_browser_and_no_token_is_exit_9_with_the_command_to_run(isolated_dirs):
    with FakeOAuthServer() as fake:
        result = llmc("tools", "list", "--url", fake.mcp_url)
        assert result.returncode == 9
        assert result.stderr.strip().splitlines() == [
            f"llmc: {url_name(fake.mcp_url)}: the server requires authorization; run `llmc auth login {fake.mcp_url}`"
        ]
        assert "/as/authorize" not in fake.paths()


def test_status_after_use_shows_no_token(isolated_dirs):
    with FakeOAuthServer() as fake:
        assert llmc("tools", "list", "--url", fake.mcp_url, env={"BROWSER": BROWSER}).returncode == 0
        status = llmc("auth", "status")
        (row,) = json.loads(status.stdout)["logins"]
        assert row["serverUrl"] == fake.mcp_url and row["hasAccessToken"]
        assert not leaks(fake, isolated_dirs / "state", status.stdout, status.stderr)
