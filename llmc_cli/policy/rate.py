"""Rate limits: calls per minute per profile and per tool. Which windows a call counts against and
whether it may run are decided here; the windows are kept by a store/state.py RateWindows (a file
under a lock for this user's processes, or the state database for every machine using it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmc_cli.errors import PolicyDenied
from llmc_cli.policy.rules import glob_match

if TYPE_CHECKING:
    from llmc_cli.config.schema import PolicyConfig
    from llmc_cli.store.state import RateWindows

WINDOW_SECONDS = 60.0


def acquire_rate(
    profile_name: str, qualified: str, config: PolicyConfig, windows: RateWindows, share: tuple[str, int] | None = None
) -> None:
    """Count this call against the profile's and the tool's per-minute limits in `windows`, and
    against the caller's own `share` (a gateway principal's: its name and limit). PolicyDenied
    with a retry-after hint when a limit is reached; nothing is counted then. A call no limit
    applies to touches no store."""
    limits: list[tuple[str, int]] = [(f"principal:{share[0]}", share[1])] if share is not None else []
    if config.calls_per_minute:
        limits.append((f"profile:{profile_name}", config.calls_per_minute))
    for pattern, limit in config.tool_calls_per_minute.items():
        if glob_match(pattern, qualified):
            limits.append((f"tool:{profile_name}:{pattern}", limit))
    if not limits:
        return
    full = windows.acquire(limits, WINDOW_SECONDS)
    if full is not None:
        key, limit, oldest_age = full
        retry = max(0.1, WINDOW_SECONDS - oldest_age)
        raise PolicyDenied(
            f"rate limit: {key.split(':')[0]} limit of {limit} calls per minute reached; retry after {retry:.1f}s",
            retryAfter=round(retry, 1),
            rule=key,
        )
