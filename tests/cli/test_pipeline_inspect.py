"""The pipeline's inspect stage (services/inspect.py): inspectors registered for a profile see
every result before anyone else does, through the real CLI (in-process) in front of `mcp` SDK
servers: a changed result is what the command prints, what the cache keeps and what the outcome
record hashes; findings land in the outcome record (masked); a denial is audited and exits 4
with nothing of the result printed. Calls, cached calls, `call --batch` and reads alike."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

from tests.helpers import audit_trail, llmc, profile_file, sdk_server

SECRET = "tok-9a8b7c6d5e4f3a2b"


def write_profile() -> None:
    counting = sdk_server("counting_server.py")[1]
    profile_file(
        Path(os.environ["LLMC_CONFIG_DIR"]),
        f"""
[servers.count]
command = {json.dumps(sys.executable)}
args = [{json.dumps(counting)}]
env = {{ COUNT_FILE = {json.dumps(os.environ["LLMC_STATE_DIR"] + "-calls.txt")} }}
sandbox = "none"

[servers.sdk]
command = {json.dumps(sys.executable)}
args = [{json.dumps(sdk_server("sdk_server.py")[1])}]
sandbox = "none"

[cache]
tools = ["count.search"]
""",
    )


class Redact:
    """Replaces "#" (a counting_server call number) and "hello" in every text with [redacted], and says so."""

    name = "redact"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, request, profile, server, result):  # type: ignore[no-untyped-def]
        from llmc_cli.services import Inspection

        self.seen.append(f"{request.server}:{type(request).__name__}:{server.name if server else None}:{profile.name}")
        blocks = result.get("content") or result.get("contents") or []
        if not any("#" in str(b.get("text", "")) or "hello" in str(b.get("text", "")) for b in blocks):
            return None
        changed = json.loads(json.dumps(result).replace("#", "[redacted]").replace("hello", "[redacted]"))
        return Inspection(result=changed, findings=({"kind": "word", "count": 1, "note": f"saw {SECRET}"},))


class Block:
    name = "block"

    def __call__(self, request, profile, server, result):  # type: ignore[no-untyped-def]
        from llmc_cli.policy import Decision
        from llmc_cli.services import Inspection

        if getattr(request, "tool", None) == "plain":
            return Inspection(findings=({"kind": "label", "label": "secret"},), deny=Decision("deny", "dlp: block", "classified"))
        return None


@pytest.fixture
def inspectors(monkeypatch: pytest.MonkeyPatch) -> Redact:
    from llmc_cli.services import inspect

    redact = Redact()
    monkeypatch.setattr(inspect, "inspectors_for", lambda profile: (redact, Block()))
    monkeypatch.setenv("SERVICE_API_TOKEN", SECRET)  # a secret of the environment: masked in records
    write_profile()
    return redact


def outcomes() -> list[dict]:
    return [r for r in audit_trail(Path(os.environ["LLMC_STATE_DIR"])) if r["event"] == "outcome"]


def test_a_changed_result_is_printed_cached_and_hashed_with_its_findings(inspectors: Redact) -> None:
    first = llmc("call", "count.search", "query=a")
    assert first.returncode == 0, first.stderr
    text = first.json()["content"][0]["text"]
    assert text == "a [redacted]1"
    second = llmc("call", "count.search", "query=a")  # from the cache: inspected again
    assert second.json()["cached"] is True and second.json()["content"][0]["text"] == text
    records = outcomes()
    assert [r["outcome"] for r in records] == ["ok", "cached"]
    assert records[0]["findings"] == [{"inspector": "redact", "kind": "word", "count": 1, "note": "saw ***"}]
    assert "findings" not in records[1]  # the cache kept the redacted result: nothing left to find
    assert len(inspectors.seen) == 2  # ...but the cached answer was inspected all the same
    cached = Path(os.environ["LLMC_STATE_DIR"]).rglob("*")
    assert not any("a #1" in p.read_text(errors="replace") for p in cached if p.is_file())  # only what was delivered is kept
    assert inspectors.seen[0] == "count:ToolCall:count:default"


def test_a_denial_by_an_inspector_is_audited_and_prints_nothing_of_the_result(inspectors: Redact) -> None:
    proc = llmc("call", "count.plain", "name=x")
    assert proc.returncode == 4 and proc.stdout == ""
    assert "classified [dlp: block]" in proc.stderr
    (record,) = outcomes()
    assert record["outcome"] == "denied" and record["rule"] == "dlp: block" and record["reason"] == "classified"
    assert record["findings"] == [  # every inspector's, in order, up to the one that denied
        {"inspector": "redact", "kind": "word", "count": 1, "note": "saw ***"},
        {"inspector": "block", "kind": "label", "label": "secret"},
    ]
    assert "resultSha256" not in record


def test_a_batch_passes_each_result_through_the_inspectors(inspectors: Redact) -> None:
    lines = "".join(
        json.dumps({"id": i, "tool": tool, "arguments": args}) + "\n"
        for i, (tool, args) in enumerate([("count.search", {"query": "b"}), ("count.plain", {"name": "y"})])
    )
    proc = llmc("call", "--batch", "-", stdin=lines)
    assert proc.returncode == 4, proc.stderr
    first, second = (json.loads(line) for line in proc.stdout.splitlines())
    assert "[redacted]" in first["content"][0]["text"]
    assert second["error"]["error"] == "denied" and "content" not in second
    assert sorted(r["outcome"] for r in outcomes()) == ["denied", "ok"]


def test_a_read_is_inspected_too(inspectors: Redact) -> None:
    proc = llmc("resources", "read", "sdk.test://greeting")
    assert proc.returncode == 0, proc.stderr
    assert proc.json()["contents"][0]["text"] == "[redacted] from a resource"
    (record,) = outcomes()
    assert record["findings"][0]["inspector"] == "redact"
    raw = {k: v for k, v in proc.json().items() if k != "server"}
    canonical = json.dumps(raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert record["resultSha256"] == hashlib.sha256(canonical).hexdigest()  # what was delivered
    assert any(s.startswith("sdk:Read:sdk:") for s in inspectors.seen)
