"""Approval: the keyed hash that names one exact call, so a call can be pre-approved by it; what
pre-approving a call takes (Approval), and how a person is told (hint)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from llmc_cli.config.files import open_own
from llmc_cli.config.paths import ensure_private_dir, state_dir
from llmc_cli.errors import ConfigError, LlmcError
from llmc_cli.model import JSONObject, ToolCall, canonical_json, compact_json, dataclass, hmac_sha256

if TYPE_CHECKING:
    from llmc_cli.config.profiles import LoadedProfile


def call_hash(call: ToolCall, key: bytes | None = None, *, canonical: str | None = None) -> str:
    """Identity of one exact call: HMAC-SHA256 under this installation's approval key over
    canonical JSON of server.tool and the (unmasked) arguments. Keyed, because the hash is written
    next to masked arguments in the audit log: an unkeyed hash of a short password is undone by
    guessing. Lone surrogates pass through (surrogatepass) so that any call has a hash. `key`:
    approval_key() as the caller read it once for many calls (services.calls.Invocation);
    `canonical`: call_text(call), when the caller made it already."""
    canonical = call_text(call) if canonical is None else canonical
    return "hmac-sha256:" + hmac_sha256(approval_key() if key is None else key, canonical.encode("utf-8", "surrogatepass"))


def call_text(call: ToolCall) -> str:
    """What call_hash hashes: canonical JSON of server.tool and the arguments."""
    return canonical_json({"tool": call.qualified_name, "arguments": call.arguments})


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

    return _key_file(state_dir() / "approval.key")


@lru_cache(maxsize=4)
def _key_file(path: Path) -> bytes:
    """Read the key, or create it: 0600, written whole under a temporary name, then hard-linked
    to its name, which fails if another process got there first (then its key is the key)."""
    try:
        if not path.exists():
            # os.urandom is what secrets.token_hex reads (importing secrets loads hmac and OpenSSL)
            ensure_private_dir(path.parent)
            temp = path.with_name(f".approval.key.{os.urandom(6).hex()}.tmp")
            fd = open_own(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                with os.fdopen(fd, "wb") as fh:  # bytes: as the key is read (below)
                    fh.write(os.urandom(32).hex().encode("ascii") + b"\n")
                    fh.flush()
                    os.fsync(fh.fileno())
                try:
                    os.link(temp, path, follow_symlinks=False)
                except FileExistsError:
                    pass
            finally:
                os.unlink(temp)
        # bytes decoded, not read_text(encoding="ascii"): a text file looks its codec up, which
        # imports encodings.ascii (~0.5 ms of a batch's start-up); the same text (newlines as
        # a text file reads them)
        key = path.read_bytes().decode("ascii", "replace").replace("\r\n", "\n").replace("\r", "\n").strip()
    except OSError as exc:
        raise ConfigError(f"cannot read or create the approval key {path}: {exc.strerror or exc}") from None
    damage = "too short" if len(key) < APPROVAL_KEY_MIN_CHARS else "not ASCII text" if "\ufffd" in key else None
    if damage:
        raise ConfigError(
            f"the approval key {path} is damaged ({damage}): remove it to make a new one "
            "(approved hashes must then be approved again)"
        )
    return key.encode("ascii")


@dataclass(frozen=True)
class Approval:
    """What pre-approving one exact call takes, as data (services return it with a denial for
    want of a confirmation; a front end says how: hint()). This module loads with every call
    (call_hash): a lean dataclass is half a NamedTuple's cost to create (~0.2 vs ~0.45 M
    instructions; a NamedTuple's __new__ is compiled from source), and it is rarely made."""

    profile: str  # the profile as a command names it: its name, or its path when it was loaded by path
    tool: str  # SERVER.TOOL
    arguments: JSONObject
    call_hash: str | None
    secret: bool  # an argument holds a secret: a command line would show it, so the hash instead

    @classmethod
    def of(cls, profile: LoadedProfile, call: ToolCall, call_hash: str | None, *, secret: bool) -> Approval:
        # A profile loaded by path is named by its path: `-p NAME` would not find it.
        name = profile.name if profile.path is None or profile.path.parent.name == "profiles" else str(profile.path)
        return cls(name, call.qualified_name, call.arguments, call_hash, secret)


def hint(approval: Approval) -> str:
    """How a person pre-approves exactly this call: the `llmc policy approve` command with the
    call's own arguments, shell-quoted, ready to paste; when an argument holds a secret (masked as
    the audit log masks it), the callHash to list under `approved` instead. For front ends
    (cli, gateway, agent): services hand out the Approval, never this text."""
    import shlex

    if approval.secret:
        return (
            f'an argument holds a secret, so add "{approval.call_hash}" to `approved` under [policy] of profile '
            f"{approval.profile} (the hash of this exact call)"
        )
    arguments = compact_json(approval.arguments)
    return (
        f"llmc -p {shlex.quote(approval.profile)} policy approve {shlex.quote(approval.tool)} --json "
        f"{shlex.quote(arguments)} --write ({approval.call_hash})"
    )


def with_hint(error: LlmcError) -> LlmcError:
    """A denial for want of a confirmation, its message ending with how to get past it (for a
    person reading it: `call`, `call --batch`, `ask`); any other error as it is."""
    approval = getattr(error, "approval", None)
    if isinstance(approval, Approval) and "pre-approve this exact call" not in error.message:
        error.message = f"{error.message}: pass --yes, or pre-approve this exact call: {hint(approval)}"
        error.args = (error.message, *error.args[1:])
    return error
