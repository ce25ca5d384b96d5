"""The profile cache: a profile text that validated once is kept (state dir, profile-cache/) as
the validated data in JSON, and a later load rebuilds the dataclasses without pydantic
(schema.from_json): importing pydantic and building its validator costs more than the rest of a
command's start-up.

Entries are JSON: {"key": KEY, "profile": TypeAdapter(Profile).dump_python(mode="json")}, in
files named KEY.json. The key covers the schema's source file (its identity: see key_of), so a
changed schema (or builder) misses. Anything unreadable or unexpected is a miss: the text is validated again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmc_cli.config import files, paths, schema
from llmc_cli.config.schema import from_json
from llmc_cli.config.validation import dump, parse_toml, validate
from llmc_cli.errors import ConfigError
from llmc_cli.model import compact_json, sha256

if TYPE_CHECKING:
    from llmc_cli.config.schema import Profile

VERSION = b"llmc profile cache 1\0"
ENTRIES = 16  # newest kept; one per profile text in use is enough


def parse_profile(text: str, where: str) -> Any:
    """Validate TOML text as a Profile; errors are one line: FILE:LINE: KEY: problem.
    A text that validated before comes from the profile cache, without pydantic."""
    key = key_of(text)
    cached = read(key)
    if cached is not None:
        return cached
    profile = validate(parse_toml(text, where), where, text)  # raises on errors: they are never cached
    write(key, profile)
    return profile


def directory() -> Path:
    return paths.state_dir() / "profile-cache"


def key_of(text: str) -> str:
    """The entry of a profile text under this schema. The schema is named by its source file's
    identity (inode, size, modification time in ns): an edit, a checkout or a reinstall changes
    one of them, and a stat costs nothing next to hashing the 24 KB source each command (about a
    million instructions of start-up)."""

    where = os.stat(schema.__file__)
    digest = sha256(VERSION)
    digest.update(f"{where.st_ino}\0{where.st_size}\0{where.st_mtime_ns}\0".encode())
    digest.update(text.encode("utf-8"))
    return digest.hexdigest()


def read(key: str) -> Any:

    try:
        entry = json.loads((directory() / f"{key}.json").read_bytes())
        if entry["key"] != key:
            return None
        return from_json(entry["profile"])
    except Exception:  # noqa: BLE001 - missing, unreadable, corrupt or from another schema: validate instead
        return None


def write(key: str, profile: Profile) -> None:
    """Store a validated profile, if it rebuilds equal (JSON loses nothing for it; a TOML date in
    a server's options, say, would come back a string), replacing the file atomically. Failing
    to write is no error: the next load validates again."""

    data = dump(profile)
    try:
        if from_json(json.loads(json.dumps(data))) != profile:
            return
    except Exception:  # noqa: BLE001 - a profile the cache cannot hold is simply not cached
        return
    try:
        where = paths.ensure_private_dir(directory())
        text = compact_json({"key": key, "profile": data})
        files.write_atomic(where / f"{key}.json", text, durable=False)
        # Bounded: a profile edit leaves its old entry behind; keep only the newest few.
        entries = sorted(where.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in entries[ENTRIES:]:
            old.unlink(missing_ok=True)
    except (OSError, ConfigError):
        pass
