"""The regex worker of content searches (search.py): a process that matches lines against one
regular expression and is killed when it takes too long. Its own module, so that the workspace
server loads subprocess, select and signal with the first regex search, not at start-up."""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
import threading
import time

from llmc_cli.mcp.tool_error import ToolError
from llmc_cli.server.search import MatchTimeout

WORKER_MEMORY = 1 << 30  # address space of the regex worker

# The regex worker: stdlib only, started with -I -S (nothing from the workspace or site-packages
# is importable). First line: [pattern, flags]; then one JSON list of lines per request, answered
# with the indexes of the matching ones. It dies with the thread that started it (PDEATHSIG), and
# the kernel ends it at its CPU limit should everything else fail.
_WORKER = r"""
import ctypes, json, re, resource, signal, sys
try:
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
except Exception:
    pass
cpu, memory = int(sys.argv[1]), int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
pattern, flags = json.loads(sys.stdin.readline())
search = re.compile(pattern, flags).search
for line in sys.stdin:
    hits = [i for i, text in enumerate(json.loads(line)) if search(text)]
    sys.stdout.write(json.dumps(hits) + "\n")
    sys.stdout.flush()
"""


class RegexWorker:
    """A process that matches lines against one regular expression, killed when it takes too long."""

    def __init__(self, pattern: str, flags: int, timeout: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WORKER, str(int(timeout) + 5), str(WORKER_MEMORY)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"},
        )
        self._send([pattern, flags])

    def _send(self, value: object) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(value).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise ToolError(f"the regular expression matcher stopped (exit code {self.proc.poll()})") from None

    def matching(self, lines: list[str], deadline: float, stop: threading.Event) -> list[int]:
        """Indexes of the lines that match; MatchTimeout at the deadline, [] once stopped."""
        self._send(lines)
        assert self.proc.stdout is not None
        replies = select.poll()  # poll(2): select(2) cannot watch a descriptor numbered past 1024
        replies.register(self.proc.stdout.fileno(), select.POLLIN)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise MatchTimeout()
            if stop.is_set():
                self.kill()
                return []
            if replies.poll(min(left, 0.2) * 1000):
                reply = self.proc.stdout.readline()
                if not reply:
                    raise ToolError(
                        f"the regular expression matcher stopped (exit code {self.proc.wait()}: out of memory or CPU time?)"
                    )
                found: list[int] = json.loads(reply)  # the matcher's reply: line numbers
                return found

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()  # type: ignore[union-attr]
            except OSError:
                pass
