"""`call --batch`'s JSON Lines on stdout: written in input order as the calls finish, together
when they finish close to each other.

A write of its own for every result (a system call, and a wake-up of whoever reads stdout, which
then preempts the batch or its server) costs the client ~6-15 us of CPU a call over 1,000 fast
calls, as it costs the standard-library floor its unbuffered print (bench/RESULTS.md, session
16). So the thread handing results on writes them itself once HOLD_SECONDS passed since its last
write (~50 writes a second while calls finish fast, on its own thread: no hand-over), and a
writer thread of the batch's writes what still waits LATE_SECONDS later (the results before a
slow call): no result waits longer for a call after it. The first run of results is written at
once (a one-call batch starts no thread). Whoever calls `flush()` (the batch's end, an
interruption, a message on stderr: results written before it stay before it) writes what waits.

What writing raised on the writer thread (stdout closed: EPIPE) is raised by the next `soon()`
or `flush()`, as it was by the write itself."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from llmc_cli.cli import output
from llmc_cli.model import compact_json

HOLD_SECONDS = 0.02  # the batch's thread writes what waits once this passed since its last write
LATE_SECONDS = 0.1  # the writer thread writes what still waits after this


def emit_lines() -> tuple[Callable[[Any], None], Callable[[], None], Callable[[], None]]:
    """(write, soon, done): write keeps an item's line, soon has the kept ones written (at once
    the first time, within LATE_SECONDS after), done writes what is left (and raises what
    writing raised). output.note() writes the kept lines before its message meanwhile."""
    lines = output._batch_lines = Lines()
    add = lines.add

    def write(item: Any) -> None:
        if output._status_shown:
            output._end_status()
        text = compact_json(item)  # output.json_line's, a call less per line
        if not text.isascii() or "\x7f" in text:  # (_json_safe's test: a call less for an ASCII line)
            text = output._json_safe(text)
        add(text + "\n")

    def done() -> None:
        try:
            lines.close()
        finally:
            output._batch_lines = None

    return write, lines.soon, done


class Lines:
    def __init__(self) -> None:
        self.pending: list[str] = []  # whole lines, each with its newline
        self.lock = threading.Lock()  # around `pending`
        self.writing = threading.Lock()  # around taking lines and writing them: in order, once
        self.wanted = threading.Event()  # lines wait for the writer thread
        self.writer: threading.Thread | None = None
        self.error: BaseException | None = None  # what the writer thread's write raised
        self.closed = False  # the batch ended: the writer thread ends too
        self.written = 0.0  # when soon() last wrote (time.monotonic())

    def add(self, line: str) -> None:
        with self.lock:
            self.pending.append(line)

    def soon(self) -> None:
        """The lines added so far are to be written: now the first time and once HOLD_SECONDS
        passed since the last time, else by the writer thread within LATE_SECONDS."""
        if self.error is not None:
            raise self.error
        now = time.monotonic()
        if self.writer is None:
            self.written = now
            self.flush()
            self.writer = threading.Thread(target=self._write_late, daemon=True, name="llmc-batch-output")
            self.writer.start()
        elif now - self.written >= HOLD_SECONDS:
            self.written = now
            self._write()
        elif not self.wanted.is_set():  # (set while the writer thread waits out LATE_SECONDS: no wake-up a line)
            self.wanted.set()

    def flush(self) -> None:
        """What waits, written now; what the writer thread met, raised."""
        self._write()
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        """What waits, written now (raised as flush() does); the writer thread ends."""
        self.closed = True
        self.wanted.set()
        self.flush()

    def _write(self) -> None:
        with self.writing:
            with self.lock:  # (held only to take the lines: a line added meanwhile waits for no write)
                if not self.pending:
                    return
                text = "".join(self.pending)
                self.pending.clear()
            try:
                # Not click.echo (a context lookup, colour and terminal checks per write): the
                # lines are JSON, control characters escaped.
                out = sys.stdout
                out.write(text)
                out.flush()
            except BaseException as exc:
                if self.error is None:  # the batch raises it (soon(), flush()), whoever wrote
                    self.error = exc
                raise

    def _write_late(self) -> None:
        while True:
            self.wanted.wait()
            if self.closed:
                return  # close() writes what is left
            time.sleep(LATE_SECONDS)  # (the batch's thread may write them meanwhile)
            self.wanted.clear()  # before taking them: a line added after this wants the next run
            try:
                self._write()
            except BaseException:  # noqa: BLE001 - kept in `error`: the batch's next soon() or flush() raises it
                return
            if self.closed:  # closed while this thread slept (its wake-up cleared above): done
                return
