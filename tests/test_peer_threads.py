"""tests/peer_threads.py stands in for a peer's process: what llmc shows of the server (its
answers, a crash's exit status, a timeout) is what the process gives, and nothing is left behind."""

from __future__ import annotations

import os
import threading
import time

from tests.helpers import llmc, llmc_process, sdk_server

SDK = " ".join(sdk_server("sdk_server.py"))


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def peer_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("tests.peers.")]


def settled(check, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_crash_reads_as_the_process_exit(isolated_dirs) -> None:
    threaded, process = (run("call", "crash", "--stdio", SDK) for run in (llmc, llmc_process))
    assert threaded.returncode == process.returncode == 5
    assert threaded.stderr == process.stderr
    assert "exit status 3" in threaded.stderr


def test_answers_and_a_timeout_as_from_the_process(isolated_dirs) -> None:
    for run in (llmc, llmc_process):
        assert run("call", "add", "a=2", "b=3", "--stdio", SDK).json()["structuredContent"] == {"result": 5}
    threaded, process = (run("call", "slow", "seconds=30", "--timeout", "0.1", "--stdio", SDK) for run in (llmc, llmc_process))
    assert threaded.returncode == process.returncode != 0
    assert threaded.stderr == process.stderr


def test_nothing_is_left_behind(isolated_dirs) -> None:
    llmc("call", "echo", "message=warm", "--stdio", SDK)  # the first run imports what later ones share
    assert settled(lambda: not peer_threads()), peer_threads()
    fds = open_fds()
    for tool in ("echo message=x", "crash", "slow seconds=30 --timeout 0.1"):
        llmc("call", *tool.split(), "--stdio", SDK)
    assert settled(lambda: not peer_threads()), peer_threads()
    assert settled(lambda: open_fds() <= fds), (open_fds(), fds)


def test_the_stand_in_ends_with_the_run(isolated_dirs) -> None:
    """After an llmc() run, llmc in this process starts real processes again (a gateway or a
    keeper started in the test process later counts them), however the run first asked for the
    transport: the package's lazy name, not asked yet or kept already."""
    from llmc_cli.mcp import transports
    from llmc_cli.mcp.transports import stdio

    real = stdio.StdioTransport
    for kept in (False, True):
        vars(transports).pop("StdioTransport", None)
        if kept:
            assert transports.StdioTransport is real
        assert llmc("call", "echo", "message=x", "--stdio", SDK).returncode == 0
        assert stdio.StdioTransport is real
        assert vars(transports).get("StdioTransport", real) is real
        assert transports.StdioTransport is real
