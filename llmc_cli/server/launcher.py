"""Launching a process the model may start: allow-listed executables, argv only, contained.

An executable is allowed by what it IS, not by how it is spelled: argv[0] is looked up with a
fixed PATH (never the model's, never the workspace) and resolved to its real path, which must be
one of the allow-list's real paths. There is no shell unless the configuration allows one
explicitly. Each process gets a scrubbed environment, its own process group, resource limits
(RLIMIT_NPROC, RLIMIT_AS, RLIMIT_CPU: set by a small exec trampoline, since preexec_fn is unsafe
in a threaded server), and, with bubblewrap, its own PID namespace (so every fork dies with it),
the roots bound writable, the rest of the system read-only, llmc's own files covered, a private
/tmp and no network unless allowed.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from typing import Any

from llmc_cli.errors import ConfigError
from llmc_cli.server.protocol import ToolError

FIXED_PATH = "/usr/local/bin:/usr/bin:/bin"
SHELL = "/bin/sh"
TAG_VAR = "LLMC_WORKSPACE_PROCESS"  # marks every process we start, and what it forks
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
