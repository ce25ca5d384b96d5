"""Run a command and write its CPU (and this wrapper's own) to a file when it ends:

    python -S bench/rusage_of.py OUT COMMAND ARGS...

Used by bench/batch_bench.py to split a run's CPU by process: the MCP server runs under this
wrapper on both sides (the floor's and llmc's), so the server's user and system seconds are known
apart from its client's. Signals the wrapper gets (SIGTERM from the client's shutdown, SIGINT)
are passed on to the command; the wrapper exits with the command's status. OUT gets one JSON
line: {"user": s, "system": s, "self_user": s, "self_system": s}.
"""

import os
import resource
import signal
import sys


def main() -> None:
    out, argv = sys.argv[1], sys.argv[2:]
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)

    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = resource.getrusage(resource.RUSAGE_SELF)
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(
            f'{{"user": {child.ru_utime}, "system": {child.ru_stime}, '
            f'"self_user": {own.ru_utime}, "self_system": {own.ru_stime}}}\n'
        )
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


if __name__ == "__main__":
    main()
