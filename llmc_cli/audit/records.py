"""What goes into an audit record: the time, who ran it, secrets masked, and its hash in the chain."""

from __future__ import annotations

import functools
import os
import pwd
import socket
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from llmc_cli.config.secrets import MASK, Masker, environment_secrets
from llmc_cli.errors import ConfigError
from llmc_cli.model import canonical_json, sha256

__all__ = ["MASK", "AuditError", "identity", "mask_secrets", "now_iso", "record_hash", "secret_values"]


class AuditError(ConfigError):
    """The audit log cannot be written: the action must not happen."""


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def identity() -> dict[str, Any]:
    return {**_user_and_host(), "pid": os.getpid()}


@functools.lru_cache(maxsize=1)
def _user_and_host() -> dict[str, str]:
    """Looked up once per process: a batch writes them into every record."""
    # getpass.getuser()'s rule, without importing getpass (and termios) for it
    user = next((os.environ[name] for name in ("LOGNAME", "USER", "LNAME", "USERNAME") if os.environ.get(name)), None)
    if user is None:
        try:
            user = pwd.getpwuid(os.getuid()).pw_name
        except (KeyError, OSError):
            user = str(os.getuid())
    return {"user": user, "host": socket.gethostname()}


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
