"""A turn's tool calls on a bounded number of threads, under the run's deadline."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

from llmc_cli import interrupts


def run_bounded(work: Callable[[int], None], indexes: list[int], workers: int, deadline: float) -> bool:
    """Run work(i) for each index on at most `workers` daemon threads (a stuck tool must not keep
    llmc alive); False when the deadline passed first. A bug (a non-llmc exception) is re-raised."""
    if not indexes:
        return True
    todo: queue.Queue[int] = queue.Queue()
    for i in indexes:
        todo.put(i)
    errors: list[BaseException] = []
    done = threading.Semaphore(0)

    def worker() -> None:
        while True:
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            try:
                work(i)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                errors.append(exc)
            done.release()

    for n in range(min(workers, len(indexes))):
        threading.Thread(target=worker, daemon=True, name=f"llmc-tool-{n}").start()
    for _ in indexes:
        if not interrupts.wait(lambda seconds: done.acquire(timeout=seconds), max(0.0, deadline - time.monotonic())):
            # Unstarted calls must not start after the run ended.
            while not todo.empty():
                try:
                    todo.get_nowait()
                except queue.Empty:
                    break
            return False
    if errors:
        raise errors[0]
    return True
