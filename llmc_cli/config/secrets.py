"""Which profile values are secrets: names of env variables and headers whose literal values are
masked when shown and never copied from an imported file. (${VAR} placeholders are not secrets:
the value comes from the environment when the server is used.)"""

from __future__ import annotations

import re
from typing import Any

from llmc_cli.config.profiles import has_placeholder

_SECRET_NAME = re.compile(r"token|secret|passw|api[-_]?key|apikey|authori[sz]|auth(?!or)|credential|cookie|private|\bpat\b|_pat$",
                          re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """Does an env variable or header with this name usually hold a secret?"""
    return bool(_SECRET_NAME.search(name))


def mask_secrets(table: dict[str, Any]) -> dict[str, Any]:
    """A server table fit to print: literal values of secret-looking env/header names masked
    (${VAR} placeholders are not secrets and stay visible)."""
    out = dict(table)
    for field in ("env", "headers"):
        if isinstance(out.get(field), dict):
            out[field] = {k: "***" if is_secret_name(k) and isinstance(v, str) and not has_placeholder(v) else v
                          for k, v in out[field].items()}
    return out
