"""Profiles: TOML files that say which servers a person or a job uses, under which policy, with
which LLM. Loading validates against config/schema.py; ${VAR} expands when a server is used."""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmc_cli.config import paths
from llmc_cli.errors import ConfigError
from llmc_cli.model import ServerSpec

DEFAULT_PROFILE = "default"
BUILTIN_NAME = "builtin:default"
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass
class LoadedProfile:
    name: str
    path: Path | None  # None for the built-in default profile
    profile: Any  # config.schema.Profile (pydantic is imported only when a profile loads)


def expand(value: str, where: str) -> str:
    """Expand ${VAR} and ${VAR:-default} from the environment; a missing variable is an error."""

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        raise ConfigError(f"{where}: environment variable {name} is not set")

    return _VAR.sub(substitute, value)


def profile_path(name_or_path: str) -> Path:
    """A name means profiles/NAME.toml under the config directory; anything with a slash or
    ending in .toml is a path."""
    if "/" in name_or_path or name_or_path.endswith(".toml"):
        return Path(name_or_path).expanduser()
    return paths.profiles_dir() / f"{name_or_path}.toml"


def load_profile(name_or_path: str | None) -> LoadedProfile:
    if name_or_path is None:
        default = profile_path(DEFAULT_PROFILE)
        if not default.exists():
            return builtin_default()
        name_or_path = DEFAULT_PROFILE
    path = profile_path(name_or_path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"profile not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read profile {path}: {getattr(exc, 'strerror', None) or exc}") from None
    return LoadedProfile(name=path.stem, path=path, profile=parse_profile(text, str(path)))


def parse_profile(text: str, where: str) -> Any:
    from pydantic import ValidationError

    from llmc_cli.config.schema import Profile

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: invalid TOML: {exc}") from None
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"]) or "(top level)"
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = "unknown key"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ConfigError(f"{where}: {key}: {message}{more}") from None


def builtin_default() -> LoadedProfile:
    """With no profile at all: the built-in workspace server, rooted at the current directory,
    read-only. `llmc profiles init` writes this out so it can be edited."""
    from llmc_cli.config.schema import Profile

    profile = Profile.model_validate({
        "description": "Built-in default: the llmc workspace server, read-only, rooted at the current directory.",
        "servers": {"workspace": {"builtin": "workspace", "options": {"roots": ["."], "read_only": True}}},
        "policy": {"read_only": True},
    })
    return LoadedProfile(name=BUILTIN_NAME, path=None, profile=profile)


def server_specs(loaded: LoadedProfile, only: tuple[str, ...] | list[str] = ()) -> list[ServerSpec]:
    """The enabled servers of a profile (or just `only`), with ${VAR}s expanded now."""
    servers = loaded.profile.servers
    unknown = [name for name in only if name not in servers]
    if unknown:
        known = ", ".join(sorted(servers)) or "none"
        raise ConfigError(f"profile {loaded.name} has no server {unknown[0]!r} (servers: {known})")
    names = list(only) if only else [n for n, s in servers.items() if s.enabled]
    return [to_spec(name, servers[name], loaded.name) for name in names]


def to_spec(name: str, server: Any, profile_name: str) -> ServerSpec:
    where = f"profile {profile_name}, server {name}"
    if server.command:
        return ServerSpec(
            name=name,
            command=(expand(server.command, where), *(expand(a, where) for a in server.args)),
            env={k: expand(v, f"{where}, env {k}") for k, v in server.env.items()},
            cwd=expand(server.cwd, where) if server.cwd else None,
            timeout=server.timeout, description=server.description,
        )
    if server.url:
        return ServerSpec(
            name=name, url=expand(server.url, where),
            headers={k: expand(v, f"{where}, header {k}") for k, v in server.headers.items()},
            transport=server.transport, timeout=server.timeout, description=server.description,
        )
    return ServerSpec(name=name, builtin=server.builtin, options=dict(server.options),
                      timeout=server.timeout, description=server.description)
