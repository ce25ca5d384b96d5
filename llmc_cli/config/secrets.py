"""Which profile values are secrets: names of env variables and headers whose literal values are
masked when shown and never copied from an imported file. (${VAR} placeholders are not secrets:
the value comes from the environment when the server is used.)"""

from __future__ import annotations

import functools
import re
from typing import Any

from llmc_cli.config.profiles import has_placeholder

# A name holds a secret when one of its words says so. Words are split at anything that is not a
# letter or digit and at camelCase humps, so "apiKey", "API_KEY", "x-api-key" and "AccessKeyId"
# read alike, while "author", "keyboard", "monkey" and "compass" are not secrets.
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# Stems that say "secret" wherever they stand in a word ("githubtoken", "dbpassword") ...
_SECRET_STEMS = ("token", "secret", "passw", "passphrase", "apikey", "credential", "cookie", "authori")
# ... and short words that say it only on their own ("pat" is a personal access token).
_SECRET_WORDS = frozenset({"key", "keys", "pass", "pwd", "pat", "auth", "oauth", "jwt", "bearer", "private",
                           "session", "sessions"})


@functools.lru_cache(maxsize=4096)  # asked for every key of every audit record: the same few names again and again
def is_secret_name(name: str) -> bool:
    """Does a field with this name usually hold a secret? The one rule for env variables and
    headers of a profile (masked when shown, never imported as literals), for argument and
    result keys in audit records, and for the environment variables whose values the audit masks."""
    for word in _WORDS.findall(name):
        word = word.lower()
        if word in _SECRET_WORDS or any(stem in word for stem in _SECRET_STEMS):
            return True
    return False


def mask_secrets(table: dict[str, Any]) -> dict[str, Any]:
    """A server table fit to print: literal values of secret-looking env/header names masked
    (${VAR} placeholders are not secrets and stay visible)."""
    out = dict(table)
    for field in ("env", "headers"):
        if isinstance(out.get(field), dict):
            out[field] = {k: "***" if is_secret_name(k) and isinstance(v, str) and not has_placeholder(v) else v
                          for k, v in out[field].items()}
    return out
