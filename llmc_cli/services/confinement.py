"""What a new sandboxed stdio server needs, read from its command line (`servers add`, `servers
import`): the paths its arguments name (an existing directory: a write path; an existing file: a
read path) and whether it downloads at start (a package runner: network). Every MCP README
writes `npx -y @modelcontextprotocol/server-filesystem /srv/data`; a sandbox that hid /srv/data
from that server would make it useless.

Paths are judged as the kernel resolves them (symbolic links and `..` followed): an argument that
resolves to the whole file system, /proc, /sys, /dev, the home directory itself, or llmc's own
config or state directories is never declared, and neither is one the sandbox already shows
(the system directories); each is said once on stderr instead.
"""

from __future__ import annotations

import os
import re
from dataclasses import field

from llmc_cli.config.paths import config_dir, state_dir
from llmc_cli.model import dataclass
from llmc_cli.server.sandbox import SYSTEM_DIRS
from llmc_cli.services.sandbox import INTERPRETERS

# Package runners that fetch the server when it starts: they need the network.
_RUNNERS = {"npx", "uvx", "bunx", "pnpx"}
_RUNNER_VERBS = {
    "pipx": {"run"},
    "npm": {"exec", "x"},
    "pnpm": {"dlx"},
    "yarn": {"dlx"},
    "bun": {"x"},
    "uv": {"run", "tool"},
    "docker": {"run"},
    "podman": {"run"},
    "deno": {"run"},
}
_INSTALLS = re.compile(r"\b(pip3?|uv pip|npm|pnpm|yarn|bun) (install|add|i)\b")
_NEVER = ("/proc", "/sys", "/dev")


@dataclass
class Derived:
    """What a command line asks of the sandbox, and the arguments that were left out (why)."""

    read_paths: list[str] = field(default_factory=list)
    write_paths: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    network: bool = False
    runner: str | None = None  # the package runner that needs the network


def needs_network(command: tuple[str, ...]) -> str | None:
    """The package runner in a command line that downloads at start ("npx", "pipx run",
    "a pip install"), or None for an installed program."""
    if not command:
        return None
    program = os.path.basename(command[0])
    if program in _RUNNERS:
        return program
    verbs = _RUNNER_VERBS.get(program)
    words = [w for w in command[1:] if not w.startswith("-")]
    if verbs and words and words[0] in verbs:
        return f"{program} {words[0]}"
    if any(_INSTALLS.search(arg) for arg in command[1:]):
        return "a package install"
    return None


def _refusal(real: str) -> str | None:
    """Why a resolved path is never declared (None: it may be)."""
    if real == "/":
        return "the whole file system"
    if any(real == p or real.startswith(p + "/") for p in _NEVER):
        return "a kernel file system"
    home = os.path.realpath(os.path.expanduser("~"))
    if real == home:
        return "the home directory itself"
    for own in (config_dir(), state_dir()):
        mine = os.path.realpath(own)
        if real == mine or real.startswith(mine + "/"):
            return "llmc's own files"
    if any(real == d or real.startswith(d + "/") for d in SYSTEM_DIRS):
        return "the sandbox shows it read-only already"
    return None


def _candidates(command: tuple[str, ...], cwd: str | None) -> list[str]:
    """The arguments that may name paths: absolute ones, `--opt=/path` values, and relative ones
    when the server's working directory is given (the sandbox starts it there)."""
    out: list[str] = []
    if not command:
        return out
    args = list(command[1:])
    if INTERPRETERS.match(os.path.basename(command[0])):
        # `node /opt/srv/index.js DIR`: the script is the program (the sandbox shows its tree), not data
        script = next((i for i, a in enumerate(args) if not a.startswith("-")), None)
        if script is not None and not any(a in ("-m", "-c", "-e") for a in args[:script]):
            del args[script]
    for arg in args:
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if value.startswith("~"):
            value = os.path.expanduser(value)
        if value.startswith("/"):
            out.append(value)
        elif cwd and value and not value.startswith("-") and ("/" in value or value in (".", "..")):
            out.append(os.path.join(cwd, value))
    return out


def derive(command: tuple[str, ...], cwd: str | None = None) -> Derived:
    """The read and write paths a server's command line names, and whether it needs the network."""
    derived = Derived()
    derived.runner = needs_network(command)
    derived.network = derived.runner is not None
    for path in dict.fromkeys(_candidates(command, os.path.expanduser(cwd) if cwd else None)):
        if not os.path.exists(path):
            continue
        real = os.path.realpath(path)
        why = _refusal(real)
        if why:
            derived.skipped.append((path, why))
            continue
        # as written when it is already normal (a symbolic link stays the name the server opens)
        declared = path if os.path.normpath(path) == path and ".." not in path.split("/") else real
        target = derived.write_paths if os.path.isdir(real) else derived.read_paths
        if declared not in target:
            target.append(declared)
    return derived


def summary(name: str, derived: Derived) -> list[str]:
    """The stderr lines that say what a new server was given (none when it was given nothing)."""
    lines = []
    parts = [f"write {', '.join(derived.write_paths)}" if derived.write_paths else ""]
    parts.append(f"read {', '.join(derived.read_paths)}" if derived.read_paths else "")
    shown = "; ".join(p for p in parts if p)
    if shown:
        lines.append(f"llmc: server {name} sees the paths its arguments name ({shown}); --read-path/--write-path choose others")
    if derived.skipped:
        left = ", ".join(f"{p} ({why})" for p, why in derived.skipped)
        lines.append(f"llmc: server {name}: not declared for its sandbox: {left}")
    return lines
