"""`llmc auth login|status|logout` through the installed llmc against the fake authorization server:
what a user sees, exit codes, and that no token or secret ever reaches stdout or stderr."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from pathlib import Path

from tests.auth.fake_oauth import FakeOAuthServer
from tests.helpers import llmc, llmc_executable

BROWSER = str(Path(__file__).with_name("browser.py"))


def write_profile(home: Path, text: str) -> None:
    directory = home / "config" / "profiles"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "default.toml").write_text(text)


def test_login_status_logout_without_printing_tokens(isolated_dirs, monkeypatch):
    monkeypatch.setenv("ERP_SECRET", "very-secret-client-secret")
    with FakeOAuthServer(
        clients={"llmc-erp": "very-secret-client-secret"}, auth_methods=["client_secret_basic"], registration=False
    ) as fake:
        write_profile(
            isolated_dirs,
            f'[servers.erp]\nurl = "{fake.mcp_url}"\n\n[servers.erp.oauth]\n'
            f'client_id = "llmc-erp"\nclient_secret_env = "ERP_SECRET"\n',
        )
        login = llmc("auth", "login", "erp", env={"BROWSER": BROWSER})
        assert login.returncode == 0, login.stderr
        view = json.loads(login.stdout)
        assert view["server"] == "erp" and view["serverUrl"] == fake.mcp_url and view["issuer"] == fake.issuer
        assert view["hasAccessToken"] and view["hasRefreshToken"] and view["scope"] == "mcp:read"
        assert "opening a browser" in login.stderr and "authorized erp" in login.stderr

        status = llmc("auth", "status")
        assert status.returncode == 0
        (row,) = json.loads(status.stdout)["logins"]
        assert row["clientId"] == "llmc-erp" and row["registration"] == "profile" and not row["expired"]

        outputs = login.stdout + login.stderr + status.stdout + status.stderr
        assert fake.issued and not any(token in outputs for token in fake.issued)
        assert "very-secret-client-secret" not in outputs
        stored = (isolated_dirs / "state" / "oauth").glob("*.json")
        assert all("very-secret-client-secret" not in p.read_text() for p in stored)  # stays in the env

        logout = llmc("auth", "logout", "erp")
        assert logout.returncode == 0 and json.loads(logout.stdout) == {"server": "erp", "removedCount": 1}
        assert json.loads(llmc("auth", "status").stdout) == {"logins": [], "errors": []}
        again = llmc("auth", "logout", "erp")
        assert json.loads(again.stdout)["removedCount"] == 0 and "no stored login" in again.stderr


def test_login_no_browser_prints_the_url_and_waits_for_the_redirect(isolated_dirs):
    with FakeOAuthServer() as fake:
        # A BROWSER that fails proves none is started.
        proc = subprocess.Popen(
            [llmc_executable(), "auth", "login", fake.mcp_url, "--no-browser"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "BROWSER": "/bin/false"},
        )
        try:
            url = None
            for _ in range(20):  # bounded: the URL comes within a few lines
                line = proc.stderr.readline()  # type: ignore[union-attr]
                if line.strip().startswith(f"{fake.issuer}/authorize?"):
                    url = line.strip()
                    break
            assert url, "no authorization URL printed"
            with urllib.request.urlopen(url, timeout=20) as response:  # the person's browser
                assert b"llmc received the authorization" in response.read()
            stdout, stderr = proc.communicate(timeout=30)
        finally:
            proc.kill()
        assert proc.returncode == 0, stderr
        assert json.loads(stdout)["hasAccessToken"] is True
        assert not any(token in stdout + stderr for token in fake.issued)


def test_refused_login_is_one_line_exit_9(isolated_dirs):
    with FakeOAuthServer(resource="https://evil.example.com/mcp") as fake:
        result = llmc("auth", "login", fake.mcp_url, env={"BROWSER": BROWSER})
        assert result.returncode == 9
        assert result.stdout == ""
        assert result.stderr.strip().splitlines() == [
            f"llmc: {fake.mcp_url}: the protected resource metadata names resource 'https://evil.example.com/mcp',"
            f" not this server ({fake.mcp_url}); refusing to authorize"
        ]
        assert "/as/authorize" not in fake.paths()


def test_login_to_a_stdio_server_is_a_usage_error(isolated_dirs):
    write_profile(isolated_dirs, '[servers.local]\ncommand = "true"\n')
    result = llmc("auth", "login", "local")
    assert result.returncode == 2 and "not a remote server" in result.stderr
