"""`call --batch`'s JSON Lines on stdout: written in input order as the calls finish, a run of
them at most HOLD_SECONDS after the first of it finished.

A write of its own for every result (a system call, and a wake-up of whoever reads stdout, which
then preempts the batch or its server) was ~15 us of the client's CPU a call over 1,000 fast
calls, as much as the standard-library floor pays for its unbuffered print (bench/RESULTS.md,
session 16). So after the first run of results (a one-call batch starts no thread), a writer
thread of its own writes what finished within HOLD_SECONDS in one write: ~50 writes a second
while calls finish fast, none while they run long, and a result never waits longer than that for
a slow call after it. Whoever calls `flush()` (the batch's end, an interruption, a message on
stderr: results written before it stay before it) writes what waits at once.

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

HOLD_SECONDS = 0.02


def emit_lines() -> tuple[Callable[[Any], None], Callable[[], None], Callable[[], None]]:
    """(write, soon, done): write keeps an item's line, soon has the kept ones written (at once
    the first time, within HOLD_SECONDS after), done writes what is left (and raises what
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

    def add(self, line: str) -> None:
        with self.lock:
            self.pending.append(line)

    def soon(self) -> None:
        """The lines added so far are to be written: now the first time, within HOLD_SECONDS after."""
        if self.error is not None:
            raise self.error
        if self.writer is None:
            self.flush()
            self.writer = threading.Thread(target=self._write_soon, daemon=True, name="llmc-batch-output")
            self.writer.start()
        elif not self.wanted.is_set():  # (set while the writer thread holds a run: no wake-up a line)
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

    def _write_soon(self) -> None:
        while True:
            self.wanted.wait()
            if self.closed:
                return  # close() writes what is left
            time.sleep(HOLD_SECONDS)  # the lines of the next HOLD_SECONDS go with these
            self.wanted.clear()  # before taking them: a line added after this wants the next run
            try:
                self._write()
            except BaseException:  # noqa: BLE001 - kept in `error`: the batch's next soon() or flush() raises it
                return
