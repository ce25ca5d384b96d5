"""config/paths.which: shutil.which on POSIX without importing shutil (zlib, bz2, lzma: 6.5 M
instructions of the start-up of a command that launches a server). Side by side with shutil's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from llmc_cli.config.paths import which


def test_which_finds_what_shutil_finds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second, plain = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for directory in (first, second, plain):
        directory.mkdir()
    for directory, mode in ((first, 0o644), (second, 0o755), (plain, 0o755)):  # a's copy cannot run
        (directory / "tool").write_text("#!/bin/sh\n")
        (directory / "tool").chmod(mode)
    (plain / "dir").mkdir()  # a directory is never the answer
    search = os.pathsep.join([str(first), str(second), str(plain), str(second), ""])
    monkeypatch.chdir(plain)
    cases = [
        ("tool", search),
        ("dir", search),
        ("missing", search),
        ("tool", ""),
        ("tool", str(first)),
        (str(second / "tool"), None),  # a path: itself, when it runs
        (str(first / "tool"), None),
        ("./tool", None),
        ("tool", os.pathsep.join(["", str(first)])),  # an empty entry: the current directory
        ("sh", None),  # PATH of the environment
    ]
    for command, path in cases:
        assert which(command, path=path) == shutil.which(command, path=path), (command, path)
    assert which("tool", path=search) == str(second / "tool")
    monkeypatch.delenv("PATH")
    assert which("sh") == shutil.which("sh")


def test_launching_a_server_loads_no_shutil(tmp_path: Path) -> None:
    server = f"{sys.executable} {Path(__file__).resolve().parent / 'peers' / 'sdk_server.py'}"
    code = (
        "import sys\nfrom llmc_cli.cli.main import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "print('SHUTIL', 'shutil' in sys.modules, file=sys.stderr)"
    )
    env = {**os.environ, "LLMC_CONFIG_DIR": str(tmp_path / "c"), "LLMC_STATE_DIR": str(tmp_path / "s")}
    proc = subprocess.run(
        [sys.executable, "-c", code, "call", "--yes", "--stdio", server, "echo", "message=hi"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "SHUTIL False" in proc.stderr, proc.stderr[-2000:]
