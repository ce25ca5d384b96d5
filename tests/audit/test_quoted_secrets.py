"""No secret leaves by any field of an audit record: a server that quotes back a secret argument
(`password`) and a secret the profile hands it (env API_TOKEN = "${UPSTREAM_CRED}", a variable
whose name says nothing) gets both masked in the outcome's `error` and, with audit_results, in
`result` — raw, JSON-escaped (once and twice), URL-encoded, as a key — and the chain verifies."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from tests.helpers import llmc, profile_file, sdk_server

PASSWORD = 'Hunter"2 &x/y\\z'  # a quote, a backslash, a space, & and /: every spelling differs
TOKEN = "zq-upstream-9876"


def spellings(secret: str) -> set[str]:
    once = json.dumps(secret)[1:-1]
    return {secret, once, json.dumps(once)[1:-1], quote(secret, safe=""), quote_plus(secret)}


@pytest.fixture
def quoting_profile(isolated_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("UPSTREAM_CRED", TOKEN)
    command, script = sdk_server("quoting_server.py")
    profile_file(
        isolated_dirs / "config",
        f"""audit_results = true
[servers.q]
command = "{command}"
args = ["{script}"]
env = {{ API_TOKEN = "${{UPSTREAM_CRED}}" }}
""",
    )
    return isolated_dirs / "state" / "audit.jsonl"


@pytest.mark.parametrize(
    "fail_with, outcome, code", [("rpc", "transport_error", 6), ("tool", "tool_error", 1), ("none", "ok", 0)]
)
def test_a_server_quoting_secrets_back_leaves_none_in_any_field(
    quoting_profile: Path, fail_with: str, outcome: str, code: int
) -> None:
    arguments = {"user": "ann", "password": PASSWORD, "fail_with": fail_with}
    result = llmc("call", "q.login", "--json", json.dumps(arguments))
    assert result.returncode == code, result.stderr
    if fail_with == "rpc":  # nor in llmc's own error line (a result, error or not, is the tool's to show)
        assert "login failed for password *** (token ***)" in result.stderr
        for secret in spellings(PASSWORD) | spellings(TOKEN):
            assert secret not in result.stderr, (secret, result.stderr)
    text = quoting_profile.read_text(encoding="utf-8")
    records = [json.loads(line) for line in text.splitlines()]
    assert [r["event"] for r in records] == ["decision", "outcome"] and records[1]["outcome"] == outcome
    for secret in spellings(PASSWORD) | spellings(TOKEN):
        assert secret not in text, (secret, text)
    assert records[0]["arguments"] == {"user": "ann", "password": "***", "fail_with": fail_with}
    quoted = records[1]["error"] if fail_with == "rpc" else json.dumps(records[1]["result"])
    assert "login failed for password *** (token ***)" in quoted  # masked, not dropped: the rest reads
    if fail_with == "none":  # a secret used as a key is masked too, the structure kept
        assert records[1]["result"]["structuredContent"]["***"] == "the password as a key"
    assert json.loads(llmc("audit", "verify").stdout)["ok"] is True


def test_a_short_secret_argument_is_masked_as_a_word_not_inside_others(quoting_profile: Path) -> None:
    arguments = {"user": "ann", "password": "fail", "fail_with": "rpc"}  # the error reads "login failed ..."
    llmc("call", "q.login", "--json", json.dumps(arguments))
    records = [json.loads(line) for line in quoting_profile.read_text(encoding="utf-8").splitlines()]
    assert "login failed for password *** (token ***)" in records[1]["error"]
    assert records[0]["arguments"]["user"] == "ann" and records[1]["outcome"] == "transport_error"


def test_the_masker_walks_any_depth_without_recursion() -> None:
    from llmc_cli.config.secrets import Masker

    value: object = "token hunter22"
    for _ in range(100_000):
        value = [value]
    masked = Masker({"hunter22"})(value)
    for _ in range(100_000):
        masked = masked[0]  # type: ignore[index]
    assert masked == "token ***"


def test_environment_secrets_include_what_the_profile_hands_its_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A header's credential after its scheme, an env entry's expansion, a URL's password and
    secret query value: secrets whatever the variable behind them is called."""
    from llmc_cli.config.schema import Profile, ServerConfig, StateConfig
    from llmc_cli.config.secrets import environment_secrets

    monkeypatch.setenv("UPSTREAM", "plain-named-value")
    monkeypatch.setenv("HDR", "hdr-credential")
    profile = Profile(
        servers={
            "a": ServerConfig(command="x", env={"API_TOKEN": "${UPSTREAM}", "MODE": "fast"}),
            "b": ServerConfig(url="https://u:url-pass@h/mcp?api_key=q-secret&page=2", headers={"Authorization": "Bearer ${HDR}"}),
        },
        state=StateConfig(url="postgresql://llmc:db-pass@db/llmc"),
    )
    found = environment_secrets(profile)
    assert {"plain-named-value", "Bearer hdr-credential", "hdr-credential", "url-pass", "q-secret", "db-pass"} <= found
    assert not {"fast", "2", "u", "llmc"} & found
