"""Writing profiles: `servers add/remove/import`, `profiles init`, `policy approve`, `serve`'s
edits. Every write round-trips the parsed TOML: each table llmc did not change is written back
with the same values, ${VAR}s stay unexpanded, the file is replaced atomically under a lock.
tomli-w cannot keep comments, so a profile llmc has edited loses its comments.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from llmc_cli.config import files
from llmc_cli.config.profiles import DEFAULT_PROFILE, LoadedProfile, no_server, profile_path
from llmc_cli.config.validation import dump, parse_toml, validate
from llmc_cli.errors import ConfigError


def server_table(server: Any) -> dict[str, Any]:
    """A ServerConfig as the TOML table llmc writes: only the keys that differ from defaults."""
    return dump(server, exclude_defaults=True, exclude_none=True)


def raw_profile(path: Path) -> dict[str, Any]:
    """The parsed TOML of a profile file, unvalidated and unexpanded ({} when it does not exist)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read profile {path}: {getattr(exc, 'strerror', None) or exc}") from None
    return parse_toml(text, str(path))


def toml_text(data: dict[str, Any]) -> str:
    """A profile's TOML text: tomli-w is imported only by the commands that write a profile."""
    import tomli_w

    return tomli_w.dumps(data)


def update_profile(path: Path, mutate: Callable[[dict[str, Any]], None]) -> LoadedProfile:
    """Read the profile's TOML (or the built-in default when the file does not exist yet), let
    `mutate` change the dict in place, validate, and write it back atomically.

    Every table `mutate` leaves alone is written back with its values unchanged; ${VAR}s are
    never expanded. Comments and formatting are lost (tomli-w writes plain TOML).
    """
    # Locked from read to write: concurrent `servers add/remove` must not lose each other's edit.
    with files.locked(path):
        if path.exists():
            data = raw_profile(path)
            validate(data, str(path), path.read_text(encoding="utf-8"))  # errors name the file's lines
        else:
            data = default_profile_data()
        mutate(data)
        profile = validate(data, str(path))  # never write a file llmc itself could not load
        write_profile(path, toml_text(data))
    return LoadedProfile(name=path.stem, path=path, profile=profile)


def add_server(path: Path, name: str, table: dict[str, Any], *, replace: bool = False) -> LoadedProfile:
    """Put server `name` (its TOML table) into the profile at `path`; a name already there is a
    ConfigError unless `replace`. A profile that does not exist yet starts as the built-in default."""

    def mutate(data: dict[str, Any]) -> None:
        entries = data.setdefault("servers", {})
        if name in entries and not replace:
            raise ConfigError(f"{path}: server {name!r} already exists (use --replace to overwrite it)")
        entries[name] = table

    return update_profile(path, mutate)


def remove_server(path: Path, *names: str) -> LoadedProfile:
    """Take these servers out of the profile at `path`, all or none (a UsageError, with a
    suggestion, for a name that is not there)."""

    def mutate(data: dict[str, Any]) -> None:
        entries = data.get("servers") or {}
        for name in names:
            if name not in entries:
                raise no_server(path.stem, name, entries)
        for name in names:
            del entries[name]

    return update_profile(path, mutate)


def set_server_enabled(path: Path, name: str, enabled: bool) -> bool:
    """Enable or disable server `name` in the profile at `path`; True when that changed anything.
    `enabled = true` is the default, so an enabled server's table says nothing about it."""
    changed = False

    def mutate(data: dict[str, Any]) -> None:
        nonlocal changed
        entries = data.get("servers") or {}
        if name not in entries:
            raise no_server(path.stem, name, entries)
        table = entries[name]
        changed = table.get("enabled", True) != enabled
        if enabled:
            table.pop("enabled", None)
        else:
            table["enabled"] = False

    update_profile(path, mutate)
    return changed


def write_profile(path: Path, text: str) -> None:
    """Replace a profile file atomically. An existing file keeps its mode; a new one is private
    (0600) as profiles may name secrets."""
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = files.PRIVATE_FILE
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
    files.write_atomic(path, text, mode, follow_link=True)


def default_profile_data() -> dict[str, Any]:
    """The built-in default profile as a TOML-ready dict (what `llmc profiles init` writes)."""
    return {
        "description": "Built-in default: the llmc workspace server, read-only, rooted at the current directory.",
        # Read-only through the server's own option (it hides every writing and process tool);
        # servers added later fall under the default policy (destructive tools need a yes).
        "servers": {"workspace": {"builtin": "workspace", "options": {"roots": ["."], "read_only": True}}},
    }


def init_default(force: bool = False) -> Path:
    """Write the built-in default profile to profiles/default.toml; refuse to overwrite unless force."""
    path = profile_path(DEFAULT_PROFILE)
    if path.exists() and not force:
        raise ConfigError(f"{path} already exists (use --force to overwrite it)")
    write_profile(path, toml_text(default_profile_data()))
    return path
