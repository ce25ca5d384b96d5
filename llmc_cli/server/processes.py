"""Processes the model may start: allow-listed executables, argv only, contained.

An executable is allowed by what it IS, not by how it is spelled: argv[0] is looked up with a
fixed PATH (never the model's, never the workspace) and resolved to its real path, which must be
one of the allow-list's real paths. There is no shell unless the configuration allows one
explicitly. Each process gets a scrubbed environment, its own process group, resource limits
(RLIMIT_NPROC, RLIMIT_AS, RLIMIT_CPU: set by a small exec trampoline, since preexec_fn is unsafe
in a threaded server), a time limit, an output cap, and, with bubblewrap, its own PID namespace
(so every fork dies with it), the roots bound writable, the rest of the system read-only,
llmc's own files covered, a private /tmp and no network unless allowed.

Without bubblewrap, ending a process means ending its whole tree, also what it left running in
the background after it exited: its process group, what carries its environment tag, what holds
its marker (an inherited pipe descriptor, which survives setsid and `env -i`), and every
descendant of those (trees.py); frozen with SIGSTOP first so nothing forks while the tree is
collected. Launching (allow-list, sandbox, limits) is launcher.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

from llmc_cli.mcp.tool_error import ToolError
from llmc_cli.server.launcher import Launcher, ProcessConfig
from llmc_cli.server.sandbox import FIXED_PATH
from llmc_cli.server.trees import Tree, fd_link, kill_trees, killpg
from llmc_cli.server.workspace_results import ProcessStatus

__all__ = ["FIXED_PATH", "Launcher", "ProcessConfig", "Process", "ProcessTable"]

MAX_KEPT = 64  # finished processes remembered for list_processes / read_process_output
TERM_GRACE = 2.0  # seconds between SIGTERM and SIGKILL


class Process:
    """One running (or finished) process: output collected by a reader thread, merged
    stdout+stderr, addressed by absolute byte offsets."""

    def __init__(
        self, handle: str, argv: list[str], popen: subprocess.Popen[bytes], limit: int, timeout: float, tag: str, marker: str
    ) -> None:
        self.handle, self.argv, self.popen, self.tag, self.marker = handle, argv, popen, tag, marker
        self.started = time.time()
        self.output = bytearray()
        self.limit = limit
        self.ended_by: str | None = None  # why llmc ended it: timeout | output limit | terminated
        self.eof = False
        self.last_output = time.monotonic()
        self.cond = threading.Condition()
        self._timer = threading.Timer(timeout, self.kill, args=(f"time limit of {timeout:g} s",))
        self._timer.daemon = True
        self._timer.start()
        threading.Thread(target=self._read, daemon=True, name=f"llmc-proc-{handle}").start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        fd = self.popen.stdout.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            with self.cond:
                if not chunk:
                    self.eof = True
                    self.cond.notify_all()
                    break
                room = self.limit - len(self.output)
                self.output += chunk[: max(room, 0)]
                self.last_output = time.monotonic()
                self.cond.notify_all()
            if len(chunk) > room:
                self.kill(f"output limit of {self.limit} bytes")
        self.popen.wait()
        self._timer.cancel()
        with self.cond:
            self.cond.notify_all()

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    def kill(self, reason: str) -> None:
        """End the process and its whole tree: SIGTERM to the group, a grace period, then every
        process of the tree frozen and killed, also when the leader has long exited."""
        if self.terminate(reason):
            self.wait_gone(time.monotonic() + TERM_GRACE)
        kill_trees([self.tree()])

    def terminate(self, reason: str) -> bool:
        """SIGTERM to the process group, if the process still runs; True if it did."""
        if self.popen.poll() is not None and self.eof:
            return False
        self.ended_by = self.ended_by or reason
        killpg(self.popen.pid, signal.SIGTERM)
        return True

    def wait_gone(self, deadline: float) -> None:
        try:
            self.popen.wait(timeout=max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            pass

    def tree(self) -> Tree:
        return Tree(self.popen.pid, self.tag, self.marker, leader_reaped=self.popen.returncode is not None)

    def wait_quiet(self, since: int, wait_s: float, quiet_s: float) -> None:
        """Return once the process ended, or printed something after `since` and then stayed quiet
        for quiet_s, or wait_s passed."""
        deadline = time.monotonic() + wait_s
        with self.cond:
            while True:
                now = time.monotonic()
                if self.eof and self.popen.poll() is not None:
                    return
                if len(self.output) > since and now - self.last_output >= quiet_s:
                    return
                if now >= deadline:
                    return
                self.cond.wait(timeout=min(deadline - now, quiet_s, 0.2))

    def status(self) -> ProcessStatus:
        code = self.popen.poll()
        out: ProcessStatus = {
            "handle": self.handle,
            "argv": self.argv,
            "pid": self.popen.pid,
            "running": code is None,
            "exitCode": code,
            "outputBytes": len(self.output),
            "startedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
        }
        if self.ended_by:
            out["endedBy"] = self.ended_by
        return out


class ProcessTable:
    """The processes of this server instance (one client connection)."""

    def __init__(self, launcher: Launcher) -> None:
        self.launcher = launcher
        self.config = launcher.config
        self.procs: dict[str, Process] = {}
        self.forgotten: list[Process] = []  # finished and no longer listed
        self.lock = threading.Lock()

    def start(
        self, argv: list[str], cwd: str, *, stdin: bool, input_data: bytes | None = None, timeout: float | None = None
    ) -> Process:
        limit = min(timeout or self.config.timeout, self.config.timeout)
        with self.lock:
            running = sum(1 for p in self.procs.values() if p.running)
            if running >= self.config.max_processes:
                raise ToolError(
                    f"refused: {running} processes are running, the limit is {self.config.max_processes}; terminate one first"
                )
            tag = os.urandom(8).hex()
            # The marker: one end of a pipe nobody writes to, inherited by every descendant
            # that does not close it on purpose; /proc/PID/fd shows it as pipe:[inode].
            mark_r, mark_w = os.pipe()
            try:
                marker = fd_link(mark_r)
                popen = subprocess.Popen(
                    self.launcher.wrap(argv, cwd),
                    cwd=cwd,
                    env=self.launcher.environment(tag),
                    stdin=subprocess.PIPE if stdin or input_data is not None else subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=(mark_r,),
                )
            except OSError as exc:
                raise ToolError(f"cannot start {argv[0]}: {exc.strerror or exc}") from None
            finally:
                os.close(mark_r)
                os.close(mark_w)
            handle = f"proc-{os.urandom(4).hex()}"
            proc = Process(handle, argv, popen, self.config.max_output_bytes, limit, tag, marker)
            self.procs[handle] = proc
            self._forget_old()
        if input_data is not None:
            self.write(proc, input_data, close=not stdin)
        return proc

    def get(self, handle: object) -> Process:
        with self.lock:
            proc = self.procs.get(handle) if isinstance(handle, str) else None
        if proc is None:
            raise ToolError(f"no process with handle {handle!r} in this session (list_processes shows them)")
        return proc

    def write(self, proc: Process, data: bytes, *, close: bool = False) -> None:
        if proc.popen.stdin is None or proc.popen.stdin.closed:
            raise ToolError(f"{proc.handle}: its input is closed")
        try:
            proc.popen.stdin.write(data)
            proc.popen.stdin.flush()
            if close:
                proc.popen.stdin.close()
        except (BrokenPipeError, ValueError, OSError):
            raise ToolError(f"{proc.handle}: the process no longer reads its input (exit code {proc.popen.poll()})") from None

    def list(self) -> list[Process]:
        with self.lock:
            return list(self.procs.values())

    def close(self) -> None:
        """Every process tree ends with the server, also one whose leader exited long ago and
        left a child running in the background."""
        with self.lock:
            everything = [*self.forgotten, *self.procs.values()]
        running = [p for p in everything if p.terminate("server shut down")]
        deadline = time.monotonic() + TERM_GRACE  # one grace period for all, not one each
        for proc in running:
            proc.wait_gone(deadline)
        kill_trees([p.tree() for p in everything])

    def _forget_old(self) -> None:
        finished = [h for h, p in self.procs.items() if not p.running]
        for handle in finished[: max(0, len(self.procs) - MAX_KEPT)]:
            self.forgotten.append(self.procs.pop(handle))  # its background children still end with us
