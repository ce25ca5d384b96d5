"""Dynamic shell completion (click's shell_complete callbacks). These run on every <TAB>, so they
stay cheap: profile and server names come from the files, tool names only from the cache that
`llmc tools list` leaves behind; no server is ever started to complete a word."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from click.shell_completion import CompletionItem

from llmc_cli.config import files, paths
from llmc_cli.errors import ConfigError


def complete_profiles(ctx: Any, param: Any, incomplete: str) -> list[CompletionItem]:
    if "/" in incomplete:
        return [CompletionItem(incomplete, type="file")]
    directory = paths.profiles_dir()
    names = sorted(p.stem for p in directory.glob("*.toml")) if directory.is_dir() else []
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


def complete_servers(ctx: Any, param: Any, incomplete: str) -> list[CompletionItem]:
    servers = _profile_data(ctx).get("servers")
    names = sorted(servers) if isinstance(servers, dict) else []
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


def complete_tools(ctx: Any, param: Any, incomplete: str) -> list[CompletionItem]:
    names = _read_cache().get(_profile_key(ctx), [])
    return [CompletionItem(n) for n in names if isinstance(n, str) and n.startswith(incomplete)]


def remember_tools(profile_key: str, qualified_names: list[str], servers: list[str]) -> None:
    """Record the tool names just listed from `servers` of a profile (other servers' names stay).
    A cache: failures to write it are ignored."""
    cache = _read_cache()
    kept = [n for n in cache.get(profile_key, []) if isinstance(n, str) and n.split(".", 1)[0] not in servers]
    cache[profile_key] = sorted(set(kept) | set(qualified_names))
    try:
        files.write_atomic(_cache_path(), json.dumps(cache), durable=False)
    except ConfigError:
        pass


def known_tools(profile_key: str) -> dict[str, list[str]]:
    """The cached tool names of a profile, per server (servers never listed are absent)."""
    known: dict[str, list[str]] = {}
    for qualified in _read_cache().get(profile_key, []):
        if isinstance(qualified, str) and "." in qualified:
            server, _, tool = qualified.partition(".")
            known.setdefault(server, []).append(tool)
    return known


def profile_key(name_or_path: str | None) -> str:
    """The cache key of a profile: its file, or the built-in default."""
    path = _profile_file(name_or_path)
    return str(path.resolve()) if path.exists() else "builtin:default"


def _profile_key(ctx: Any) -> str:
    return profile_key(ctx.find_root().params.get("profile"))


def _profile_file(name_or_path: str | None) -> Path:
    name = name_or_path or os.environ.get("LLMC_PROFILE") or "default"
    if "/" in name or name.endswith(".toml"):
        return Path(name).expanduser()
    return paths.profiles_dir() / f"{name}.toml"


def _profile_data(ctx: Any) -> dict[str, Any]:
    import tomllib  # only when the shell asks

    try:
        return tomllib.loads(_profile_file(ctx.find_root().params.get("profile")).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _cache_path() -> Path:
    return paths.state_dir() / "completion-tools.json"


def _read_cache() -> dict[str, Any]:
    try:
        data = json.loads(_cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}
