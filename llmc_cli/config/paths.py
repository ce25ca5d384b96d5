"""File locations. Resolved inside functions, never at import, so tests can point them elsewhere."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from llmc_cli.errors import ConfigError

PRIVATE_DIR = 0o700


# Set by llmc in the environment of every stdio server it spawns: the real locations of its own
# files (a JSON list), which a `llmc serve workspace` child must protect but could not know from
# its allow-listed environment (no LLMC_CONFIG_DIR, no XDG_*).
PROTECTED_PATHS_VAR = "LLMC_PROTECTED_PATHS"

# Set to "1" by llmc in the environment of its own stdio children (is_llmc_command) when it runs
# under the rule "no unsandboxed third-party stdio server unless the profile says sandbox =
# \"none\"" (a gateway with principals or auth): the child (a nested gateway, a keeper it
# starts, an llmc at any depth) applies the same rule to its own servers. Only a restriction:
# a child given it where it was not needed is stricter, never looser.
REQUIRE_SANDBOX_VAR = "LLMC_REQUIRE_SANDBOX"


def sandbox_required_by_parent() -> bool:
    """Whether the llmc that started this one runs under the sandbox rule (REQUIRE_SANDBOX_VAR)."""
    return os.environ.get(REQUIRE_SANDBOX_VAR) == "1"


# What may stand between this interpreter and `-m llmc_cli` in a command judged llmc's own: an
# allow-list of options that neither run other code nor change where modules come from (-c, -m
# other, -X pycache_prefix=..., -W with a category to import, grouped flags: all refused).
SAFE_OPTIONS = frozenset({"-I", "-P", "-E", "-s", "-B", "-u", "-q", "-O", "-OO", "-b", "-bb"})
# Patterns as text: re compiles (and caches) them when a launch is judged, not at import.
SAFE_X_OPTIONS = r"^(dev|utf8(=[01])?|faulthandler|importtime|tracemalloc(=\d+)?|warn_default_encoding|int_max_str_digits=\d+|no_debug_ranges)$"
SAFE_W_OPTIONS = r"^(default|error|ignore|always|module|once)(::?[A-Za-z]*Warning)?$"  # builtin categories only
OWN_MODULES = frozenset({"llmc_cli", "llmc_cli.__main__"})
# The server's declared environment may set these PYTHON* variables (none runs code or moves the
# import path); any other PYTHON* (PYTHONPATH, PYTHONHOME, PYTHONSTARTUP, PYTHONUSERBASE,
# PYTHONWARNINGS, PYTHONPYCACHEPREFIX, ...) and the loader's (LD_*, DYLD_*, GCONV_PATH) make the
# command a third party's.
SAFE_PYTHON_ENV = frozenset(
    {
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "PYTHONHASHSEED",
        "PYTHONDEVMODE",
        "PYTHONFAULTHANDLER",
        "PYTHONSAFEPATH",
        "PYTHONNOUSERSITE",
        "PYTHONWARNDEFAULTENCODING",
    }
)


def is_llmc_command(argv: tuple[str, ...] | list[str], env: Mapping[str, str] | None = None) -> bool:
    """Whether a stdio server's command line (and `env`, the environment the profile declares for
    it) runs this llmc itself, judged by what the executable IS and how it would run, never by
    its name, on an allow-list: the `llmc` entry point beside this interpreter, or this
    interpreter with only SAFE_OPTIONS (-X, -W: safe values), at least one of -I or -P (so no
    directory of the server's choosing comes first on sys.path), then `-m llmc_cli`; and no
    variable in `env` that injects code or moves the import path. The executable is found on the
    PATH the child gets (`env` may set it). Such a child is told where llmc's own files are
    and may run unsandboxed in a gateway (under the same rule, PARENT_RULE_VAR); a third-party
    program called `llmc`, or llmc run with a PYTHONPATH of the server's choosing, is neither."""

    env = env or {}
    if not argv or not _clean_environment(env):
        return False
    search = env.get("PATH", os.environ.get("PATH", os.defpath))
    found = which(argv[0], path=search) if "/" not in argv[0] else (argv[0] if os.path.isfile(argv[0]) else None)
    if found is None:
        return False
    exe = os.path.realpath(found)
    entry = os.path.join(os.path.dirname(sys.executable), "llmc")
    if os.path.exists(entry) and exe == os.path.realpath(entry):
        return True
    if exe != os.path.realpath(sys.executable):
        return False
    return _runs_llmc_module(list(argv[1:]))


def _runs_llmc_module(args: list[str]) -> bool:
    isolated = False
    while args and args[0] != "-m" and not args[0].startswith("-m"):
        option = args.pop(0)
        if option in ("-X", "-W"):
            value = args.pop(0) if args else ""
            if not re.match(SAFE_X_OPTIONS if option == "-X" else SAFE_W_OPTIONS, value):
                return False
        elif option not in SAFE_OPTIONS:
            return False  # -c, a script, grouped or unknown options
        isolated = isolated or option in ("-I", "-P")
    if not args:
        return False
    module = args[0][2:] or (args[1] if len(args) > 1 else "")  # -m MODULE or -mMODULE
    return isolated and module in OWN_MODULES


def _clean_environment(env: Mapping[str, str]) -> bool:
    for name in env:
        if name.startswith("PYTHON") and name not in SAFE_PYTHON_ENV:
            return False
        if name.startswith(("LD_", "DYLD_")) or name == "GCONV_PATH":
            return False
    return True


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
            private_dir_mode(level)  # exact, whatever the umask took away
        except FileExistsError:
            if not level.is_dir():
                raise ConfigError(f"cannot create directory {level}: a file is in the way") from None
            continue  # a concurrent llmc made it
        except OSError as exc:
            raise ConfigError(f"cannot create directory {level}: {exc.strerror or exc}") from None
    return path


def private_dir_mode(path: Path) -> None:
    """chmod 0700 on the directory itself, never through a link in its place (a chmod by name
    follows one: a link planted between mkdir and chmod would retarget it)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fchmod(fd, PRIVATE_DIR)
    finally:
        os.close(fd)


def keepers_dir() -> Path:
    """Where session keepers listen (NAME.sock) and log (NAME.log). Only the user may enter it:
    whoever can reach a keeper's socket can run tools with the user's rights."""
    path = ensure_private_dir(state_dir() / "sessions")
    if path.stat().st_mode & 0o077:
        private_dir_mode(path)  # a directory made by something else, too open: tighten it
    return path


def which(command: str, path: str | None = None) -> str | None:
    """shutil.which(command, path=path) as it is on POSIX, without importing shutil: it loads
    zlib, bz2 and lzma, 6.5 M instructions of the start-up of every command that launches a
    server (tests/test_which.py holds the two side by side)."""

    def runnable(name: str) -> bool:
        return os.path.exists(name) and os.access(name, os.X_OK) and not os.path.isdir(name)

    if os.path.dirname(command):
        return command if runnable(command) else None
    if path is None:
        path = os.environ.get("PATH", None)
        if path is None:
            try:
                path = os.confstr("CS_PATH")
            except (AttributeError, ValueError):
                path = os.defpath
    if not path:
        return None
    seen: set[str] = set()
    for directory in os.fsdecode(path).split(os.pathsep):
        if directory not in seen:
            seen.add(directory)
            name = os.path.join(directory, command)
            if runnable(name):
                return name
    return None
