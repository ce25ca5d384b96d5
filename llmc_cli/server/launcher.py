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
from dataclasses import field

from llmc_cli.config.paths import which
from llmc_cli.errors import ConfigError
from llmc_cli.mcp.tool_error import ToolError
from llmc_cli.model import dataclass
from llmc_cli.server.sandbox import FIXED_PATH, bwrap_argv, find_bwrap, limited

SHELL = "/bin/sh"
TAG_VAR = "LLMC_WORKSPACE_PROCESS"  # marks every process we start, and what it forks


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
            raise ConfigError('workspace: sandbox = "bwrap" but bwrap is not installed (Debian: bubblewrap)')

    @property
    def sandbox(self) -> str:
        """bwrap | none | off (processes disabled)."""
        if self.config.sandbox == "none":
            return "none"
        return "bwrap" if self.bwrap else "off"

    def enabled(self) -> tuple[bool, str]:
        if self.sandbox == "off":
            return False, 'bwrap (bubblewrap) is not installed; processes need it unless sandbox = "none"'
        if not self.allowed and not self.config.allow_shell:
            return False, "no command is allowed (allow_commands is empty)"
        return True, f"processes run {'inside bwrap' if self.sandbox == 'bwrap' else 'WITHOUT a sandbox'}"

    def resolve(self, argv: object, command: object, cwd: str) -> list[str]:
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
            raise ToolError('argv must be a non-empty list of strings, e.g. ["ls", "-l"]')
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
        return {
            "max_user_processes": c.max_user_processes,
            "max_memory_bytes": c.max_memory_bytes,
            "max_cpu_seconds": c.max_cpu_seconds or max(int(c.timeout + 0.999), 1),
        }

    def wrap(self, argv: list[str], cwd: str) -> list[str]:
        """The argv that runs `argv` contained: limits, then bwrap (when used), then the command."""
        limits = self.limits()
        rlimits = {
            "RLIMIT_NPROC": limits["max_user_processes"],
            "RLIMIT_AS": limits["max_memory_bytes"],
            "RLIMIT_CPU": limits["max_cpu_seconds"],
        }
        if self.sandbox != "bwrap":
            return limited(rlimits, argv, keep=True)
        assert self.bwrap is not None
        return limited(
            rlimits,
            bwrap_argv(
                self.bwrap,
                argv,
                cwd=cwd,
                writable=self.config.roots,
                hidden=self.config.hidden,
                hidden_dirs=self.config.hidden_dirs,
                network=self.config.allow_network,
            ),
            keep=False,
        )

    def environment(self, tag: str = "") -> dict[str, str]:
        env = {
            TAG_VAR: tag,
            "PATH": FIXED_PATH,
            "HOME": self.config.roots[0],
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TERM": "dumb",
            "TMPDIR": "/tmp",
            "PYTHONUNBUFFERED": "1",
        }
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
        found = which(exe, path=FIXED_PATH)
    return os.path.realpath(found) if found else None
