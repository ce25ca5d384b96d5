"""The workspace server's options (all checked: a typo must never loosen the sandbox) and the
paths it keeps off limits."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from llmc_cli.config.paths import PROTECTED_PATHS_VAR, config_dir, state_dir
from llmc_cli.errors import ConfigError

# option -> (accepted types, default). Unknown options are errors: a typo must never loosen
# (or silently fail to tighten) the sandbox.
OPTIONS: dict[str, tuple[tuple[type, ...], Any]] = {
    "allow_commands": ((list,), []),
    "allow_shell": ((bool,), False),
    "allow_network": ((bool,), False),
    "sandbox": ((str,), "auto"),
    "timeout": ((int, float), 300),  # seconds a process may live
    "max_processes": ((int,), 4),
    "max_user_processes": ((int,), 1024),  # RLIMIT_NPROC of each process (the user's processes in all)
    "max_memory_bytes": ((int,), 4 << 30),  # RLIMIT_AS of each process
    "max_cpu_seconds": ((int, type(None)), None),  # RLIMIT_CPU of each process; None: `timeout`
    "max_output_bytes": ((int,), 1_000_000),  # output kept per process; reaching it ends the process
    "max_read_bytes": ((int,), 256_000),  # text returned by one read
    "max_file_bytes": ((int,), 50_000_000),  # largest file read_file or a content search will scan
    "max_write_bytes": ((int,), 1_000_000),  # largest write or edited file
    "max_results": ((int,), 1000),  # search results and directory entries
    "search_timeout": ((int, float), 60),
    "env": ((dict,), {}),  # extra environment for processes (the rest is scrubbed)
    "page_size": ((int,), 100),  # tools per tools/list page
    "protect": ((list,), []),  # more paths off limits; llmc adds its own files (never fewer)
}


def protected_paths(extra: list[str]) -> list[str]:
    """llmc's own files, off limits (a directory's path ends with "/"): the config and state
    directories as this process sees them, those its parent llmc named in PROTECTED_PATHS_VAR,
    and `extra`. A union: nothing can shrink it."""

    paths = [f"{config_dir()}/", f"{state_dir()}/", *extra]
    raw = os.environ.get(PROTECTED_PATHS_VAR)
    if raw:
        try:
            inherited = json.loads(raw)
        except ValueError:
            inherited = None
        if not isinstance(inherited, list) or not all(isinstance(p, str) and p for p in inherited):
            raise ConfigError(f"workspace: {PROTECTED_PATHS_VAR} must be a JSON list of paths")
        paths += inherited
    return paths


def check_options(options: Mapping[str, object]) -> dict[str, Any]:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ConfigError(f"workspace: unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(OPTIONS))}")
    out: dict[str, Any] = {}
    for name, (types, default) in OPTIONS.items():
        value = options.get(name, default)
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise ConfigError(f"workspace: option {name} has the wrong type ({type(value).__name__})")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0:
            raise ConfigError(f"workspace: option {name} must be positive")
        out[name] = value
    if out["sandbox"] not in ("auto", "bwrap", "none"):
        raise ConfigError(f"workspace: sandbox must be auto, bwrap or none, not {out['sandbox']!r}")
    if not all(isinstance(c, str) and c for c in out["allow_commands"]):
        raise ConfigError("workspace: allow_commands must be a list of executable names or paths")
    if not all(isinstance(p, str) and p for p in out["protect"]):
        raise ConfigError("workspace: protect must be a list of paths")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in out["env"].items()):
        raise ConfigError("workspace: env must map names to strings")
    return out
