"""The `llmc` command (pyproject.toml's scripts: run) and `python -m llmc_cli`.

Start-up runs with the cyclic garbage collector off: importing the program and building its
command tree allocates some hundred thousand objects that live as long as the process, and the
collector would walk them again and again (its passes were an eighth of a short command's
instructions, issue 34). cli/main.py turns it back on once the command's module is loaded, after
moving everything alive then into the permanent generation (gc.freeze: long-running commands,
the gateway and the keeper, never walk their start-up again). At exit, what is still alive is
frozen too, so the interpreter's last full collection walks only the young objects (the
interpreter does not promise finalizers of garbage cycles at exit in any case).

The command's end skips the interpreter's teardown when nothing is left for it (leave()).
"""

import atexit
import gc
import os
import sys
import threading

gc.disable()
atexit.register(gc.freeze)  # registered first: runs last of the exit handlers

from llmc_cli.cli.main import main  # noqa: E402 - after the collector is off


def run() -> None:
    try:
        main()
    except SystemExit as exc:
        leave(exc.code)  # returns when the interpreter's own exit must run
        raise
    leave(0)


def leave(code: object) -> None:
    """Exit with `code` (SystemExit's) at once, as the interpreter would after its teardown: run
    the exit handlers (atexit), flush stdout and stderr, then os._exit. The teardown (~180 modules
    cleared, their objects freed one by one: ~7 M instructions of a 1-call batch, issue 34) has
    nothing to do for llmc: its files are written by os.write and fsync'd as they go (the audit
    log, its anchor; write_atomic) or closed by their `with`, its descriptors and locks end with
    the process, and every worker thread that writes (the batch's audit flusher) is joined before
    the command returns. Returns (for the interpreter's own exit) when its exit differs from
    os._exit's: a status that is not a number 0-255 (SystemExit("text") prints it), a
    non-daemon thread still running (the interpreter waits for it), threading's own exit
    callbacks registered (concurrent.futures' workers), or a flush that failed (the interpreter
    reports it and exits 120)."""
    status = 0 if code is None else code
    if not isinstance(status, int) or not 0 <= status <= 255:
        return
    callbacks = getattr(threading, "_threading_atexits", None)  # what threading runs at exit (3.11-3.13)
    if callbacks is None or callbacks:
        return
    if any(not thread.daemon for thread in threading.enumerate() if thread is not threading.main_thread()):
        return
    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.__stdout__, sys.stderr, sys.__stderr__):
            if stream is not None and not stream.closed:
                stream.flush()
    except (OSError, ValueError, AttributeError):
        return
    os._exit(status)


if __name__ == "__main__":
    run()
