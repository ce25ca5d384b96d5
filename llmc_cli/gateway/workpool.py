"""The threads that answer the gateway's requests (asgi.py): at most `size` of them, kept once
started; work beyond that waits its turn. What concurrent.futures.ThreadPoolExecutor does, without
a Future and its Condition per request and the semaphore dance of every submit: the app waits on
no future (the handler hands its reply over itself), and a request's hand-off is one queue put."""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable
from queue import SimpleQueue


class WorkPool:
    def __init__(self, size: int, name: str) -> None:
        self.size = size
        self.name = name
        self._jobs: SimpleQueue[Callable[[], object] | None] = SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0  # threads that will take the next job put, minus jobs put for them
        self._waiting = 0  # jobs put with no thread to take them yet (all `size` busy)
        self._closed = False

    def submit(self, work: Callable[[], object]) -> None:
        """Run work() on a thread of the pool (what it raises goes to stderr: a bug)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the pool is shut down")
            if self._idle:
                self._idle -= 1
            elif self._threads < self.size:
                self._threads += 1
                threading.Thread(target=self._run, args=(work,), daemon=True, name=self.name).start()
                return
            else:
                self._waiting += 1
            self._jobs.put(work)  # under the lock: counted and put as one

    def shutdown(self) -> None:
        """Threads end once their work is done; nothing new is taken."""
        with self._lock:
            self._closed = True
            for _ in range(self._threads):
                self._jobs.put(None)

    def _run(self, work: Callable[[], object] | None) -> None:
        while work is not None:
            try:
                work()
            except BaseException:  # noqa: BLE001 - the thread lives on for the next request
                traceback.print_exc(file=sys.stderr)
            del work  # nothing of the last request is kept alive while idle
            with self._lock:
                if self._waiting:
                    self._waiting -= 1  # a job waits for this thread: take it
                else:
                    self._idle += 1
            work = self._jobs.get()
