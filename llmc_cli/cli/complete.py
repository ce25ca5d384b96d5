"""Dynamic shell completion (click's shell_complete callbacks). These run on every <TAB>, so they
stay cheap: profile and server names come from the files, tool names only from the cache that
`llmc tools list` and the commands resolving bare tool names leave behind (services/tools.py); no
server is ever started to complete a word."""

from __future__ import annotations

import tomllib
from typing import Any

import click
from click.shell_completion import CompletionItem

from llmc_cli.config import paths
from llmc_cli.keeper import lifecycle
from llmc_cli.services.tools import cached_names, profile_file, profile_key


def complete_profiles(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    if "/" in incomplete:
        return [CompletionItem(incomplete, type="file")]
    directory = paths.profiles_dir()
    names = sorted(p.stem for p in directory.glob("*.toml")) if directory.is_dir() else []
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


def complete_servers(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    servers = _profile_data(ctx).get("servers")
    names = sorted(servers) if isinstance(servers, dict) else []
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


def complete_tools(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:

    names = cached_names(profile_key(_profile(ctx)))
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


def complete_sessions(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    try:
        return [CompletionItem(n) for n in lifecycle.names() if n.startswith(incomplete)]
    except Exception:  # noqa: BLE001 - completion must never break the shell
        return []


def _profile(ctx: click.Context) -> str | None:
    profile: str | None = ctx.find_root().params.get("profile")
    return profile


def _profile_data(ctx: click.Context) -> dict[str, Any]:

    try:
        return tomllib.loads(profile_file(_profile(ctx)).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
