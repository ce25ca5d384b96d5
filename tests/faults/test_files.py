"""The files llmc writes: concurrent edits keep every change, everything created under config and
state is private (0700 directories at every level, 0600 files), and no cache key carries a
secret. Through the real CLI, with real concurrent processes."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from llmc_cli.config import files
from llmc_cli.errors import ConfigError
from tests.helpers import PEERS, llmc, llmc_executable
from tests.profiles.runner import toml_str

SDK = [sys.executable, str(PEERS / "sdk_server.py")]
PROCESSES = 8


def run_together(argvs: list[list[str]]) -> list[subprocess.CompletedProcess[str]]:
    """Start every command at once, then wait for all (each bounded)."""
    procs = [
        subprocess.Popen(
            [llmc_executable(), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
        )
        for argv in argvs
    ]
    done = []
    for argv, proc in zip(argvs, procs, strict=True):
        out, err = proc.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(argv, proc.returncode, out, err))
    return done


def servers_in(profile: Path) -> set[str]:
    return set(tomllib.loads(profile.read_text())["servers"])


def test_concurrent_servers_add_keeps_every_server(isolated_dirs: Path) -> None:
    done = run_together([["servers", "add", f"s{i}", "--", "true", str(i)] for i in range(PROCESSES)])
    assert all(p.returncode == 0 for p in done), [p.stderr for p in done]
    profile = isolated_dirs / "config" / "profiles" / "default.toml"
    assert servers_in(profile) == {"workspace"} | {f"s{i}" for i in range(PROCESSES)}


def test_a_remove_raced_by_adds_stays_removed(isolated_dirs: Path) -> None:
    assert llmc("servers", "add", "victim", "--", "true").returncode == 0
    done = run_together(
        [["servers", "remove", "victim"]] + [["servers", "add", f"s{i}", "--", "true"] for i in range(PROCESSES - 1)]
    )
    assert all(p.returncode == 0 for p in done), [p.stderr for p in done]
    profile = isolated_dirs / "config" / "profiles" / "default.toml"
    assert servers_in(profile) == {"workspace"} | {f"s{i}" for i in range(PROCESSES - 1)}


def test_concurrent_calls_under_a_rate_limit_count_every_call(isolated_dirs: Path) -> None:
    """ratelimit.json is read, changed and written under its lock: no count is lost."""
    profile = isolated_dirs / "limited.toml"
    profile.write_text(f"""[servers.sdk]
command = {toml_str(SDK[0])}
args = [{toml_str(SDK[1])}]
[policy]
calls_per_minute = 100
""")
    done = run_together([["-p", str(profile), "call", "sdk.add", "a=1", f"b={i}"] for i in range(PROCESSES)])
    assert all(p.returncode == 0 for p in done), [p.stderr for p in done]
    counted = json.loads((isolated_dirs / "state" / "ratelimit.json").read_text())
    assert len(counted["profile:limited"]) == PROCESSES


def test_concurrent_connections_keep_every_era_cache_entry(isolated_dirs: Path) -> None:
    """servers.json is read, changed and written under its lock: 8 servers found at once, 8 entries."""
    commands = [shlex.join([*SDK, "stdio", "--port", str(i)]) for i in range(PROCESSES)]  # 8 distinct servers
    done = run_together([["tools", "list", "--stdio", command] for command in commands])
    assert all(p.returncode == 0 for p in done), [p.stderr for p in done]
    cache = json.loads((isolated_dirs / "state" / "servers.json").read_text())
    assert len([key for key in cache if key.startswith("stdio:")]) == PROCESSES


def test_everything_llmc_creates_is_private(tmp_path: Path) -> None:
    """Config and state in directories that do not exist yet, several levels deep, under the
    usual umask: every level llmc creates is 0700, every file 0600 (lock files included)."""
    config, state = tmp_path / "home" / "cfg" / "llmc", tmp_path / "var" / "lib" / "state" / "llmc"
    env = {"LLMC_CONFIG_DIR": str(config), "LLMC_STATE_DIR": str(state)}
    old_umask = os.umask(0o022)
    try:
        assert llmc("servers", "add", "sdk", "--", *SDK, env=env).returncode == 0
        profile = config / "profiles" / "default.toml"
        with open(profile, "a") as fh:
            fh.write("\n[policy]\ncalls_per_minute = 100\n")
        # Creates servers.json, ratelimit.json, the audit log, the completion and profile caches.
        listed = llmc("tools", "list", "--server", "sdk", env=env)
        assert listed.returncode == 0, listed.stderr
        called = llmc("call", "sdk.add", "a=1", "b=2", env=env)
        assert called.returncode == 0, called.stderr
    finally:
        os.umask(old_umask)
    created = [tmp_path / "home", tmp_path / "var"]
    seen = {p.name for top in created for p in top.rglob("*")}
    assert {"default.toml", "servers.json", "ratelimit.json", "completion-tools.json"} <= seen, seen
    assert any(name.endswith(".lock") for name in seen), seen
    loose = [
        f"{p} {stat.filemode(p.stat().st_mode)}"
        for top in created
        for p in [top, *top.rglob("*")]
        if stat.S_IMODE(p.stat().st_mode) != (0o700 if p.is_dir() else 0o600)
    ]
    assert loose == []


@pytest.mark.parametrize("kind, expected", [("private", 0o600), ("shared", 0o644)])
def test_write_atomic_modes_follow_the_kind_of_file(tmp_path: Path, kind: str, expected: int) -> None:
    """State and secrets 0600; exported manifests and tool lock files like any file the user makes."""
    target = tmp_path / "out" / "file.json"
    old_umask = os.umask(0o022)
    try:
        files.write_atomic(target, "{}", files.PRIVATE_FILE if kind == "private" else None)
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(target.stat().st_mode) == expected
    assert os.listdir(target.parent) == ["file.json"]


def test_write_atomic_leaves_nothing_behind_when_interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C in the middle of a write (here: while the data is flushed to disk): the old file
    stays, no temp file is left."""
    target = tmp_path / "state.json"
    target.write_text("old")

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        files.write_atomic(target, "new")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["state.json"]


def test_write_atomic_into_a_directory_it_cannot_make_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file where a directory should be")
    with pytest.raises(ConfigError, match="cannot create directory"):
        files.write_atomic(tmp_path / "blocker" / "sub" / "x.json", "{}")


def test_a_profile_that_is_a_symlink_stays_one(isolated_dirs: Path, tmp_path: Path) -> None:
    """A profile linked from elsewhere (a dotfiles repository) is edited where it lives."""
    real = tmp_path / "dotfiles" / "llmc.toml"
    real.parent.mkdir()
    real.write_text('[servers.a]\ncommand = "true"\n')
    link = isolated_dirs / "config" / "profiles" / "default.toml"
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    assert llmc("servers", "add", "b", "--", "true").returncode == 0
    assert link.is_symlink() and servers_in(real) == {"a", "b"}
    assert sorted(os.listdir(real.parent)) == ["llmc.toml"]
