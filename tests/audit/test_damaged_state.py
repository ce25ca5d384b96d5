"""State files llmc keeps for its trail, damaged (a disk error, an editor, a bad restore): the
command says which file and what to do next, exit 3 and the tool not run; `llmc audit verify`
reports a damaged anchor as a failure of the trail (exit 1, JSON), not an error of its own."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.helpers import PEERS, llmc

STDIO = ["--stdio", shlex.join([sys.executable, str(PEERS / "sdk_server.py")])]


def call() -> object:
    return llmc("call", "add", "a=1", "b=2", *STDIO)


@pytest.mark.parametrize(
    "damage", [b"xx", b"\xff\xfe", b"[1, 2]", b'{"head": 1}'], ids=["not JSON", "not UTF-8", "a list", "wrong shape"]
)
def test_a_damaged_anchor_stops_calls_and_verify_says_what_to_do(isolated_dirs: Path, damage: bytes) -> None:
    assert call().returncode == 0
    anchor = isolated_dirs / "state" / "audit.jsonl.anchor"
    anchor.write_bytes(damage)
    proc = call()
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == ""  # the tool was not run
    assert proc.stderr == (
        f"llmc: cannot write the audit log {isolated_dirs / 'state' / 'audit.jsonl'}: the audit anchor {anchor} "
        "is damaged: run `llmc audit verify`; the tool was not run\n"
    )
    verify = llmc("audit", "verify")
    assert verify.returncode == 1, verify.stderr
    report = json.loads(verify.stdout)
    assert report["ok"] is False and report["records"] == 2 and report["file"] == str(anchor)
    assert "the anchor is damaged" in report["reason"] and "delete the anchor" in report["reason"]
    anchor.unlink()  # what the message says to do, once the log is checked
    assert call().returncode == 0
    assert json.loads(llmc("audit", "verify").stdout)["ok"] is True


def test_a_damaged_approval_key_names_the_fix(isolated_dirs: Path) -> None:
    assert call().returncode == 0
    key = isolated_dirs / "state" / "approval.key"
    key.write_bytes(b"\xff" * 70 + b"\n")
    proc = call()
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr == (
        f"llmc: the approval key {key} is damaged (not ASCII text): remove it to make a new one "
        "(approved hashes must then be approved again)\n"
    )
