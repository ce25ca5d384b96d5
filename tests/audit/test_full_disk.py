"""A full disk under the audit log, through the real CLI: a record that does not fit stops the
call before it runs (exit 3) and leaves no partial line; an outcome that does not fit after the
call ran is reported as such (exit 3); either way the log is cut back to its last complete record,
so once there is space again the next call works and `audit verify` passes. A small tmpfs, so
root only."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers import llmc, node_tool, profile_file

pytestmark = pytest.mark.e2e  # the npm reference server-filesystem

BIG = 40 * 1024  # a result that cannot fit in what is left


@pytest.fixture
def disk(tmp_path: Path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs (the full disk) needs root")
    path = tmp_path / "disk"
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", str(path)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(disk: Path, leave: int) -> Path:
    """Fill the disk, then give back `leave` bytes."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for _ in range(1024):  # the disk is 256k: full long before
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def files_and_profile(isolated_dirs: Path, log: Path, extra: str = "") -> Path:
    """A directory with a file too big for what is left on the disk, served by the filesystem
    server of a profile that logs (results included) to `log`; the directory."""
    files = isolated_dirs / "files"
    files.mkdir()
    (files / "big.txt").write_text("y" * BIG)
    profile_file(
        isolated_dirs / "config",
        f"""
audit_log = "{log}"
audit_results = true
[servers.fs]
command = "{node_tool("mcp-server-filesystem")}"
args = ["{files}"]
{extra}""",
    )
    return files


# what does not fit -> (the call, what it must not have done / must say)
CASES = {
    # The decision record carries the arguments: 8 KiB of content needs pages the disk has not got
    # (a small record would fit in the slack of the log's last page, and rightly be written).
    "decision": {
        "leave": 0,
        "tool": "fs.write_file",
        "args": lambda files: ["path=" + str(files / "made.txt"), "content=" + "x" * 8192],
        "says": "the tool was not run",
    },
    # The record fits in the log's slack, but the anchor (gone, so made anew) finds no room:
    # the record is cut back out of the log, as if never written.
    "anchor": {
        "leave": 0,
        "tool": "fs.write_file",
        "args": lambda files: ["path=" + str(files / "made.txt"), "content=x"],
        "says": "the tool was not run",
        "drop_anchor": True,
    },
    "outcome": {
        "leave": 12 * 1024,
        "tool": "fs.read_text_file",
        "args": lambda files: ["path=" + str(files / "big.txt")],
        "says": "the call ran, but its outcome is not recorded",
    },
}


@pytest.mark.parametrize("case", CASES)
def test_a_full_disk_never_leaves_a_partial_record(isolated_dirs, disk, case):
    spec = CASES[case]
    log = disk / "audit.jsonl"
    files = files_and_profile(isolated_dirs, log)
    assert llmc("call", "fs.list_allowed_directories").returncode == 0  # log, anchor, lock exist
    before = log.read_bytes()
    if spec.get("drop_anchor"):
        (disk / "audit.jsonl.anchor").unlink()
    filler = fill(disk, spec["leave"])

    proc = llmc("call", spec["tool"], *spec["args"](files))
    assert proc.returncode == 3 and spec["says"] in proc.stderr, proc.stderr
    assert not (files / "made.txt").exists()
    after = log.read_bytes()
    assert after.startswith(before) and after.endswith(b"\n")  # complete records only
    new = [json.loads(line) for line in after[len(before) :].splitlines()]
    assert [r["event"] for r in new] == (["decision"] if case == "outcome" else [])

    filler.unlink()  # space again: the next call works and the whole trail verifies
    again = llmc("call", spec["tool"], *spec["args"](files))
    assert again.returncode == 0, again.stderr
    verify = llmc("audit", "verify")
    assert verify.returncode == 0 and json.loads(verify.stdout)["ok"], verify.stdout + verify.stderr
    assert not [p.name for p in disk.iterdir() if p.name.endswith(".tmp")]


def test_ask_stops_when_an_outcome_cannot_be_recorded(isolated_dirs, disk):
    """The model's call ran, its outcome does not fit: the run ends with exit 3 instead of
    going on unrecorded."""
    from tests.fakes.llm import FakeLLM
    from tests.fakes.scripts import turn

    files = isolated_dirs / "files"
    script = [turn("openai", calls=[("c1", "read_text_file", {"path": str(files / "big.txt")})]), turn("openai", text="never")]
    with FakeLLM("openai", script) as fake:
        files_and_profile(
            isolated_dirs,
            disk / "audit.jsonl",
            f"""[llm]
provider = "openai"
model = "model-fake"
base_url = "{fake.base_url}"
[policy]
confirm_destructive = false
""",
        )
        assert llmc("call", "fs.list_allowed_directories").returncode == 0
        filler = fill(disk, 12 * 1024)
        proc = llmc("ask", "read it", env={"OPENAI_API_KEY": "test-key"})
    assert proc.returncode == 3 and "the call ran, but its outcome is not recorded" in proc.stderr, proc.stderr
    assert len(fake.requests) == 1  # the model was not asked again
    filler.unlink()
    verify = llmc("audit", "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr
