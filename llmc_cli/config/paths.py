"""File locations. Resolved inside functions, never at import, so tests can point them elsewhere."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from llmc_cli.errors import ConfigError

PRIVATE_DIR = 0o700


# Set by llmc in the environment of every stdio server it spawns: the real locations of its own
# files (a JSON list), which a `llmc serve workspace` child must protect but could not know from
# its allow-listed environment (no LLMC_CONFIG_DIR, no XDG_*).
PROTECTED_PATHS_VAR = "LLMC_PROTECTED_PATHS"


def is_llmc_command(argv: tuple[str, ...] | list[str]) -> bool:
    """Whether a stdio server's command line runs this llmc itself (`llmc serve ...`, `python -m
    llmc_cli ...`), judged by what the executable IS, never by its name: the `llmc` beside this
    interpreter or on PATH, or this interpreter running the package (interpreter options such as
    -I or -X dev allowed). Such a child is told where llmc's own files are (its directories, the
    paths to protect) and may run unsandboxed in a gateway; a third-party program called `llmc`
    is neither."""

    if not argv:
        return False
    found = shutil.which(argv[0]) if "/" not in argv[0] else (argv[0] if os.path.isfile(argv[0]) else None)
    if found is None:
        return False
    exe = os.path.realpath(found)
    ours = {
        os.path.realpath(p)
        for p in (os.path.join(os.path.dirname(sys.executable), "llmc"), shutil.which("llmc"))
        if p and os.path.exists(p)
    }
    if exe in ours:
        return True
    if exe != os.path.realpath(sys.executable):
        return False
    args = list(argv[1:])
    while args and args[0].startswith("-") and not args[0].startswith("-m"):
        option = args.pop(0)  # interpreter options: -I, -X dev, -W error, ...
        if option in ("-X", "-W") and args:
            args.pop(0)
    if not args or not args[0].startswith("-m"):
        return False
    module = args[0][2:] or (args[1] if len(args) > 1 else "")  # -m MODULE or -mMODULE
    return module.split(".")[0] == "llmc_cli"


def own_directories() -> dict[str, str]:
    """LLMC_CONFIG_DIR and LLMC_STATE_DIR as this llmc resolves them, absolute: what a nested
    llmc (a stdio server that is llmc itself) needs to find the same profiles and state."""
    return {"LLMC_CONFIG_DIR": os.path.abspath(config_dir()), "LLMC_STATE_DIR": os.path.abspath(state_dir())}


def config_dir() -> Path:
    """$LLMC_CONFIG_DIR, else $XDG_CONFIG_HOME/llmc, else ~/.config/llmc."""
    if os.environ.get("LLMC_CONFIG_DIR"):
        return Path(os.environ["LLMC_CONFIG_DIR"]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "llmc"


def state_dir() -> Path:
    """$LLMC_STATE_DIR, else $XDG_STATE_HOME/llmc, else ~/.local/state/llmc."""
    if os.environ.get("LLMC_STATE_DIR"):
        return Path(os.environ["LLMC_STATE_DIR"]).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).expanduser() / "llmc"


def audit_log_path(configured: Path | str | None = None) -> Path:
    """A profile's audit log (`audit_log`), else audit.jsonl in the state directory. Here, not in
    audit/, so that naming the file (protected_paths, before a server starts) loads no audit code."""
    return Path(configured).expanduser() if configured else state_dir() / "audit.jsonl"


def profiles_dir() -> Path:
    return config_dir() / "profiles"


def ensure_private_dir(path: Path) -> Path:
    """Create `path` and every missing parent, each 0700: state may hold session ids, tokens and
    tool results, and `mkdir(parents=True, mode=...)` would give the parents the umask's mode.
    An existing directory is left as it is. ConfigError (exit 3) when it cannot be made."""

    missing = []
    level = path
    while not level.is_dir():
        missing.append(level)
        if level.parent == level:
            break
        level = level.parent
    for level in reversed(missing):
        try:
            os.mkdir(level, PRIVATE_DIR)
        except FileExistsError:
            if not level.is_dir():
                raise ConfigError(f"cannot create directory {level}: a file is in the way") from None
            continue  # a concurrent llmc made it
        except OSError as exc:
            raise ConfigError(f"cannot create directory {level}: {exc.strerror or exc}") from None
        os.chmod(level, PRIVATE_DIR)  # exact, whatever the umask took away
    return path


def keepers_dir() -> Path:
    """Where session keepers listen (NAME.sock) and log (NAME.log). Only the user may enter it:
    whoever can reach a keeper's socket can run tools with the user's rights."""
    path = ensure_private_dir(state_dir() / "sessions")
    if path.stat().st_mode & 0o077:
        path.chmod(0o700)  # a directory made by something else, too open: tighten it
    return path
