"""Threads that are reused: work runs at once on an idle thread, or on a new one when none is
idle, so it never waits behind slow work (a call that runs for minutes), and a busy process does
not pay a thread start for every request. A thread idle for `idle_seconds` ends."""

from __future__ import annotations

import queue
import threading
import traceback
from collections.abc import Callable
from typing import Any

IDLE_SECONDS = 30.0


class Workers:
    def __init__(self, name: str, idle_seconds: float = IDLE_SECONDS) -> None:
        self.name = name
        self.idle_seconds = idle_seconds
        self._jobs: queue.SimpleQueue[tuple[Callable[..., object], tuple[Any, ...]]] = queue.SimpleQueue()
        self._idle = 0  # threads waiting for a job, minus the jobs handed to them and not yet taken
        self._lock = threading.Lock()

    def submit(self, work: Callable[..., object], *args: object) -> None:
        """Run work(*args) on a thread; what it raises is printed to stderr (a bug: callers
        answer their own errors)."""
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
                self._jobs.put((work, args))  # under the lock: a thread giving up sees it (below)
                return
        threading.Thread(target=self._run, args=(work, args), daemon=True, name=self.name).start()

    def _run(self, work: Callable[..., object], args: tuple[object, ...]) -> None:
        while True:
            try:
                work(*args)
            except BaseException:  # noqa: BLE001 - the thread lives on for the next job
                traceback.print_exc()
            del work, args  # nothing of the last job is kept alive while idle
            with self._lock:
                self._idle += 1
            try:
                work, args = self._jobs.get(timeout=self.idle_seconds)
            except queue.Empty:
                with self._lock:
                    try:  # handed a job just as the wait ended: run it
                        work, args = self._jobs.get_nowait()
                    except queue.Empty:
                        self._idle -= 1
                        return


_shared: dict[str, Workers] = {}
_shared_lock = threading.Lock()


def shared(name: str) -> Workers:
    """The process's workers of this name (one set of threads for every user of them)."""
    with _shared_lock:
        if name not in _shared:
            _shared[name] = Workers(name)
        return _shared[name]
