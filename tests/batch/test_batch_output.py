"""`call --batch`'s results on stdout: written together within HOLD_SECONDS of finishing
(cli/lines.py), never held for a slow call after them, and before any message on stderr."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.batch.test_batch import write_profile
from tests.helpers import llmc_executable

WAIT_SECONDS = 60.0  # bound on every wait below (a loaded machine is slow, never this slow)


def read_line(proc: subprocess.Popen[bytes], deadline: float) -> bytes:
    """The next line of the process's stdout, waiting at most until `deadline`."""
    assert proc.stdout is not None
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
            raise AssertionError(f"no whole line on stdout within {WAIT_SECONDS:.0f} s (got {line!r})")
        chunk = os.read(proc.stdout.fileno(), 1)
        if not chunk:
            raise AssertionError(f"stdout ended (got {line!r})")
        line += chunk
    return line


@pytest.mark.e2e  # a signal ends the slow call
def test_results_are_written_while_a_slow_call_after_them_runs(isolated_dirs: Path) -> None:
    """The second result is written by the batch's writer thread, not held until the slow third
    call ends (the first run of results is written at once, whoever does the rest)."""
    write_profile(isolated_dirs)
    lines = [
        {"id": 1, "tool": "a.echo", "arguments": {"message": "first"}},
        {"id": 2, "tool": "a.echo", "arguments": {"message": "second"}},
        {"id": 3, "tool": "a.slow", "arguments": {"seconds": 300}},
    ]
    proc = subprocess.Popen(
        [llmc_executable(), "call", "--batch", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdin is not None
        proc.stdin.write("".join(json.dumps(line) + "\n" for line in lines).encode())
        proc.stdin.close()
        deadline = time.monotonic() + WAIT_SECONDS
        assert [json.loads(read_line(proc, deadline))["id"] for _ in range(2)] == [1, 2]
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=WAIT_SECONDS)
        assert proc.returncode == 143
        assert proc.stderr is not None and b"3 calls: 2 ok, 1 interrupted" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=WAIT_SECONDS)


# Two runs of results, the second held by the writer thread, then a message on stderr; stdout and
# stderr are one pipe: what finished before the message is written before it.
_BEFORE_A_MESSAGE = """
from llmc_cli.cli import lines, output
write, soon, done = lines.emit_lines()
write({"n": 1}); soon()
write({"n": 2}); soon()
output.note("the message")
done()
"""


def test_results_that_finished_before_a_message_are_written_before_it() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _BEFORE_A_MESSAGE],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=WAIT_SECONDS,
        check=True,
    )
    assert proc.stdout.decode().splitlines() == ['{"n":1}', '{"n":2}', "the message"]


# Batches in one process (in-process CLI runs): each ends while its writer thread sleeps out its
# wait, or before; none may leave that thread parked for the process's life.
_BATCHES = """
import io, sys, threading, time
from llmc_cli.cli import lines
real = sys.stdout
for n in range(10):
    sys.stdout = io.StringIO()
    write, soon, done = lines.emit_lines()
    write({"n": 1}); soon(); write({"n": 2}); soon()
    time.sleep(lines.LATE_SECONDS / 2 if n % 2 else 0.0)
    done()
    out, sys.stdout = sys.stdout.getvalue(), real
    assert out.splitlines() == ['{"n":1}', '{"n":2}'], out
deadline = time.monotonic() + 30
while time.monotonic() < deadline and any(t.name == "llmc-batch-output" for t in threading.enumerate()):
    time.sleep(0.05)
print(sum(t.name == "llmc-batch-output" for t in threading.enumerate()))
"""


def test_a_batchs_writer_thread_ends_with_it() -> None:
    proc = subprocess.run([sys.executable, "-c", _BATCHES], capture_output=True, timeout=WAIT_SECONDS * 2, check=True)
    assert proc.stdout.decode().strip() == "0", proc.stderr.decode()
