"""The OAuth hooks as the HTTP transport uses them, against the protected fake server of the auth
tests (tests/auth/fake_oauth.py): 401 -> authorize -> the same request again with the token,
403 insufficient_scope -> step-up; the token is sent on every request and never in an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmc_cli.errors import AuthError
from llmc_cli.mcp.auth import OAuth
from llmc_cli.mcp.client import connect
from llmc_cli.mcp.session import ClientSession
from llmc_cli.mcp.transports.streamable_http import StreamableHttpTransport
from llmc_cli.model import ServerSpec
from llmc_cli.store import client_stores
from tests.auth.fake_oauth import FakeOAuthServer

BROWSER = str(Path(__file__).resolve().parent.parent / "auth" / "browser.py")


def test_401_and_403_are_authorized_and_the_request_sent_again(monkeypatch):
    monkeypatch.setenv("BROWSER", BROWSER)
    with FakeOAuthServer(call_scope="mcp:write") as fake:
        with connect(
            ServerSpec("erp", url=fake.mcp_url, timeout=20), stores=client_stores()
        ) as session:  # auth from OAuth.for_spec
            assert [t["name"] for t in session.list_tools()] == ["whoami"]
            text = session.call_tool("whoami", {})["content"][0]["text"]
        assert text == "scopes: mcp:read mcp:write"
        assert fake.paths().count("/as/authorize") == 2  # the login, then the step-up for tools/call
        assert fake.issued


def test_without_a_way_to_log_in_a_401_is_an_auth_error_naming_the_command(monkeypatch):
    monkeypatch.delenv("BROWSER", raising=False)
    with FakeOAuthServer() as fake:
        spec = ServerSpec("erp", url=fake.mcp_url, timeout=20)
        auth = OAuth(spec, interactive=False, notify=lambda _message: None)
        with (
            ClientSession(StreamableHttpTransport(fake.mcp_url, timeout=20, auth=auth), name="erp", timeout=20) as session,
            pytest.raises(AuthError) as info,
        ):
            session.initialize()
        assert info.value.exit_code == 9 and "llmc auth login erp" in info.value.message


def test_a_static_authorization_header_is_used_as_given(monkeypatch):
    monkeypatch.delenv("BROWSER", raising=False)
    with FakeOAuthServer() as fake:
        spec = ServerSpec("erp", url=fake.mcp_url, headers={"Authorization": "Bearer not-a-real-token"}, timeout=20)
        assert OAuth.for_spec(spec) is None
        with pytest.raises(AuthError) as info:
            connect(spec)
        assert "HTTP 401: authorization required" in info.value.message
        assert "not-a-real-token" not in info.value.message
        assert not any(p.startswith("/as/") for p in fake.paths())
