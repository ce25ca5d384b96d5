"""`llmc tools list` writes its listing before it stops its servers: a stdio server that does not
exit on EOF holds the close for the grace and a SIGTERM, which the reader of the listing (a
terminal, jq) need not wait for. The process itself still ends only after its servers.

Shown without timing: llmc writes a listing larger than its stdout pipe holds and the test does
not read it, so llmc blocks in that write. If the servers were stopped before the write, the
server (it ignores EOF, and notes SIGTERM in a file as it exits) has noted its SIGTERM by then;
written first, it has not, and is stopped, in the spec's order, once the listing has been read."""

from __future__ import annotations

import fcntl
import json
import shlex
import subprocess
import sys
import termios
import time
from pathlib import Path

from tests.helpers import llmc_executable

LINGERS = Path(__file__).resolve().parents[1] / "peers" / "misbehaving_stdio.py"


def test_the_listing_is_written_before_the_servers_stop(isolated_dirs: Path) -> None:
    log = isolated_dirs / "events"
    argv = [
        llmc_executable(),
        "tools",
        "list",
        "--format",
        "json",
        "--stdio",
        shlex.join([sys.executable, str(LINGERS), "linger"]),
        "--env",
        f"LINGER_LOG={log}",
        "--env",
        "TOOL_DESCRIPTION=" + "x" * 100_000,  # a listing larger than the pipe holds (64 KiB)
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        capacity = fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
        deadline = time.monotonic() + 120  # start-up on a loaded machine; the pipe fills once llmc writes
        while _unread(fd) < capacity and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _unread(fd) >= capacity, "llmc did not fill its stdout"
        assert not log.exists(), "the server was stopped before the listing was written"
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err.decode()[-2000:]
    assert [t["name"] for t in json.loads(out)["tools"]] == ["echo"]
    assert log.read_text() == "term after eof\n"  # then stopped as the spec says: stdin closed, SIGTERM


def _unread(fd: int) -> int:
    """Bytes waiting in the pipe."""
    buf = bytearray(4)
    fcntl.ioctl(fd, termios.FIONREAD, buf)
    return int.from_bytes(buf, sys.byteorder)
