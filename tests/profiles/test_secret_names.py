"""The one rule for which names hold secrets (config.secrets.is_secret_name): profile env and
header names, argument and result keys in audit records, and the environment variables whose
values the audit masks all go through it. One row per name."""

from __future__ import annotations

import pytest

from llmc_cli.audit import mask_secrets
from llmc_cli.config.secrets import is_secret_name

NAMES = [
    ("OPENAI_API_KEY", True),
    ("apiKey", True),
    ("x-api-key", True),
    ("APIKEY", True),
    ("AWS_ACCESS_KEY_ID", True),
    ("AccessKeyId", True),
    ("GITHUB_TOKEN", True),
    ("githubtoken", True),
    ("accessToken", True),
    ("password", True),
    ("DB_PASSWD", True),
    ("pass", True),
    ("passphrase", True),
    ("client_secret", True),
    ("Authorization", True),
    ("Proxy-Authorisation", True),
    ("SSH_AUTH_SOCK", True),
    ("OAUTH_CLIENT", True),
    ("Cookie", True),
    ("credentials", True),
    ("PRIVATE_KEY", True),
    ("GH_PAT", True),
    ("session_id", True),
    ("Mcp-Session-Id", True),
    ("author", False),
    ("keyboard", False),
    ("MONKEY", False),
    ("compass", False),
    ("bypass_cache", False),
    ("PATH", False),
    ("pattern", False),
    ("HOME", False),
    ("query", False),
    ("", False),
]


@pytest.mark.parametrize("name, secret", NAMES)
def test_which_names_hold_secrets(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_the_audit_masks_by_the_same_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GH_PAT", "ghp-0123456789")
    monkeypatch.setenv("MONKEY", "banana-split")  # not a secret name: its value stays
    record = {name: "v" for name, _ in NAMES if name} | {"text": "ghp-0123456789 and banana-split"}
    masked = mask_secrets(record)
    assert {k for k, v in masked.items() if v == "***"} == {name for name, secret in NAMES if secret}
    assert masked["text"] == "*** and banana-split"
