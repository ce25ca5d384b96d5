"""The gateway's request threads (gateway/workpool.py): at most `size` at once, work beyond that
waits its turn and all of it runs, threads are reused, shutdown ends them."""

from __future__ import annotations

import threading
import time

from llmc_cli.gateway.workpool import WorkPool
from tests.helpers import wait_until


def pool_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name and t.is_alive()]


def test_work_beyond_the_size_waits_its_turn_and_all_of_it_runs() -> None:
    pool = WorkPool(2, "llmc-test-pool")
    gate = threading.Event()
    lock = threading.Lock()
    running = peak = 0
    done: list[int] = []

    def job(n: int) -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        gate.wait(60)
        with lock:
            running -= 1
            done.append(n)

    for n in range(6):
        pool.submit(lambda n=n: job(n))
    # Two threads start and take a job (waited for: on a loaded runner 0.2 s was not always enough);
    # then, a while later, still two: the other four wait.
    assert wait_until(lambda: running == 2, 30), running
    time.sleep(0.2)
    assert (running, len(pool_threads("llmc-test-pool"))) == (2, 2)
    gate.set()
    wait_until(lambda: len(done) == 6, 30)
    assert sorted(done) == list(range(6)) and peak == 2
    # Idle threads take the next work: none started anew.
    more = threading.Event()
    pool.submit(more.set)
    assert more.wait(5) and len(pool_threads("llmc-test-pool")) == 2
    pool.shutdown()
    for _ in range(100):
        if not pool_threads("llmc-test-pool"):
            break
        time.sleep(0.05)
    assert pool_threads("llmc-test-pool") == []


def test_a_failing_job_leaves_its_thread_serving(capsys) -> None:  # type: ignore[no-untyped-def]
    pool = WorkPool(1, "llmc-test-pool-1")

    def fail() -> None:
        raise RuntimeError("a bug")

    ran = threading.Event()
    pool.submit(fail)
    pool.submit(ran.set)
    assert ran.wait(5)
    assert "RuntimeError: a bug" in capsys.readouterr().err
    pool.shutdown()
