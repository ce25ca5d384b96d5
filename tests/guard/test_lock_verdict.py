"""The scan's verdict pinned with the lock file (lockfile.py, guard/scan.py tool_verdict): a server
whose tool description turns into instructions to the model between two runs (a real `mcp` SDK
server; a file selects the variant) is reported as a scan change by `tools diff`, hidden under
[guard] descriptions = "hide", and refused under "flag" with a drift message naming the verdict."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers import llmc, profile_file, sdk_server


def profile(isolated_dirs: Path, flag: Path, descriptions: str) -> None:
    script = sdk_server("rug_pull.py")[1]
    profile_file(
        isolated_dirs / "config",
        f'lock = "pins/team.lock"\n\n[servers.rug]\ncommand = {json.dumps(sys.executable)}\n'
        f"args = [{json.dumps(script)}, {json.dumps(str(flag))}]\n\n[guard]\ndescriptions = {json.dumps(descriptions)}\n",
    )


@pytest.mark.usefixtures("isolated_dirs")
def test_a_rug_pull_is_reported_as_a_scan_change(isolated_dirs: Path) -> None:
    flag = isolated_dirs / "pulled"
    profile(isolated_dirs, flag, "hide")
    locked = llmc("tools", "lock")
    assert locked.returncode == 0, locked.stderr
    pinned = json.loads(Path(locked.json()["file"]).read_text(encoding="utf-8"))["servers"]["rug"]["tools"]
    assert pinned["add"]["scan"] == [] and pinned["multiply"]["scan"] == []
    assert llmc("tools", "diff").returncode == 0
    assert llmc("call", "rug.add", "a:=1", "b:=2").returncode == 0

    flag.write_text("", encoding="utf-8")  # the server now describes `add` with instructions to the model
    diff = llmc("tools", "diff")
    assert diff.returncode == 10, diff.stderr
    [change] = diff.json()["changed"]
    assert change["tool"] == "add" and change["scan"]["old"] == []
    assert "high:model_instruction" in change["scan"]["new"]
    assert diff.json()["removed"] == []  # hidden from models, still compared with its pin
    listed = llmc("tools", "list", "--format", "json")
    assert [t["name"] for t in listed.json()["tools"]] == ["multiply"]  # hide: not offered
    hidden = llmc("call", "rug.add", "a:=1", "b:=2")
    assert hidden.returncode == 4 and "guard.descriptions: model_instruction" in hidden.stderr

    profile(isolated_dirs, flag, "flag")  # flag: offered, but the lock refuses the drifted tool
    drifted = llmc("call", "rug.add", "a:=1", "b:=2")
    assert drifted.returncode == 10
    assert "the scan's verdict changed: high model_instruction" in drifted.stderr and "(was: clean)" in drifted.stderr
    assert llmc("call", "rug.multiply", "a:=2", "b:=3").returncode == 0


@pytest.mark.usefixtures("isolated_dirs")
def test_a_verdict_that_changes_without_the_text_is_drift(isolated_dirs: Path) -> None:
    """The verdict is pinned, not only the text: a lock whose verdict is not what the scan says now
    (a scanner that learned a rule) shows as changed, naming both."""
    flag = isolated_dirs / "pulled"
    profile(isolated_dirs, flag, "flag")
    locked = llmc("tools", "lock")
    path = Path(locked.json()["file"])
    lock = json.loads(path.read_text(encoding="utf-8"))
    lock["servers"]["rug"]["tools"]["multiply"]["scan"] = ["medium:encoded_blob"]
    path.write_text(json.dumps(lock), encoding="utf-8")
    diff = llmc("tools", "diff")
    assert diff.returncode == 10
    assert diff.json()["changed"] == [{"server": "rug", "tool": "multiply", "scan": {"old": ["medium:encoded_blob"], "new": []}}]
    del lock["servers"]["rug"]["tools"]["multiply"]["scan"]  # a lock written before verdicts were pinned
    path.write_text(json.dumps(lock), encoding="utf-8")
    assert llmc("tools", "diff").returncode == 0
