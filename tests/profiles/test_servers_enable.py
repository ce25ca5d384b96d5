"""`llmc servers enable|disable NAME` through the installed CLI: the profile is rewritten (every
other key kept), a disabled server is left out of listings until named with -s, unknown names
get a suggestion and change nothing."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest

from tests.helpers import llmc, profile_file, sdk_server

PY, SDK = sdk_server("sdk_server.py")


@pytest.fixture
def profile(isolated_dirs: Path) -> Path:
    path = profile_file(
        isolated_dirs / "config",
        f'[servers.sdk]\ncommand = {json.dumps(PY)}\nargs = [{json.dumps(SDK)}]\ntimeout = 30\n[policy]\ndeny = ["sdk.log"]\n',
    )
    os.chmod(path, 0o640)
    return path


def servers_listed() -> set[str]:
    proc = llmc("tools", "list")
    assert proc.returncode == 0, proc.stderr
    return {t["server"] for t in json.loads(proc.stdout)["tools"]}


def test_disable_then_enable(profile: Path):
    assert servers_listed() == {"sdk"}
    proc = llmc("servers", "disable", "sdk")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "server": "sdk",
        "enabled": False,
        "changed": True,
        "profile": profile.stem,
        "path": str(profile),
    }
    saved = tomllib.loads(profile.read_text())
    assert saved["servers"]["sdk"]["enabled"] is False and saved["servers"]["sdk"]["timeout"] == 30
    assert saved["policy"] == {"deny": ["sdk.log"]} and profile.stat().st_mode & 0o777 == 0o640
    assert servers_listed() == set()
    named = llmc("tools", "list", "-s", "sdk")
    assert named.returncode == 0 and json.loads(named.stdout)["tools"], named.stderr
    again = llmc("servers", "disable", "sdk")
    assert again.returncode == 0 and json.loads(again.stdout)["changed"] is False
    assert "already disabled" in again.stderr
    enabled = llmc("servers", "enable", "sdk")
    assert enabled.returncode == 0 and json.loads(enabled.stdout)["changed"] is True
    assert "enabled" not in tomllib.loads(profile.read_text())["servers"]["sdk"]  # the default is not written
    assert servers_listed() == {"sdk"}


@pytest.mark.parametrize("verb", ["enable", "disable"])
def test_an_unknown_server_is_named_with_a_suggestion_and_nothing_changes(profile: Path, verb: str):
    before = profile.read_text()
    proc = llmc("servers", verb, "sdx")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == ["llmc: profile default has no server 'sdx' (did you mean 'sdk'?)"]
    assert profile.read_text() == before


def test_disabling_on_a_new_config_writes_the_builtin_default_first(isolated_dirs: Path):
    proc = llmc("servers", "disable", "workspace")
    assert proc.returncode == 0, proc.stderr
    path = Path(json.loads(proc.stdout)["path"])
    assert tomllib.loads(path.read_text())["servers"]["workspace"]["enabled"] is False
