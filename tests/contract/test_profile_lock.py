"""The profile's `lock` is one file for every command: `tools lock` writes it and `tools diff`
reads it where `call` checks it (relative to the profile file, not the working directory); a
tool the policy denies is denied (exit 4) before the lock is asked, so no re-lock is demanded."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers import llmc, sdk_server


def write_profile(directory: Path, policy: str = "") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "team.toml"
    path.write_text(
        f'lock = "pins/team.lock"\n\n[servers.sdk]\ncommand = "{sys.executable}"\n'
        f'args = ["{sdk_server("sdk_server.py")[1]}"]\n\n[policy]\n{policy}\n'
    )
    return path


def test_lock_and_diff_use_the_profiles_lock_relative_to_the_profile(tmp_path, monkeypatch):
    profile = write_profile(tmp_path / "team")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the lock must not land in (or be read from) the working directory
    locked = llmc("-p", str(profile), "tools", "lock")
    assert locked.returncode == 0, locked.stderr
    pinned = tmp_path / "team" / "pins" / "team.lock"
    assert json.loads(locked.stdout)["file"] == str(pinned) and pinned.exists()
    assert not list(elsewhere.iterdir())
    assert json.loads(llmc("-p", str(profile), "tools", "diff").stdout)["drift"] is False
    assert llmc("-p", str(profile), "call", "sdk.echo", "message=hi").returncode == 0
    data = json.loads(pinned.read_text())
    data["servers"]["sdk"]["tools"]["echo"]["hash"] = "sha256:" + "0" * 64
    pinned.write_text(json.dumps(data))
    drift = llmc("-p", str(profile), "tools", "diff")
    assert drift.returncode == 10 and json.loads(drift.stdout)["changed"][0]["tool"] == "echo"
    refused = llmc("-p", str(profile), "call", "sdk.echo", "message=hi")
    assert refused.returncode == 10 and "changed since it was locked" in refused.stderr
    explicit = tmp_path / "other.lock"  # -o / --lock still name any file
    assert llmc("-p", str(profile), "tools", "lock", "-o", str(explicit)).returncode == 0
    assert json.loads(llmc("-p", str(profile), "tools", "diff", "--lock", str(explicit)).stdout)["drift"] is False


@pytest.mark.parametrize(
    "policy, code, says",
    [
        ('deny = ["sdk.add"]', 4, "deny pattern"),
        ("read_only = true", 4, "read-only"),
        ('default = "deny"\nallow = ["sdk.echo"]', 4, "no allow pattern"),
        ('[policy.args."sdk.add"]\na = ["/x/**"]', 4, "must be a string"),
        ("", 0, ""),  # an allowed tool, pinned: runs
    ],
)
def test_a_denied_tool_is_denied_before_the_lock_is_asked(tmp_path, policy, code, says):
    profile = write_profile(tmp_path / "team", policy)
    assert llmc("-p", str(profile), "tools", "lock").returncode == 0
    for _ in range(2):  # re-locking changes nothing: the answer is the same, not "run tools lock"
        proc = llmc("-p", str(profile), "call", "sdk.add", "a=1", "b=2")
        assert proc.returncode == code, proc.stderr
        assert says in proc.stderr and "tools lock" not in proc.stderr
        assert llmc("-p", str(profile), "tools", "lock").returncode == 0
