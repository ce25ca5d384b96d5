"""Rate limits: calls per minute per profile and per tool, counted across processes (a file under
a lock) or machines (the state database)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from llmc_cli.errors import PolicyDenied
from llmc_cli.policy.rules import glob_match

if TYPE_CHECKING:
    from pathlib import Path

    from llmc_cli.config.schema import PolicyConfig

WINDOW_SECONDS = 60.0


def acquire_rate(profile_name: str, qualified: str, config: PolicyConfig, state_dir: Callable[[], Path],
                 database_url: str | None = None) -> None:
    """Count this call against the profile's and the tool's per-minute limits, across every llmc
    process of this user (a JSON file in the state directory under a file lock), or of every
    llmc on every machine using the state database `database_url`. PolicyDenied with a
    retry-after hint when a limit is reached; nothing is counted then. `state_dir` is called
    only when a limit applies (most calls have none and touch no file)."""
    limits: list[tuple[str, int]] = []
    if config.calls_per_minute:
        limits.append((f"profile:{profile_name}", config.calls_per_minute))
    for pattern, limit in config.tool_calls_per_minute.items():
        if glob_match(pattern, qualified):
            limits.append((f"tool:{profile_name}:{pattern}", limit))
    if not limits:
        return
    if database_url:
        from llmc_cli.store.postgres import Database

        now = time.time()
        full = Database.for_url(database_url).acquire_rate(limits, now, WINDOW_SECONDS)
        if full is not None:
            key, limit, oldest = full
            retry = max(0.1, WINDOW_SECONDS - (now - oldest))
            raise PolicyDenied(f"rate limit: {key.split(':')[0]} limit of {limit} calls per minute reached; "
                               f"retry after {retry:.1f}s", retryAfter=round(retry, 1), rule=key)
        return
    from llmc_cli.config import files

    path = state_dir() / "ratelimit.json"
    with files.locked(path):
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            state = {}  # missing or torn by an older llmc: start counting afresh
        if not isinstance(state, dict):
            state = {}
        now = time.time()
        for key, limit in limits:
            recent = [t for t in state.get(key) or [] if isinstance(t, (int, float)) and now - t < WINDOW_SECONDS]
            state[key] = recent
            if len(recent) >= limit:
                retry = max(0.1, WINDOW_SECONDS - (now - min(recent)))
                raise PolicyDenied(f"rate limit: {key.split(':')[0]} limit of {limit} calls per minute reached; "
                                   f"retry after {retry:.1f}s", retryAfter=round(retry, 1), rule=key)
        for key, _ in limits:
            state[key].append(now)
        # Counted before the call runs: if the count cannot be stored (ConfigError, exit 3), the
        # call does not run either, or a full disk would lift every limit.
        files.write_atomic(path, json.dumps(state))
