"""Paths into a process's own view (/proc/self, /proc/thread-self, /proc/PID, /dev/fd,
/dev/stdin..., reached as written or through a symlink) mean one thing in llmc and another in the
server: under a path rule they are refused with a reason, and the server is never asked. The
case that got through: llmc ran from allowed/, the server from /, and /proc/self/cwd/etc/hostname
matched a rule on allowed/** (llmc's own cwd) while the server would read /etc/hostname."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from llmc_cli.policy.paths import PathRefused, touched_paths
from tests.helpers import llmc
from tests.policy.test_escapes_cli import tree, write_profile  # noqa: F401 - the fixture

PROCESS_PATHS = [
    "/proc/self/cwd/etc/hostname",
    "/proc/thread-self/cwd/etc/hostname",
    "/proc/self/root{root}/allowed/notes.txt",
    "/proc/1/root{root}/allowed/notes.txt",
    "/proc/1/task/1/root{root}/allowed/notes.txt",
    "/proc/self/fd/0",
    "/dev/fd/0",
    "/dev/stdin",
    "{root}/allowed/proc-link/self/cwd/etc/hostname",  # a symlink that leads into /proc
]


@pytest.mark.parametrize("path", PROCESS_PATHS)
def test_a_path_into_a_process_is_refused_under_a_path_rule(isolated_dirs, tree, monkeypatch, path):  # noqa: F811 - the fixture imported above
    os.symlink("/proc", tree / "allowed" / "proc-link")
    journal = write_profile(isolated_dirs, tree, cwd=None)
    profile = isolated_dirs / "config" / "profiles" / "default.toml"
    profile.write_text(profile.read_text().replace("env = {", 'cwd = "/"\nenv = {', 1))  # the server runs at /
    monkeypatch.chdir(tree / "allowed")  # llmc runs inside the allowed tree
    proc = llmc("call", "naive.read", "--json", json.dumps({"path": path.replace("{root}", str(tree))}))
    assert proc.returncode == 4, proc.stderr
    assert "names a process" in proc.stderr and "args.naive.*.path" in proc.stderr
    assert journal.read_text() == ""  # the server was never asked
    assert len(proc.stderr.strip().splitlines()) == 1


def test_proc_files_that_name_no_process_are_judged_as_paths(tmp_path: Path) -> None:
    assert touched_paths("/proc/cpuinfo", None) == ["/proc/cpuinfo"]
    with pytest.raises(PathRefused, match="names a process"):
        touched_paths("/proc/../proc/self/environ", None)
    with pytest.raises(PathRefused, match="names a process"):
        touched_paths("cwd/x", f"/proc/{os.getpid()}")  # a relative path at a server cwd inside /proc
