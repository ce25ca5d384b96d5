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
descendant of those (a keeper process adopts every orphan of the tree: see _LAUNCH); frozen
with SIGSTOP first so nothing forks while the tree is collected.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from llmc_cli.errors import ConfigError
from llmc_cli.server.protocol import ToolError

FIXED_PATH = "/usr/local/bin:/usr/bin:/bin"
SHELL = "/bin/sh"
TAG_VAR = "LLMC_WORKSPACE_PROCESS"  # marks every process we start, and what it forks
MAX_KEPT = 64  # finished processes remembered for list_processes / read_process_output
TERM_GRACE = 2.0  # seconds between SIGTERM and SIGKILL
KILL_ROUNDS = 20  # collect-and-kill passes over /proc; each freezes what it finds before killing
# What llmc starts for each process (stdlib only, run with -I -S): set the resource limits, then
# argv[5:] runs. With bwrap (argv[4] == "exec") it becomes bwrap, whose PID namespace holds the
# tree. Without (argv[4] == "keep"), a KEEPER stays beside the command: a child subreaper
# (PR_SET_CHILD_SUBREAPER), so every process of the tree that is orphaned (background children,
# double forks, setsid, closed descriptors, wiped environment: nothing escapes this) becomes its
# child, and it lives, ignoring SIGTERM/SIGHUP/SIGINT and reaping, until the last one is gone.
# It keeps the tree's marker and tag, so kill_trees finds it and, through it, all of them. This
# process itself waits for the command and exits with its status (128+N for signal N), so
# `running` and `exitCode` are the command's.
_LAUNCH = r"""
import os, resource, signal, sys
for name, value in zip(("RLIMIT_NPROC", "RLIMIT_AS", "RLIMIT_CPU"), map(int, sys.argv[1:4])):
    kind = getattr(resource, name)
    hard = resource.getrlimit(kind)[1]
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    cpu_hard = value + 1 if hard == resource.RLIM_INFINITY else min(value + 1, hard)
    resource.setrlimit(kind, (value, cpu_hard if name == "RLIMIT_CPU" else value))
argv = sys.argv[5:]
try:
    import ctypes
    prctl = ctypes.CDLL(None, use_errno=True).prctl
except Exception:
    prctl = None
if sys.argv[4] == "exec" or prctl is None:
    os.execv(argv[0], argv)
status_r, status_w = os.pipe()
if os.fork() == 0:  # the keeper
    os.close(status_r)
    prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER (not inherited: set here, before the command starts)
    command = os.fork()
    if command == 0:
        os.close(status_w)
        try:
            os.execv(argv[0], argv)
        except OSError as exc:
            os.write(2, f"cannot run {argv[0]}: {exc.strerror}\n".encode())
        os._exit(127)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)  # the command's pipes are the command's: their end of file is its
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(0)
        except InterruptedError:
            continue
        if pid == command:
            os.write(status_w, str(status).encode())
            os.close(status_w)
os.close(status_w)
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
data = b""
while chunk := os.read(status_r, 64):
    data += chunk
if not data:
    os._exit(125)  # the keeper died before the command ended
status = int(data)
os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))
"""


def find_bwrap() -> str | None:
    found = shutil.which("bwrap", path=FIXED_PATH)
    return os.path.realpath(found) if found else None


@dataclass
class ProcessConfig:
    roots: list[str]
    allow_commands: list[str]
    hidden: list[str] = field(default_factory=list)  # llmc's own files: a sandboxed process must not see them
    hidden_dirs: list[str] = field(default_factory=list)  # those of them that are directories, existing or not
    allow_shell: bool = False
    allow_network: bool = False
    sandbox: str = "auto"  # auto | bwrap | none
    timeout: float = 300.0  # seconds a process may live
    max_output_bytes: int = 1_000_000  # per process; reaching it ends the process
    max_processes: int = 4  # running at once
    max_user_processes: int = 1024  # RLIMIT_NPROC: counts ALL processes of the user (not enforced for root)
    max_memory_bytes: int = 4 << 30  # RLIMIT_AS of each process
    max_cpu_seconds: int | None = None  # RLIMIT_CPU of each process; None: the time limit
    env: dict[str, str] = field(default_factory=dict)


class Launcher:
    """Checks a command against the allow-list and builds the contained argv and environment."""

    def __init__(self, config: ProcessConfig) -> None:
        self.config = config
        self.allowed: dict[str, str] = {}  # real path -> the name the configuration used
        for name in config.allow_commands:
            real = _lookup(name, cwd=None)
            if real is None:
                raise ConfigError(f"workspace: allowed command {name!r} is not an executable on {FIXED_PATH}")
            self.allowed[real] = name
        self.bwrap = find_bwrap() if config.sandbox in ("auto", "bwrap") else None
        if config.sandbox == "bwrap" and self.bwrap is None:
            raise ConfigError("workspace: sandbox = \"bwrap\" but bwrap is not installed (Debian: bubblewrap)")

    @property
    def sandbox(self) -> str:
        """bwrap | none | off (processes disabled)."""
        if self.config.sandbox == "none":
            return "none"
        return "bwrap" if self.bwrap else "off"

    def enabled(self) -> tuple[bool, str]:
        if self.sandbox == "off":
            return False, "bwrap (bubblewrap) is not installed; processes need it unless sandbox = \"none\""
        if not self.allowed and not self.config.allow_shell:
            return False, "no command is allowed (allow_commands is empty)"
        return True, f"processes run {'inside bwrap' if self.sandbox == 'bwrap' else 'WITHOUT a sandbox'}"

    def resolve(self, argv: Any, command: Any, cwd: str) -> list[str]:
        """The argv to run (executable as a real path), or ToolError saying why not."""
        if command is not None:
            if argv is not None:
                raise ToolError("give either argv or command, not both")
            if not self.config.allow_shell:
                raise ToolError("refused: shell commands are not allowed; pass argv (a list of strings)")
            if not isinstance(command, str) or not command.strip() or "\0" in command:
                raise ToolError("command must be a non-empty string")
            return [SHELL, "-c", command]
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise ToolError("argv must be a non-empty list of strings, e.g. [\"ls\", \"-l\"]")
        if any("\0" in a for a in argv):
            raise ToolError("refused: an argument contains a NUL byte")
        exe = argv[0]
        real = _lookup(exe, cwd)
        if real is None or real not in self.allowed:
            allowed = ", ".join(sorted(set(self.allowed.values()))) or "none"
            shown = exe.encode("unicode_escape").decode()
            raise ToolError(f"refused: {shown!r} is not an allowed command (allowed: {allowed})")
        return [real, *argv[1:]]

    def limits(self) -> dict[str, int]:
        c = self.config
        return {"max_user_processes": c.max_user_processes, "max_memory_bytes": c.max_memory_bytes,
                "max_cpu_seconds": c.max_cpu_seconds or max(int(c.timeout + 0.999), 1)}

    def wrap(self, argv: list[str], cwd: str) -> list[str]:
        """The argv that runs `argv` contained: limits, then bwrap (when used), then the command."""
        limits = self.limits()
        return [sys.executable, "-I", "-S", "-c", _LAUNCH, str(limits["max_user_processes"]),
                str(limits["max_memory_bytes"]), str(limits["max_cpu_seconds"]),
                "exec" if self.sandbox == "bwrap" else "keep", *self._sandbox(argv, cwd)]

    def _sandbox(self, argv: list[str], cwd: str) -> list[str]:
        if self.sandbox != "bwrap":
            return argv
        assert self.bwrap is not None
        cmd = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        for root in self.config.roots:  # after the /tmp tmpfs, so a root under /tmp stays visible
            cmd += ["--bind", root, root]
        cmd += self._hide()  # after the roots: hidden even inside a root
        cmd += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if not self.config.allow_network:
            cmd.append("--unshare-net")
        cmd += ["--die-with-parent", "--new-session", "--chdir", cwd, "--", *argv]
        return cmd

    def _hide(self) -> list[str]:
        """bwrap arguments that cover llmc's own files: an empty read-only tmpfs on each protected
        directory, /dev/null (read-only) on each protected file and the files beside it that
        extend its name (audit.jsonl.1, .lock, ...). A mount point can be neither renamed, nor
        replaced, nor hard-linked to (EBUSY/EXDEV); the kernel does let a directory that CONTAINS
        one be renamed, so every ancestor inside a root is bound onto itself first. A protected
        directory that does not exist yet inside a root is created (empty, 0700) so it can be
        covered; otherwise a process could create it with content of its choosing."""
        args: list[str] = []
        for name in self.config.hidden_dirs:
            if not os.path.lexists(name) and any(name.startswith(r.rstrip("/") + "/") for r in self.config.roots):
                try:
                    os.makedirs(name, mode=0o700, exist_ok=True)
                except OSError:
                    pass
        pinned: set[str] = set()
        for name in self.config.hidden:  # then: each ancestor inside a root becomes a mount point
            for root in self.config.roots:
                if name.startswith(root.rstrip("/") + "/"):
                    parts = os.path.relpath(os.path.dirname(name), root).split("/")
                    for i in range(1, len(parts) + 1):
                        ancestor = os.path.join(root, *parts[:i])
                        if parts[0] != "." and ancestor not in pinned and os.path.isdir(ancestor) \
                                and not os.path.islink(ancestor):
                            pinned.add(ancestor)
                            args += ["--bind", ancestor, ancestor]
        for name in self.config.hidden:
            if os.path.islink(name):
                continue  # its target is in the list too
            if os.path.isdir(name):
                args += ["--tmpfs", name, "--remount-ro", name]
            elif os.path.isfile(name):
                head, tail = os.path.split(name)
                try:
                    siblings = sorted(n for n in os.listdir(head) if n.startswith(tail + "."))
                except OSError:
                    siblings = []
                for path in [name, *(os.path.join(head, n) for n in siblings)]:
                    if os.path.isfile(path) and not os.path.islink(path):
                        args += ["--ro-bind", "/dev/null", path]
        return args

    def environment(self, tag: str = "") -> dict[str, str]:
        env = {TAG_VAR: tag, "PATH": FIXED_PATH, "HOME": self.config.roots[0], "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
               "TERM": "dumb", "TMPDIR": "/tmp", "PYTHONUNBUFFERED": "1"}
        env.update(self.config.env)
        return env


def _lookup(exe: str, cwd: str | None) -> str | None:
    """Real path of an executable: names through the fixed PATH, paths as written (relative to
    cwd). The result is compared with the allow-list, so `./ls` or `../../bin/sh` only pass if
    they are the very file allowed."""
    if not exe or "\0" in exe:
        return None
    if "/" in exe:
        path = exe if os.path.isabs(exe) or cwd is None else os.path.join(cwd, exe)
        found = path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    else:
        found = shutil.which(exe, path=FIXED_PATH)
    return os.path.realpath(found) if found else None


class Process:
    """One running (or finished) process: output collected by a reader thread, merged
    stdout+stderr, addressed by absolute byte offsets."""

    def __init__(self, handle: str, argv: list[str], popen: subprocess.Popen[bytes], limit: int, timeout: float,
                 tag: str, marker: str) -> None:
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
                self.output += chunk[:max(room, 0)]
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
        _killpg(self.popen.pid, signal.SIGTERM)
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

    def status(self) -> dict[str, Any]:
        code = self.popen.poll()
        out: dict[str, Any] = {"handle": self.handle, "argv": self.argv, "pid": self.popen.pid,
                               "running": code is None, "exitCode": code, "outputBytes": len(self.output),
                               "startedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started))}
        if self.ended_by:
            out["endedBy"] = self.ended_by
        return out


@dataclass(frozen=True)
class Tree:
    """How to recognise the processes of one started process's tree."""

    leader: int
    tag: str  # value of TAG_VAR in their environment
    marker: str  # readlink of the inherited marker descriptor, "pipe:[inode]"
    leader_reaped: bool  # then its pid may belong to someone else now


def kill_trees(trees: list[Tree]) -> None:
    """Kill every process of these trees: each leader's process group, holders of a tree's
    environment tag or marker descriptor, and all their descendants. Each round freezes what
    it found (SIGSTOP: a frozen process cannot fork) and then kills it, until a round finds
    nothing. What closes every descriptor, wipes its environment and calls setsid escapes this;
    only bwrap's PID namespace contains that (README: sandbox = "none")."""
    if not trees:
        return
    me = os.getpid()
    for _ in range(KILL_ROUNDS):
        found = _members(trees) - {me}
        if not found:
            return
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in found:
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
        for tree in trees:
            _killpg(tree.leader, signal.SIGKILL)


def _members(trees: list[Tree]) -> set[int]:
    leaders = {t.leader for t in trees if not t.leader_reaped}
    groups = {t.leader for t in trees}  # a group id cannot be reused while a member lives
    needles = {f"{TAG_VAR}={t.tag}".encode() for t in trees}
    markers = {t.marker for t in trees}
    parents: dict[int, int] = {}
    members: set[int] = set()
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return members
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == b"Z":
            continue  # a zombie is dead already; its parent reaps it
        parents[pid] = int(fields[1])
        if pid in leaders or int(fields[2]) in groups or _carries(pid, needles, markers):
            members.add(pid)
    grew = True
    while grew:  # descendants of members (a forked child that has not exec'd yet, or has dropped both marks)
        grew = False
        for pid, parent in parents.items():
            if parent in members and pid not in members:
                members.add(pid)
                grew = True
    return members


def _carries(pid: int, needles: set[bytes], markers: set[str]) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            if needles & set(f.read().split(b"\0")):
                return True
        for fd in os.listdir(f"/proc/{pid}/fd"):
            if os.readlink(f"/proc/{pid}/fd/{fd}") in markers:
                return True
    except OSError:
        pass
    return False


def _fd_link(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return "\0"  # no /proc (macOS): matches no descriptor


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class ProcessTable:
    """The processes of this server instance (one client connection)."""

    def __init__(self, launcher: Launcher) -> None:
        self.launcher = launcher
        self.config = launcher.config
        self.procs: dict[str, Process] = {}
        self.forgotten: list[Process] = []  # finished and no longer listed
        self.lock = threading.Lock()

    def start(self, argv: list[str], cwd: str, *, stdin: bool, input_data: bytes | None = None,
              timeout: float | None = None) -> Process:
        limit = min(timeout or self.config.timeout, self.config.timeout)
        with self.lock:
            running = sum(1 for p in self.procs.values() if p.running)
            if running >= self.config.max_processes:
                raise ToolError(f"refused: {running} processes are running, the limit is {self.config.max_processes}; "
                                "terminate one first")
            tag = secrets.token_hex(8)
            # The marker: one end of a pipe nobody writes to, inherited by every descendant
            # that does not close it on purpose; /proc/PID/fd shows it as pipe:[inode].
            mark_r, mark_w = os.pipe()
            try:
                marker = _fd_link(mark_r)
                popen = subprocess.Popen(
                    self.launcher.wrap(argv, cwd), cwd=cwd, env=self.launcher.environment(tag),
                    stdin=subprocess.PIPE if stdin or input_data is not None else subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
                    pass_fds=(mark_r,))
            except OSError as exc:
                raise ToolError(f"cannot start {argv[0]}: {exc.strerror or exc}") from None
            finally:
                os.close(mark_r)
                os.close(mark_w)
            handle = f"proc-{secrets.token_hex(4)}"
            proc = Process(handle, argv, popen, self.config.max_output_bytes, limit, tag, marker)
            self.procs[handle] = proc
            self._forget_old()
        if input_data is not None:
            self.write(proc, input_data, close=not stdin)
        return proc

    def get(self, handle: Any) -> Process:
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
            raise ToolError(f"{proc.handle}: the process no longer reads its input (exit code "
                            f"{proc.popen.poll()})") from None

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
        for handle in finished[:max(0, len(self.procs) - MAX_KEPT)]:
            self.forgotten.append(self.procs.pop(handle))  # its background children still end with us
