"""The `llmc` entry's exit (llmc_cli/__main__.py leave()): the exit handlers run, stdout and
stderr are flushed, the exit status is the command's, and then the process ends without the
interpreter's teardown (issue 34: ~7 M instructions of a 1-call batch). Nothing is lost by
that: what llmc writes is on disk before the command returns (a batch's output, every audit
record, `audit verify`). Where the interpreter's own exit differs (a status that is no byte, a
non-daemon thread still running, threading's exit callbacks, a flush that fails) leave() steps
aside and the interpreter exits as before. Each runs in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import sdk_server

PRELUDE = """
import atexit, os, sys
from llmc_cli.__main__ import leave
"""


def buffered(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment with stdout buffered as a user's is (a test runner may set PYTHONUNBUFFERED)."""
    env = dict(os.environ if env is None else env)
    env.pop("PYTHONUNBUFFERED", None)
    return env


def fresh(code: str, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + code, *args], capture_output=True, text=True, timeout=120, env=buffered(env), cwd=cwd
    )


@pytest.mark.parametrize("status, code", [("7", 7), ("None", 0), ("0", 0), ("130", 130), ("143", 143)])
def test_leave_runs_the_exit_handlers_flushes_and_ends_with_the_status(tmp_path: Path, status: str, code: int) -> None:
    marker = tmp_path / "handler-ran"
    proc = fresh(
        f"atexit.register(lambda: open({str(marker)!r}, 'w').write('yes'))\n"
        "sys.stdout.write('x' * 300_000)\n"  # more than a buffer, the rest still in it
        "sys.stderr.write('said')\n"
        f"leave({status})\n"
        "print('not reached')\n"
    )
    assert proc.returncode == code, proc.stderr
    assert proc.stdout == "x" * 300_000 and proc.stderr == "said"  # leave() did not return
    assert marker.read_text() == "yes"


@pytest.mark.parametrize(
    "setup, status",
    [
        ("", "'a message'"),  # SystemExit("text"): the interpreter prints it and exits 1
        ("", "256"),
        ("", "-1"),
        (
            "import threading, time\n"
            "threading.Thread(target=lambda: (time.sleep(0.2), print('thread finished', flush=True))).start()\n",
            "3",
        ),
        (
            "from concurrent.futures import ThreadPoolExecutor\n"
            "pool = ThreadPoolExecutor(1)\n"
            "pool.submit(print, 'pooled', flush=True).result()\n",
            "3",
        ),
    ],
    ids=["text", "past-a-byte", "negative", "non-daemon-thread", "thread-pool"],
)
def test_leave_steps_aside_where_the_interpreter_s_exit_differs(setup: str, status: str) -> None:
    proc = fresh(setup + f"leave({status})\nprint('returned', flush=True)\nsys.exit({status})\n")
    assert "returned" in proc.stdout  # the interpreter's own exit follows
    if "thread" in setup:
        assert proc.returncode == 3 and "thread finished" in proc.stdout
    if "pool" in setup:
        assert proc.returncode == 3 and "pooled" in proc.stdout
    if status == "'a message'":
        assert proc.returncode == 1 and "a message" in proc.stderr


def test_a_flush_that_fails_is_the_interpreter_s_to_report() -> None:
    """stdout a pipe nobody reads any more: leave() cannot flush it and leaves the exit to the
    interpreter, which reports the failed flush and exits 120, as without leave()."""
    read, write = os.pipe()
    os.close(read)
    try:
        code = "sys.stdout.write('x')\nleave(0)\nprint('returned', file=sys.stderr)\n"
        proc = subprocess.run(
            [sys.executable, "-c", PRELUDE + code], stdout=write, stderr=subprocess.PIPE, text=True, timeout=120, env=buffered()
        )
    finally:
        os.close(write)
    assert proc.returncode == 120 and "returned" in proc.stderr and "BrokenPipeError" in proc.stderr


def test_a_batch_run_by_the_entry_leaves_its_output_and_every_record(tmp_path: Path) -> None:
    """`llmc call --batch` through the entry (run(), then leave()): every result on stdout,
    the status 0, every audit record on disk and the chain verified, no teardown."""
    env = {**os.environ, "LLMC_CONFIG_DIR": str(tmp_path / "config"), "LLMC_STATE_DIR": str(tmp_path / "state")}
    env.pop("LLMC_PROFILE", None)
    batch = tmp_path / "calls.jsonl"
    batch.write_text("".join(json.dumps({"id": i, "tool": "echo", "arguments": {"message": f"m{i}"}}) + "\n" for i in range(40)))
    server = " ".join(sdk_server("sdk_server.py"))
    # the finally runs only if run() returns or raises: the interpreter's exit instead of leave()'s
    run = "sys.argv[0] = 'llmc'\nfrom llmc_cli.__main__ import run\ntry:\n    run()\nfinally:\n    print('fell back', file=sys.stderr)\n"
    proc = fresh(run, "call", "--batch", str(batch), "--yes", "--stdio", server, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "fell back" not in proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert sorted(line["id"] for line in lines) == list(range(40))
    records = [
        json.loads(line)
        for path in sorted((tmp_path / "state").rglob("audit*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    assert len(records) == 80  # a decision and an outcome a call
    verify = fresh(run, "audit", "verify", env=env, cwd=tmp_path)
    assert verify.returncode == 0, verify.stdout + verify.stderr
