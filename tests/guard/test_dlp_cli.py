"""DLP on results through the real CLI (in-process) against an `mcp` SDK server whose results are
full of personal data and keys (tests/peers/leaky_records.py): `redact` replaces each finding in
content text, structuredContent, error messages, resources and prompts before stdout, --text, the
cache and the audit see it; `block` fails the call with exit 4 and shows nothing; the audit's
outcome record counts findings by kind and never holds a value; clean technical text passes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import audit_trail, llmc, profile_file, sdk_server
from tests.peers import leaky_records as peer

ALL = '["email", "phone", "credit_card", "iban", "secret", "private_key", "profile_secret"]'


def leaky_profile(isolated_dirs: Path, extra: str = "", server_extra: str = "", top: str = "") -> None:
    command = sdk_server("leaky_records.py")
    profile_file(
        isolated_dirs / "config",
        f"{top}[servers.crm]\ncommand = {json.dumps(command[0])}\nargs = [{json.dumps(command[1])}]\n"
        f'env = {{ CRM_API_TOKEN = "${{CRM_API_TOKEN:-}}" }}\n{server_extra}\n{extra}',
    )


def outcomes(isolated_dirs: Path) -> list[dict[str, Any]]:
    return [r for r in audit_trail(isolated_dirs / "state") if r.get("event") == "outcome"]


def found(record: dict[str, Any]) -> dict[str, int]:
    """The DLP findings of an outcome record, by kind (the pipeline's findings: one per kind)."""
    return {f["kind"]: f["count"] for f in record.get("findings", []) if f.get("inspector") == "dlp"}


VALUES = (peer.EMAIL, peer.PHONE, peer.CARD, peer.IBAN, peer.GITHUB, peer.AWS, peer.ANTHROPIC, "MIIEowIBAAKCAQEA7bq9x2h")


def assert_nothing_leaks(*texts: str) -> None:
    for text in texts:
        for value in VALUES:
            assert value not in text, value


@pytest.mark.usefixtures("isolated_dirs")
def test_redact_every_kind_in_text_results(isolated_dirs: Path) -> None:
    leaky_profile(isolated_dirs, f"[dlp]\nredact = {ALL}\n")
    out = {}
    for tool in ("customers", "payment", "config"):
        proc = llmc("call", f"crm.{tool}")
        assert proc.returncode == 0, proc.stderr
        out[tool] = proc.json()["content"][0]["text"]
    assert out["customers"] == "Customer: Maria Garcia\nEmail: [REDACTED:email]\nPhone: [REDACTED:phone]\nSince: 2021-07-15"
    assert "card [REDACTED:credit_card], payout to IBAN [REDACTED:iban], amount EUR 42.50" in out["payment"]
    assert "ORD-2024-551234" in out["payment"]
    assert out["config"].count("[REDACTED:secret]") == 3 and "[REDACTED:private_key]" in out["config"]
    assert_nothing_leaks(*out.values())
    records = outcomes(isolated_dirs)
    # counted per occurrence: the SDK sends a str result as text and as structuredContent
    assert [found(r) for r in records] == [
        {"email": 2, "phone": 2},
        {"credit_card": 2, "iban": 2},
        {"secret": 6, "private_key": 2},
    ]
    assert_nothing_leaks(json.dumps(audit_trail(isolated_dirs / "state")))


@pytest.mark.usefixtures("isolated_dirs")
def test_redact_structured_content_text_mode_and_the_audit_result(isolated_dirs: Path) -> None:
    leaky_profile(isolated_dirs, f"[dlp]\nredact = {ALL}\n", top="audit_results = true\n")
    proc = llmc("call", "crm.customer")
    assert proc.returncode == 0, proc.stderr
    structured = proc.json()["structuredContent"]
    assert structured == {
        "name": "Maria Garcia",
        "email": "[REDACTED:email]",
        "phone": "[REDACTED:phone]",
        "notes": ["paid with [REDACTED:credit_card]"],
    }
    text = llmc("call", "crm.customer", "--text")
    assert text.returncode == 0 and "[REDACTED:email]" in text.stdout
    assert_nothing_leaks(proc.stdout, text.stdout, json.dumps(audit_trail(isolated_dirs / "state")))


@pytest.mark.usefixtures("isolated_dirs")
def test_block_fails_the_call_with_exit_4_and_shows_nothing(isolated_dirs: Path) -> None:
    leaky_profile(isolated_dirs, '[dlp]\nredact = ["email", "phone"]\nblock = ["credit_card", "iban"]\n')
    proc = llmc("call", "crm.payment")
    assert proc.returncode == 4
    assert proc.stdout == ""
    assert "dlp.block:credit_card" in proc.stderr and "credit_card (2), iban (2)" in proc.stderr
    assert_nothing_leaks(proc.stderr)
    record = outcomes(isolated_dirs)[-1]
    assert record["outcome"] == "denied" and record["rule"] == "dlp.block:credit_card"
    assert found(record) == {"credit_card": 2, "iban": 2}
    # a result with none of the blocked kinds is redacted and shown
    ok = llmc("call", "crm.customers")
    assert ok.returncode == 0 and "[REDACTED:email]" in ok.stdout


@pytest.mark.usefixtures("isolated_dirs")
def test_error_messages_are_redacted(isolated_dirs: Path) -> None:
    leaky_profile(isolated_dirs, '[dlp]\nredact = ["email"]\n')
    proc = llmc("call", "crm.fail")
    assert proc.returncode == 1
    assert "no mailbox for [REDACTED:email]" in proc.stdout
    assert peer.EMAIL not in proc.stdout + proc.stderr


@pytest.mark.usefixtures("isolated_dirs")
def test_profile_secrets_are_redacted(isolated_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRM_API_TOKEN", "crm-tok-5f1e9a7c2b")
    leaky_profile(isolated_dirs, '[dlp]\nredact = ["profile_secret"]\n')
    proc = llmc("call", "crm.env", "name=CRM_API_TOKEN")
    assert proc.returncode == 0, proc.stderr
    assert proc.json()["content"][0]["text"] == "CRM_API_TOKEN is [REDACTED:profile_secret]"


@pytest.mark.usefixtures("isolated_dirs")
def test_resources_and_prompts_are_redacted(isolated_dirs: Path) -> None:
    leaky_profile(isolated_dirs, f"[dlp]\nredact = {ALL}\n")
    read = llmc("resources", "read", "crm.crm://customers")
    assert read.returncode == 0, read.stderr
    assert "[REDACTED:email]" in read.stdout
    got = llmc("prompts", "get", "crm.write_to")
    assert got.returncode == 0, got.stderr
    assert "[REDACTED:email]" in got.stdout and "[REDACTED:credit_card]" in got.stdout
    assert_nothing_leaks(read.stdout, got.stdout)


@pytest.mark.usefixtures("isolated_dirs")
def test_clean_technical_text_passes_untouched(isolated_dirs: Path) -> None:
    leaky_profile(isolated_dirs, f"[dlp]\nredact = {ALL}\n")
    proc = llmc("call", "crm.status")
    assert proc.returncode == 0, proc.stderr
    assert proc.json()["content"][0]["text"] == peer.CLEAN
    assert "findings" not in outcomes(isolated_dirs)[-1]


@pytest.mark.usefixtures("isolated_dirs")
def test_server_lists_override_and_dlp_false_exempts(isolated_dirs: Path) -> None:
    leaky_profile(isolated_dirs, f"[dlp]\nredact = {ALL}\n", 'redact = ["phone"]')
    proc = llmc("call", "crm.customers")
    assert peer.EMAIL in proc.stdout and "[REDACTED:phone]" in proc.stdout
    leaky_profile(isolated_dirs, f'[dlp]\nredact = {ALL}\nblock = ["email"]\n', "dlp = false")
    proc = llmc("call", "crm.customers")
    assert proc.returncode == 0 and peer.EMAIL in proc.stdout


@pytest.mark.usefixtures("isolated_dirs")
def test_cache_holds_the_redacted_result(isolated_dirs: Path) -> None:
    leaky_profile(isolated_dirs, '[dlp]\nredact = ["email", "phone"]\n[cache]\ntools = ["crm.*"]\n')
    first = llmc("call", "crm.customers")
    second = llmc("call", "crm.customers")
    assert first.returncode == second.returncode == 0
    assert second.json().get("cached") is True
    assert "[REDACTED:email]" in second.stdout
    for path in (isolated_dirs / "state").rglob("*"):
        if path.is_file():
            assert peer.EMAIL.encode() not in path.read_bytes(), path


@pytest.mark.usefixtures("isolated_dirs")
def test_batch_calls_are_inspected(isolated_dirs: Path, tmp_path: Path) -> None:
    leaky_profile(isolated_dirs, '[dlp]\nredact = ["email", "phone"]\nblock = ["credit_card"]\n')
    calls = tmp_path / "calls.jsonl"
    calls.write_text('{"tool": "crm.customers"}\n{"tool": "crm.payment"}\n', encoding="utf-8")
    proc = llmc("call", "--batch", str(calls))
    lines = proc.lines()
    assert "[REDACTED:email]" in json.dumps(lines[0])
    assert lines[1]["error"]["rule"] == "dlp.block:credit_card" if "error" in lines[1] else False, lines[1]
    assert_nothing_leaks(proc.stdout)


@pytest.mark.parametrize(
    "text, message",
    [
        ('[dlp]\nredact = ["emial"]\n', "unknown detector 'emial' (did you mean 'email'?)"),
        ('[dlp]\nblock = ["credit-card"]\n', "did you mean 'credit_card'?"),
        ('[servers.x]\ncommand = "x"\nredact = ["ssn"]\n', "unknown detector 'ssn'"),
        ('[dlp]\nphone_regions = ["usa"]\n', "two-letter region code"),
    ],
)
@pytest.mark.usefixtures("isolated_dirs")
def test_unknown_detectors_are_config_errors(isolated_dirs: Path, text: str, message: str) -> None:
    profile_file(isolated_dirs / "config", text)
    proc = llmc("tools", "list")
    assert proc.returncode == 3
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert sys.executable  # the profile was read by this interpreter's llmc
