"""What goes into an audit record: the time, who ran it, secrets masked, and its hash in the chain."""

from __future__ import annotations

import functools
import os
import pwd
import time
from collections.abc import Iterable, Mapping
from typing import Any

from llmc_cli.config.secrets import MASK, Masker, environment_secrets
from llmc_cli.errors import ConfigError
from llmc_cli.model import canonical_json, sha256

__all__ = [
    "MASK",
    "AnchorDamaged",
    "AuditError",
    "identity",
    "iso_times",
    "mask_secrets",
    "now_iso",
    "record_hash",
    "secret_values",
]


class AuditError(ConfigError):
    """The audit log cannot be written: the action must not happen."""


class AnchorDamaged(AuditError):
    """The anchor beside the log is not one llmc wrote (not JSON, not UTF-8, the wrong shape):
    nothing is recorded past it; `llmc audit verify` reports it as a failure of the trail."""


_second: tuple[int, str] = (-1, "")  # the last second formatted: (seconds since the epoch, its text)
_last: tuple[int, str] = (-1, "")  # the last millisecond's whole text: (milliseconds since the epoch, its text)
# ".000Z" to ".999Z", each made when first needed: formatting three digits (an f-string's
# `:03d`) was most of a call's cost, and a batch stamps two records a call.
_ends: list[str | None] = [None] * 1000


def now_iso() -> str:
    """UTC now to the millisecond (truncated), as datetime's isoformat gives it with a Z:
    2026-01-02T03:04:05.678Z. Every record has one: the second's text is made once a second,
    the whole text once a millisecond (records sealed one after another share it)."""
    global _second, _last
    millis = time.time_ns() // 1_000_000
    last = _last
    if last[0] == millis:
        return last[1]
    seconds, milli = divmod(millis, 1000)
    if _second[0] != seconds:
        _second = (seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)))
    end = _ends[milli]
    if end is None:
        end = _ends[milli] = f".{milli:03d}Z"
    text = _second[1] + end
    _last = (millis, text)
    return text


def iso_times(nanos: list[int]) -> list[str]:
    """now_iso's text of each time.time_ns() given, made in one go (audit.Deferred: a batch's
    outcome records are stamped when recorded, their text made when they are written)."""
    global _second
    texts: list[str] = []
    last, text = -1, ""
    second, second_text = _second
    for nanoseconds in nanos:
        millis = nanoseconds // 1_000_000
        if millis != last:
            seconds, milli = divmod(millis, 1000)
            if seconds != second:
                second, second_text = seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
            end = _ends[milli]
            if end is None:
                end = _ends[milli] = f".{milli:03d}Z"
            last, text = millis, second_text + end
        texts.append(text)
    _second = (second, second_text)
    return texts


def identity() -> dict[str, Any]:
    return dict(_user_and_host())


@functools.lru_cache(maxsize=1)
def _user_and_host() -> dict[str, Any]:
    """Looked up once per process (a forked child looks again): a batch writes them into every
    record, and os.getpid() is a system call."""
    # getpass.getuser()'s rule, without importing getpass (and termios) for it
    user = next((os.environ[name] for name in ("LOGNAME", "USER", "LNAME", "USERNAME") if os.environ.get(name)), None)
    if user is None:
        try:
            user = pwd.getpwuid(os.getuid()).pw_name
        except (KeyError, OSError):
            user = str(os.getuid())
    # socket.gethostname()'s host name, without importing socket
    return {"user": user, "host": os.uname().nodename, "pid": os.getpid()}


os.register_at_fork(after_in_child=_user_and_host.cache_clear)


def mask_secrets(value: object, secrets: Iterable[str] | None = None) -> Any:
    """A copy of `value` masked by config.secrets.Masker: values under secret-looking keys, and
    every known secret value wherever it appears (default: the environment's)."""
    return Masker(secret_values() if secrets is None else secrets)(value)


def secret_values() -> set[str]:
    """The values of the environment's secret-looking variables (config.secrets.environment_secrets)."""
    return environment_secrets()


def record_hash(record: Mapping[str, object]) -> str:
    body = {k: v for k, v in record.items() if k != "hash"}
    return sha256(canonical_json(body).encode("utf-8")).hexdigest()
