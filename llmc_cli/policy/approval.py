"""Approval: the keyed hash that names one exact call, so a call can be pre-approved by it."""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

from llmc_cli.errors import ConfigError
from llmc_cli.model import ToolCall, canonical_json


def call_hash(call: ToolCall) -> str:
    """Identity of one exact call: HMAC-SHA256 under this installation's approval key over
    canonical JSON of server.tool and the (unmasked) arguments. Keyed, because the hash is written
    next to masked arguments in the audit log: an unkeyed hash of a short password is undone by
    guessing. Lone surrogates pass through (surrogatepass) so that any call has a hash."""
    import hmac

    canonical = canonical_json({"tool": call.qualified_name, "arguments": call.arguments})
    digest = hmac.new(approval_key(), canonical.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
    return "hmac-sha256:" + digest


APPROVAL_KEY_ENV = "LLMC_APPROVAL_KEY"
APPROVAL_KEY_MIN_CHARS = 32


def approval_key() -> bytes:
    """$LLMC_APPROVAL_KEY (the same value on every machine that shares approved hashes), else
    `approval.key` in the state directory, created on first use."""
    shared = os.environ.get(APPROVAL_KEY_ENV)
    if shared:
        if len(shared) < APPROVAL_KEY_MIN_CHARS:
            raise ConfigError(
                f"{APPROVAL_KEY_ENV} must be at least {APPROVAL_KEY_MIN_CHARS} characters (e.g. 64 random hex digits)"
            )
        return shared.encode("utf-8")
    return _key_in(os.environ.get("LLMC_STATE_DIR"), os.environ.get("XDG_STATE_HOME"), os.environ.get("HOME"))


@lru_cache(maxsize=8)
def _key_in(*where: str | None) -> bytes:
    """The key file's key for the state directory these variables name (asked once per call,
    the path is worked out once: a tenth of a gateway call's policy decision)."""
    from llmc_cli.config.paths import state_dir

    return _key_file(state_dir() / "approval.key")


@lru_cache(maxsize=4)
def _key_file(path: Path) -> bytes:
    """Read the key, or create it: 0600, written whole under a temporary name, then hard-linked
    to its name, which fails if another process got there first (then its key is the key)."""
    try:
        if not path.exists():
            import secrets  # only the first call ever creates the key

            from llmc_cli.config.files import open_own
            from llmc_cli.config.paths import ensure_private_dir

            ensure_private_dir(path.parent)
            temp = path.with_name(f".approval.key.{secrets.token_hex(6)}.tmp")
            fd = open_own(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                with os.fdopen(fd, "w", encoding="ascii") as fh:
                    fh.write(secrets.token_hex(32) + "\n")
                    fh.flush()
                    os.fsync(fh.fileno())
                try:
                    os.link(temp, path, follow_symlinks=False)
                except FileExistsError:
                    pass
            finally:
                os.unlink(temp)
        key = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read or create the approval key {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if len(key) < APPROVAL_KEY_MIN_CHARS:
        raise ConfigError(
            f"the approval key {path} is damaged (too short): remove it to make a new one "
            "(approved hashes must then be approved again)"
        )
    return key.encode("ascii")
