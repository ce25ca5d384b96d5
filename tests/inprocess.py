"""Run llmc's entry point in the test process as if it were a fresh process: tests.helpers.llmc().

A run gets what a fresh `llmc` process would: its environment (the test's, with the run's
changes), working directory, standard streams (new in-memory ones, configured like the
interpreter's own, never a terminal), signal handlers, and llmc's process-wide state as a fresh
import leaves it. Everything is put back when the run ends, so runs cannot see each other. A
signal llmc caught during a run was meant for the test process (Ctrl-C, a CI timeout): it is
raised again once this process's handlers are back. What only a process has (file descriptors
0-2, the main thread's signals from a thread pool, interpreter start-up) is refused or left to
tests.helpers.llmc_process(). The `mcp` SDK test servers a run starts over stdio serve in threads
of this process (tests/peer_threads.py): their processes are not what these tests are about, and
each start costs most of a second.

The process-wide state of llmc_cli, each reset before and after a run (fresh_state()):
- interrupts: the signal received and the flag "a signal stopped us" (a run that was interrupted
  would leave every later run interrupted), the handlers it installs (put back after the run);
- cli.output: -q (QUIET), a status line standing, messages held back during a prompt;
- services.sandbox: the servers already warned about running unsandboxed (one warning per command);
- telemetry and mcp.observe: the exporter and the request observer (main() shuts both down; a
  run cut short must not leave them to the next);
- caches keyed by the environment as it was: the approval key of a state directory (a test may
  remove the key file between runs), and the user and host names of audit records (USER, LOGNAME).
Caches of pure functions (names, regexes, validators) are left: a fresh process would compute the
same values. So is whether bubblewrap works on this machine (server.sandbox), a fact of the machine.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def run_main(
    argv: list[str], stdin: str | bytes | None = None, env: dict[str, str | None] | None = None, cwd: Path | None = None
) -> tuple[int, bytes, bytes]:
    """Run `llmc ARGV` through main() (its error handling and exit codes); (exit code, stdout, stderr)."""
    from llmc_cli.cli.main import main
    from tests.peer_threads import peers_in_threads

    assert threading.current_thread() is threading.main_thread(), (
        "llmc() runs in the main thread (a process's signals, streams, working directory); in parallel: llmc_process()"
    )
    out, err = io.BytesIO(), io.BytesIO()
    received: list[int] = []
    with _stdio_fds(argv), _environment(env), _cwd(cwd), _signal_handlers(), _streams(stdin, out, err), peers_in_threads():
        fresh_state()
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            received = list(getattr(sys.modules.get("llmc_cli.interrupts"), "_received", []))
            fresh_state()
    if received:  # meant for this process (Ctrl-C on pytest, a CI timeout): its own handler acts on it
        signal.raise_signal(received[0])
    return code, out.getvalue(), err.getvalue()


def fresh_state() -> None:
    """llmc_cli's process-wide state as a fresh process has it (this module's docstring: which
    and why). Modules not imported yet are fresh already."""
    modules = sys.modules
    if (interrupts := modules.get("llmc_cli.interrupts")) is not None:
        interrupts._requested.clear()
        interrupts._received.clear()
        interrupts._state.__dict__.clear()
    if (output := modules.get("llmc_cli.cli.output")) is not None:
        output.QUIET = False
        output._status_shown = False
        output._prompt_owner = None
        output._held.clear()
    if (sandbox := modules.get("llmc_cli.services.sandbox")) is not None:
        sandbox._warned.clear()
    if (telemetry := modules.get("llmc_cli.telemetry")) is not None:
        telemetry.shutdown()
    if (observe := modules.get("llmc_cli.mcp.observe")) is not None:
        observe.install(None)
    if (approval := modules.get("llmc_cli.policy.approval")) is not None:
        approval._key_in.cache_clear()
        approval._key_file.cache_clear()
    if (records := modules.get("llmc_cli.audit.records")) is not None:
        records._user_and_host.cache_clear()


@contextlib.contextmanager
def _stdio_fds(argv: list[str]) -> Iterator[None]:
    """File descriptors 0-2 are this process's: a command that takes them over (a stdio server,
    `serve`, points fd 1 at stderr) gets them put back and fails the test, which needs
    llmc_process()."""
    saved = {fd: os.dup(fd) for fd in (0, 1, 2)}
    before = {fd: _identity(fd) for fd in saved}
    try:
        yield
    finally:
        moved = [fd for fd in saved if _identity(fd) != before[fd]]
        for fd, copy in saved.items():
            if fd in moved:
                os.dup2(copy, fd)
            os.close(copy)
        assert not moved, f"llmc {' '.join(argv)} took over file descriptors {moved}: run it with llmc_process()"


def _identity(fd: int) -> tuple[int, int]:
    status = os.fstat(fd)
    return status.st_dev, status.st_ino


@contextlib.contextmanager
def _environment(changes: dict[str, str | None] | None) -> Iterator[None]:
    """os.environ with `changes` (None: unset) for the block, then as it was. COLUMNS as a process
    whose output is a pipe sees it (80, Python's fallback), not this process's terminal."""
    saved = dict(os.environ)
    try:
        os.environ.setdefault("COLUMNS", "80")
        for name, value in (changes or {}).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _cwd(path: Path | None) -> Iterator[None]:
    before = os.getcwd()
    if path is not None:
        os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


@contextlib.contextmanager
def _signal_handlers() -> Iterator[None]:
    """main() installs handlers for SIGINT, SIGTERM and SIGHUP (and may ignore them on the way out):
    this process's own handlers come back after the run."""
    signums = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    saved = {signum: signal.getsignal(signum) for signum in signums}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


@contextlib.contextmanager
def _streams(stdin: str | bytes | None, out: io.BytesIO, err: io.BytesIO) -> Iterator[None]:
    """sys.stdin/stdout/stderr as a fresh interpreter here would open them on pipes: UTF-8, with
    this interpreter's error handlers for stdin and stdout (they depend on the locale, which a
    child inherits), backslashreplace for stderr. stdin None: empty (the process runner gives
    /dev/null)."""
    data = stdin.encode() if isinstance(stdin, str) else stdin or b""
    errors = _errors(sys.__stdout__)
    streams: dict[str, Any] = {
        "stdin": io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors=_errors(sys.__stdin__) or errors),
        "stdout": io.TextIOWrapper(out, encoding="utf-8", errors=errors or "strict", write_through=True),
        "stderr": io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True),
    }
    saved = {name: getattr(sys, name) for name in streams}
    for name, stream in streams.items():
        setattr(sys, name, stream)
    try:
        yield
    finally:
        for name, stream in saved.items():
            with contextlib.suppress(ValueError):  # closed by the command: nothing left to flush
                getattr(sys, name).flush()
            setattr(sys, name, stream)
        for stream in streams.values():
            with contextlib.suppress(ValueError):  # closed: its buffer is closed too
                stream.detach()


def _errors(stream: Any) -> str | None:
    return getattr(stream, "errors", None)
