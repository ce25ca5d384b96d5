"""What goes into an audit record: the time, who ran it, secrets masked, and its hash in the chain."""

from __future__ import annotations

import functools
import getpass
import hashlib
import os
import socket
from datetime import datetime, timezone
from typing import Any

from llmc_cli.config.secrets import is_secret_name
from llmc_cli.errors import ConfigError
from llmc_cli.model import canonical_json

MASK = "***"


class AuditError(ConfigError):
    """The audit log cannot be written: the action must not happen."""


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def identity() -> dict[str, Any]:
    return {**_user_and_host(), "pid": os.getpid()}


@functools.lru_cache(maxsize=1)
def _user_and_host() -> dict[str, str]:
    """Looked up once per process: a batch writes them into every record."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return {"user": user, "host": socket.gethostname()}


def mask_secrets(value: Any, secrets: set[str] | None = None) -> Any:
    """Values under secret-looking keys, and any string equal to (or containing) the value of a
    secret-looking environment variable, become '***'."""
    secrets = secret_values() if secrets is None else secrets
    if isinstance(value, dict):
        return {k: MASK if isinstance(k, str) and is_secret_name(k) else mask_secrets(v, secrets)
                for k, v in value.items()}
    if isinstance(value, list):
        return [mask_secrets(v, secrets) for v in value]
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, MASK)
    return value


def secret_values() -> set[str]:
    return {v for k, v in os.environ.items() if is_secret_name(k) and len(v) >= 6}


def record_hash(record: dict[str, Any]) -> str:
    body = {k: v for k, v in record.items() if k != "hash"}
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()
