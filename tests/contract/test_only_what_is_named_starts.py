"""`llmc call SERVER.TOOL` starts SERVER and no other; a bare tool name is resolved from the tool
names an earlier listing cached, asking other servers only when the cache cannot decide. The
profile's second server is a tripwire: every start of it appends a line to a marker file."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.helpers import llmc, node_tool, profile_file, sdk_server

BATCH = (
    '{"id": 1, "tool": "sdk.add", "arguments": {"a": 1, "b": 2}}\n{"id": 2, "tool": "sdk.echo", "arguments": {"message": "hi"}}\n'
)


def write_profile(isolated_dirs: Path, marker: Path) -> None:
    # The tripwire is a real server (npm server-everything: no tool named add or weather), so a
    # listing can cache its tools; starting it leaves a line in the marker.
    tripwire = f"echo started >> {shlex.quote(str(marker))}; exec {shlex.quote(node_tool('mcp-server-everything'))}"
    profile_file(
        isolated_dirs / "config",
        f'[servers.sdk]\ncommand = "{sys.executable}"\nargs = ["{sdk_server("sdk_server.py")[1]}"]\n\n'
        f'[servers.tripwire]\ncommand = "/bin/sh"\nargs = ["-c", {json.dumps(tripwire)}]\n',
    )


def starts(marker: Path) -> int:
    return len(marker.read_text().splitlines()) if marker.exists() else 0


@pytest.mark.parametrize(
    "listed_first, argv, tripwire_starts",
    [
        (False, ["call", "sdk.add", "a=1", "b=2"], 0),
        (False, ["call", "--batch", "-"], 0),
        (False, ["policy", "check", "sdk.add", "a=1", "b=2"], 0),
        (False, ["prompts", "get", "sdk.review", "code=x"], 0),
        (True, ["call", "add", "a=1", "b=2"], 0),  # the cache knows add is sdk's
        (True, ["call", "--batch", "-"], 0),
        (False, ["call", "add", "a=1", "b=2"], 1),  # no cache: every server is asked
        (True, ["call", "get-sum", "a=1", "b=2"], 1),  # the tripwire's own tool: it starts
    ],
)
def test_only_the_named_server_starts(isolated_dirs, listed_first, argv, tripwire_starts):
    marker = isolated_dirs / "tripwire-started"
    write_profile(isolated_dirs, marker)
    if listed_first:
        assert llmc("tools", "list").returncode == 0
        marker.unlink()
    proc = llmc(*argv, stdin=BATCH if "--batch" in argv else None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert starts(marker) == tripwire_starts


def test_a_bare_name_listed_once_is_remembered(isolated_dirs):
    """A bare name that had to be looked up caches what was listed: the next call asks no one else."""
    marker = isolated_dirs / "tripwire-started"
    write_profile(isolated_dirs, marker)
    assert llmc("call", "weather", "city=Oslo").returncode == 0
    assert starts(marker) == 1
    assert llmc("call", "weather", "city=Bergen").returncode == 0
    assert starts(marker) == 1


def test_a_stale_cache_falls_back_to_asking_every_server(isolated_dirs):
    marker = isolated_dirs / "tripwire-started"
    write_profile(isolated_dirs, marker)
    assert llmc("tools", "list").returncode == 0
    cache = isolated_dirs / "state" / "completion-tools.json"
    data = json.loads(cache.read_text())
    key = next(iter(data))
    data[key] = [n for n in data[key] if n != "sdk.add"] + ["tripwire.add"]  # the cache now lies
    cache.write_text(json.dumps(data))
    marker.unlink()
    proc = llmc("call", "add", "a=1", "b=2")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["server"] == "sdk"
