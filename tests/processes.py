"""Processes seen through /proc (Linux), for the tests that check what a command left running.
Without /proc (macOS) nothing is listed, and the checks that need a listing say so themselves."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class Process:
    pid: int
    ppid: int
    pgid: int

    def cmdline(self) -> list[bytes]:
        """argv ([] once it has exited, or when it is not ours to read)."""
        return _entries(_read(self.pid, "cmdline"))

    def environ(self) -> list[bytes]:
        """NAME=VALUE entries ([] once it has exited, or when it is not ours to read)."""
        return _entries(_read(self.pid, "environ"))


def live_processes() -> list[Process]:
    """Every process that still runs: a zombie has exited already (its parent reaps it)."""
    found: list[Process] = []
    for entry in PROC.iterdir() if PROC.is_dir() else ():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        if fields and fields[0] != b"Z":
            found.append(Process(int(entry.name), int(fields[1]), int(fields[2])))
    return found


def gone(pid: int) -> bool:
    """Exited. A zombie counts: an orphan's parent is init, which may be slow to reap it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # someone else's process under a reused pid: still there
    fields = _stat(pid)
    return bool(fields) and fields[0] == b"Z"


def _stat(pid: int) -> list[bytes]:
    """Fields of /proc/PID/stat after the command name (state, ppid, pgrp, ...), or []."""
    try:
        return (PROC / str(pid) / "stat").read_bytes().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _read(pid: int, name: str) -> bytes:
    try:
        return (PROC / str(pid) / name).read_bytes()
    except OSError:
        return b""


def _entries(data: bytes) -> list[bytes]:
    """NUL-terminated strings (the last terminator may be missing)."""
    return data.removesuffix(b"\0").split(b"\0") if data else []
