"""Tool arguments nested deeper than 64 levels are refused with one message on every path — a
person's --json (inline, @FILE), a KEY:=JSON pair, a batch line — and nothing is decided or run;
64 levels run. 100,000 levels (past what Python's JSON parser takes) get the same line, no
traceback. (The gateway's paths: tests/gateway/test_deep_arguments.py; a model's: test_bad_input.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmc_cli.model import ARGUMENTS_TOO_DEEP
from tests.faults.test_bad_input import STDIO, one_line
from tests.helpers import llmc


def nested(levels: int) -> str:
    """An arguments object `levels` deep: {"message": [[...]]}."""
    return '{"message": ' + "[" * (levels - 1) + '"x"' + "]" * (levels - 1) + "}"


@pytest.mark.parametrize("levels", [65, 100_000])
@pytest.mark.parametrize("how", ["inline", "file"])
def test_call_json_too_deep_is_refused_with_the_one_message(isolated_dirs: Path, levels: int, how: str) -> None:
    if how == "file":
        (isolated_dirs / "deep.json").write_text(nested(levels))
        value = f"@{isolated_dirs / 'deep.json'}"
    else:
        value = nested(levels)
    proc = llmc("call", "echo", "--json", value, *STDIO)
    assert proc.returncode == 2, proc.stderr
    assert one_line(proc.stderr).rstrip().endswith(f": {ARGUMENTS_TOO_DEEP}") and proc.stdout == ""
    assert not (isolated_dirs / "state" / "audit.jsonl").exists()


def test_a_pair_that_makes_the_arguments_too_deep_is_refused(isolated_dirs: Path) -> None:
    """message:=JSON 64 deep is fine on its own; inside the arguments object it is 65."""
    value = "[" * 64 + '"x"' + "]" * 64
    proc = llmc("call", "--no-validate", "echo", f"message:={value}", *STDIO)
    assert proc.returncode == 2, proc.stderr
    assert one_line(proc.stderr).rstrip() == f"llmc: {ARGUMENTS_TOO_DEEP}"
    assert not (isolated_dirs / "state" / "audit.jsonl").exists()  # refused before any decision
    at_the_limit = llmc("call", "--no-validate", "echo", f"message:={value[1:-1]}", *STDIO)  # 64 levels run
    assert at_the_limit.returncode == 1 and "Input should be a valid string" in at_the_limit.stderr  # the server's say


def test_batch_lines_get_the_same_message_and_64_levels_run(isolated_dirs: Path) -> None:
    lines = [
        json.dumps({"tool": "add", "arguments": {"a": 1, "b": 2}}),
        '{"tool": "echo", "arguments": ' + nested(65) + "}",
        '{"tool": "echo", "arguments": ' + nested(100_000) + "}",
        '{"tool": "echo", "arguments": ' + nested(64) + "}",
    ]  # the line is 65 deep, its arguments 64
    proc = llmc("call", "--batch", "-", "--no-validate", *STDIO, stdin="\n".join(lines) + "\n")
    assert proc.returncode == 2, proc.stderr
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [o.get("error", {}).get("message") for o in out[1:3]] == [f"line {n}: {ARGUMENTS_TOO_DEEP}" for n in (2, 3)]
    assert "error" not in out[0] and "nested" not in json.dumps(out[3])
    assert "Traceback" not in proc.stderr
