"""The one duration syntax of the command line (`session start --idle`, `audit tail --since`)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from llmc_cli.cli.durations import parse_duration, parse_since


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("90s", 90.0),
        ("30m", 1800.0),
        ("2h", 7200.0),
        ("1d", 86400.0),
        ("1.5h", 5400.0),
        ("45", 45.0),
        ("0", 0.0),
        (" 2H ", 7200.0),
        ("", None),
        ("2w", None),
        ("-5m", None),
        ("m", None),
        ("1h30m", None),
    ],
)
def test_durations(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


def test_since_is_a_duration_ago_or_an_iso_time() -> None:
    before = time.time()
    ago = parse_since("1h")
    assert before - 3600 - 1 <= ago <= time.time() - 3600
    assert parse_since("2026-01-02T03:04:05Z") == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp()
    assert parse_since("2026-01-02T03:04:05") == parse_since("2026-01-02T03:04:05+00:00")  # no zone: UTC
    with pytest.raises(ValueError, match="--since expects"):
        parse_since("yesterday")
