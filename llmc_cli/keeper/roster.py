"""A session's socket and the servers its keeper holds: what a command run with `--session NAME`
needs of keeper/lifecycle.py, without loading the rest of it (starting and stopping keepers),
which a call through a keeper never does (issue 34: start-up is most of such a call)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from llmc_cli.config import paths
from llmc_cli.errors import ConfigError, UsageError, did_you_mean
from llmc_cli.model import ServerSpec

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes on Linux, 104 on macOS


def socket_path(name: str) -> Path:
    if not NAME_PATTERN.match(name):
        raise UsageError(f"invalid session name {name!r}: letters, digits, '.', '_', '-' (at most 64)")
    path = paths.keepers_dir() / f"{name}.sock"
    if len(os.fsencode(str(path))) > SOCKET_PATH_MAX:
        raise ConfigError(
            f"the state directory's path is too long for a Unix socket ({path}); set LLMC_STATE_DIR to a shorter one"
        )
    return path


def specs_of(name: str, servers: Sequence[object], only: tuple[str, ...] = ()) -> list[ServerSpec]:
    """The servers of session `name` as its keeper lists them (status, or an attach reply),
    only those in `only` when given (UsageError naming any it does not hold)."""
    specs = [
        ServerSpec(name=str(s["name"]), timeout=float(s.get("timeout") or 60.0), description=f"held by session {name}")
        for s in servers
        if isinstance(s, dict) and s.get("name")
    ]
    unknown = [s for s in only if s not in {spec.name for spec in specs}]
    if unknown:
        held = [spec.name for spec in specs]
        raise UsageError(
            f"session {name} (in use) does not hold server {unknown[0]!r}{did_you_mean(unknown[0], held)} "
            f"(it holds: {', '.join(held) or 'none'}): start a session that does "
            f"(llmc session start NAME -s {unknown[0]}) or leave this one (unset LLMC_SESSION, or no --session)"
        )
    return [s for s in specs if not only or s.name in only]
