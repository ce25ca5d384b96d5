"""Fixtures for the fault tests: small filesystems that fill up or refuse writes."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """mount(name, size_kb=..., read_only=...) -> a fresh tmpfs under tmp_path. Needs root (a
    read-only directory does not stop root, a full disk needs a small filesystem of its own)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs (a full or read-only filesystem)")
    mounted: list[Path] = []

    def mount(name: str, size_kb: int = 256, read_only: bool = False) -> Path:
        point = tmp_path / name
        point.mkdir()
        options = f"size={size_kb}k,mode=0700" + (",ro" if read_only else "")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in reversed(mounted):
        subprocess.run(["umount", "-l", str(point)], check=False)


def fill(directory: Path) -> None:
    """Fill the filesystem holding `directory` to the last byte (bounded by its size)."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 4096, 1):  # big blocks, then what is left of the last one
            try:
                while os.write(fd, b"\0" * size):
                    pass
            except OSError:
                continue
    finally:
        os.close(fd)


def temp_files(root: Path) -> list[str]:
    """Files a failed atomic write would have left behind."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.tmp"))


# Real HTTP servers shared with the transport tests.
from tests.transports.conftest import misbehaving, sdk_legacy, sdk_sse, sdk_stateful  # noqa: E402,F401
