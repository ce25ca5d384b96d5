"""A terminal changes presentation, never semantics: a slow tool that reports progress outlives
--timeout (progress extends it, up to 10x) with or without a terminal; -v shows progress as
plain lines when there is none."""

from __future__ import annotations

import json
import os
import pty
import subprocess

import pytest

from tests.helpers import llmc, llmc_executable, sdk_server
from tests.schemas import check_output

SDK = " ".join(sdk_server("sdk_server.py"))
# sdk.slow reports progress every 0.1s: work longer than twice the timeout. On a terminal the
# timeout also has to cover the start of llmc and the server's process on a loaded machine.
SLOW = ["call", "slow", "seconds=12", "--timeout", "5", "--stdio", SDK]
SLOW_IN_PROCESS = ["call", "slow", "seconds=5", "--timeout", "2", "--stdio", SDK]
QUICK = ["call", "slow", "seconds=0.3", "--stdio", SDK]


@pytest.fixture(autouse=True)
def known_server():
    """The server's era is probed (and cached) first, so --timeout meets only the call."""
    assert llmc("tools", "list", "--stdio", SDK).returncode == 0


def on_a_terminal(*args: str) -> subprocess.CompletedProcess[str]:
    """llmc with stdin and stderr on a pseudo-terminal (what isatty() asks), stdout piped."""
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.run(
            [llmc_executable(), *args],
            stdin=terminal,
            stderr=terminal,
            stdout=subprocess.PIPE,
            text=True,
            timeout=120,
            env=os.environ.copy(),
        )
    finally:
        os.close(terminal)
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the terminal side is closed and drained
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(controller)
    check_output(args, proc.stdout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout, b"".join(chunks).decode(errors="replace"))


@pytest.mark.parametrize(
    "run, argv",
    [(llmc, SLOW_IN_PROCESS), pytest.param(on_a_terminal, SLOW, marks=pytest.mark.e2e)],
    ids=["no terminal", "terminal"],
)
def test_progress_extends_the_timeout_with_or_without_a_terminal(run, argv):
    proc = run(*argv)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["content"][0]["text"] == f"slept {float(argv[2].partition('=')[2])}"


def test_without_a_terminal_progress_is_shown_at_v_only():
    quiet, verbose = llmc(*QUICK), llmc("-v", *QUICK)
    assert quiet.returncode == verbose.returncode == 0, quiet.stderr + verbose.stderr
    assert "[progress]" not in quiet.stderr
    lines = [line for line in verbose.stderr.splitlines() if line.startswith("[progress]")]
    assert lines[-1] == "[progress] 3/3" and not any("\x1b" in line or "\r" in line for line in lines)
