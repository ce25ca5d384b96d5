"""Durations on the command line (`session start --idle`, `audit tail --since`): one syntax."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")
UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float | None:
    """'90s', '30m', '2h', '1d' or a bare number of seconds -> seconds; None when `text` is not
    a duration (the caller's error message names its option and what else it accepts)."""
    match = DURATION.fullmatch(text.strip().lower())
    return float(match.group(1)) * UNIT_SECONDS[match.group(2)] if match else None


def parse_since(text: str) -> float:
    """A duration ago, or an ISO time (UTC unless it says otherwise) -> a UNIX timestamp;
    ValueError saying what --since accepts."""
    seconds = parse_duration(text)
    if seconds is not None:
        return time.time() - seconds
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--since expects 30m, 1h, 2d or an ISO time, got {text!r}") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
