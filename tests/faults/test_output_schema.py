"""A tool's result against the outputSchema it declared (2025-06-18 on: the server MUST return
conforming structuredContent, a client SHOULD check): a result that does not conform, or has no
structuredContent, is the server lying about its result — exit 6, one line naming the tool and
the field, an outcome record — for `call`, and in a batch for that line only. An error result is
not checked; a schema that is itself broken leaves the result unchecked.
Against tests/peers/schema_liar.py, a raw server (the SDK's server would refuse to send them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import audit_trail, llmc, profile_file, sdk_server


@pytest.fixture
def liar(isolated_dirs: Path) -> Path:
    command, script = sdk_server("schema_liar.py")
    profile_file(isolated_dirs / "config", f'[servers.s]\ncommand = "{command}"\nargs = ["{script}"]\n')
    return isolated_dirs


def outcomes(dirs: Path) -> list[tuple[str, str]]:
    return [(r["tool"], r["outcome"]) for r in audit_trail(dirs / "state") if r["event"] == "outcome"]


@pytest.mark.parametrize("tool", ["good", "good_ref", "broken_schema"])
def test_a_result_that_conforms_or_a_broken_schema_passes(liar, tool):
    proc = llmc("call", f"s.{tool}", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["structuredContent"]
    assert outcomes(liar) == [(tool, "ok")]


@pytest.mark.parametrize(
    ("tool", "says"),
    [
        (
            "wrong_type",
            "s.wrong_type: the result's structuredContent does not match the tool's outputSchema: n: expected integer, got \"one\"",
        ),
        (
            "missing_field",
            "s.missing_field: the result's structuredContent does not match the tool's outputSchema: (all): missing 'n'",
        ),
        ("no_structured", "s.no_structured: the tool declares an outputSchema but its result has no structuredContent object"),
        (
            "bad_ref",
            "s.bad_ref: the result's structuredContent does not match the tool's outputSchema: day: 'yesterday' does not match",
        ),
    ],
)
def test_a_result_that_breaks_its_schema_is_a_protocol_error(liar, tool, says):
    proc = llmc("call", f"s.{tool}")
    assert proc.returncode == 6 and proc.stdout == ""
    assert proc.stderr.startswith(f"llmc: {says}") and proc.stderr.count("\n") == 1, proc.stderr
    assert outcomes(liar) == [(tool, "transport_error")]
    record = next(r for r in audit_trail(liar / "state") if r["event"] == "outcome")
    assert "outputSchema" in record["error"]


def test_an_error_result_is_not_held_to_the_schema(liar):
    proc = llmc("call", "s.failed", "--format", "json")
    assert proc.returncode == 1 and json.loads(proc.stdout)["isError"] is True
    assert outcomes(liar) == [("failed", "tool_error")]


def test_a_batch_fails_the_lying_line_only(liar):
    lines = "".join(json.dumps({"tool": f"s.{t}"}) + "\n" for t in ["good", "wrong_type", "good_ref"])
    proc = llmc("call", "--batch", "-", stdin=lines)
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == 3 and proc.returncode != 0
    assert "error" not in results[0] and "error" not in results[2]
    assert "outputSchema" in json.dumps(results[1])
    assert outcomes(liar) == [("good", "ok"), ("wrong_type", "transport_error"), ("good_ref", "ok")]
