"""gateway/supervisor.py on its own, in a small Python process (forking is what is tested): a
worker that ends before it serves stops the others with its exit code; one that ends after it
served is started again; a stop signal ends every worker."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.helpers import wait_until

SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    from llmc_cli.gateway.supervisor import WorkerFailed, supervise

    MODE = sys.argv[1]

    def worker(index, first, ready):
        if MODE == "fails" and index == 1:
            sys.exit(7)  # before it serves
        ready()
        print(f"serving {index} {os.getpid()} first={first}", flush=True)
        if MODE == "crashes" and index == 0 and first:
            os._exit(3)  # after it served
        time.sleep(60)  # until the supervisor's SIGTERM (the default action here)

    try:
        supervise(2, worker, lambda line: print("supervisor:", line, file=sys.stderr, flush=True))
    except WorkerFailed as exc:
        print("failed:", exc.message, file=sys.stderr, flush=True)
        sys.exit(exc.exit_code)
    """
)


def run(mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
    )


@pytest.mark.e2e  # processes: the supervisor forks
def test_a_worker_that_ends_before_it_serves_stops_them_all_with_its_code() -> None:
    proc = run("fails")
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 7, stderr
    assert "failed: worker 1 exited with code 7 before it served: the gateway stops" in stderr


@pytest.mark.e2e
def test_a_worker_that_ends_after_it_served_is_started_again_and_a_signal_stops_all() -> None:
    proc = run("crashes")
    lines: list[str] = []
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while not any("first=False" in line for line in lines) and time.monotonic() < deadline:
        lines.append(proc.stdout.readline())
    assert re.search(r"serving 0 \d+ first=False", "".join(lines)), lines
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    # The two workers share the pipe: one's line may land inside the other's ("serving 1 .. first=Trueserving 0 ..")
    served = re.findall(r"serving (\d+) (\d+) first=(True|False)", "".join(lines))
    crashed = next((pid for worker, pid, first in served if worker == "0" and first == "True"), None)
    assert crashed is not None, (lines, stderr)
    assert f"supervisor: worker 0 (pid {crashed}) exited with code 3; starting it again" in stderr
    pids = [int(pid) for _, pid, _ in served]
    assert wait_until(lambda: all(not _alive(pid) for pid in pids), 10)


def _alive(pid: int) -> bool:
    from tests.processes import gone

    return not gone(pid)


def test_a_worker_that_said_it_serves_and_ended_before_the_supervisor_looked_counts_as_served() -> None:
    """Its pid was on the ready pipe, unread, when the supervisor reaped it: it served (started
    again), not "ended before it served" (which stops the gateway)."""
    import os

    from llmc_cli.gateway.supervisor import Supervisor

    logged: list[str] = []
    supervisor = Supervisor(1, logged.append)
    pid = os.fork()
    if pid == 0:  # the worker: says it serves, then ends at once
        os.write(supervisor.ready_w, b"%d\n" % os.getpid())
        os._exit(3)
    supervisor.children[pid] = 0
    supervisor.started[0] = time.monotonic()
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # it has ended; not reaped yet
    supervisor.reap()
    os.close(supervisor.ready_r)
    os.close(supervisor.ready_w)
    assert supervisor.failed is None and 0 in supervisor.due, logged
    assert logged == [f"worker 0 (pid {pid}) exited with code 3; starting it again (its host sessions are lost)"]
