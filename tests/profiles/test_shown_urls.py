"""URLs are shown without their secrets: a userinfo password and the values of secret-looking
query parameters read '***' wherever a command prints a profile's URL (profiles show: [state] url
and server urls; servers list/show; the error naming a bad --url); the rest of the URL, and
${VAR} placeholders, stay as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmc_cli.config.secrets import mask_url
from tests.helpers import llmc, profile_file

PROFILE = """
[state]
url = "postgresql://llmc:pg-pass-4411@db.internal:5432/llmc?sslmode=require&sslpassword=ssl-pass-77"
[servers.erp]
url = "https://svc:erp-pass-9@erp.example.com/mcp?api_key=erp-key-123&region=eu&token=${ERP_TOKEN}"
"""
SECRETS = ("pg-pass-4411", "ssl-pass-77", "erp-pass-9", "erp-key-123")


@pytest.mark.parametrize(
    "argv", [["profiles", "show"], ["servers", "show", "erp"], ["servers", "list"], ["servers", "list", "--format", "table"]]
)
def test_commands_that_print_a_profiles_urls_mask_their_secrets(isolated_dirs: Path, argv: list[str]) -> None:
    profile_file(isolated_dirs / "config", PROFILE)
    run = llmc(*argv, env={"COLUMNS": "400"})  # a table wide enough for the whole URL
    assert run.returncode == 0, run.stderr
    for secret in SECRETS:
        assert secret not in run.stdout + run.stderr, (secret, argv)
    assert "https://svc:***@erp.example.com/mcp?api_key=***&region=eu" in run.stdout


def test_profiles_show_masks_the_state_url(isolated_dirs: Path) -> None:
    profile_file(isolated_dirs / "config", PROFILE)
    state = llmc("profiles", "show").json()["profile"]["state"]["url"]
    assert state == "postgresql://llmc:***@db.internal:5432/llmc?sslmode=require&sslpassword=***"


def test_a_bad_url_is_refused_without_its_password(isolated_dirs: Path) -> None:
    run = llmc("servers", "add", "x", "--url", "ftp://u:ftp-pass-55@h/x")
    assert run.returncode == 2 and "ftp-pass-55" not in run.stderr and "ftp://u:***@h/x" in run.stderr


@pytest.mark.parametrize(
    "url, shown",
    [
        ("https://h/mcp", "https://h/mcp"),
        ("https://user@h/mcp?q=1", "https://user@h/mcp?q=1"),  # no password: nothing to mask
        ("https://u:p@[::1]:8443/x?access_token=a%20b&x=1#frag", "https://u:***@[::1]:8443/x?access_token=***&x=1#frag"),
        ("https://u:${PW}@h/x", "https://u:${PW}@h/x"),  # a placeholder is no secret
        ("host=db port=5432 password='a b' user=x", "host=db port=5432 password=*** user=x"),
    ],
)
def test_mask_url(url: str, shown: str) -> None:
    assert mask_url(url) == shown
