"""Profiles: TOML files that say which servers a person or a job uses, under which policy, with
which LLM. Loading them, and the servers they name as ServerSpecs with ${VAR}s expanded.

The other parts of profile handling: validation.py (data -> dataclasses, errors as one line
naming file, line and key), profile_cache.py (validated texts, so a load needs no pydantic),
profile_writer.py (edits that keep what they do not change), secrets.py (which values to mask).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmc_cli import config
from llmc_cli.config import paths
from llmc_cli.config.schema import Profile, ServerConfig
from llmc_cli.errors import ConfigError, UsageError, did_you_mean
from llmc_cli.model import OAuthSpec, SandboxSpec, ServerSpec, dataclass

if TYPE_CHECKING:
    from llmc_cli.config.schema import Profile  # a type only: the schema is imported where profiles are built

DEFAULT_PROFILE = "default"
BUILTIN_NAME = "builtin:default"
_VAR = r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}"  # compiled (and cached) by re at first use


@dataclass
class LoadedProfile:
    name: str
    path: Path | None  # None for the built-in default profile
    profile: Profile


def lock_path(profile: LoadedProfile) -> str:
    """The profile's lock file; a relative path is relative to the profile file that names it."""

    path = Path(profile.profile.lock or "").expanduser()
    return str(path if path.is_absolute() or profile.path is None else profile.path.parent / path)


def expand(value: str, where: str) -> str:
    """Expand ${VAR} and ${VAR:-default} from the environment; a missing variable is an error."""

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        raise ConfigError(f"{where}: environment variable {name} is not set")

    return re.sub(_VAR, substitute, value)


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
        known = sorted(p.stem for p in paths.profiles_dir().glob("*.toml")) if path.parent == paths.profiles_dir() else []
        raise ConfigError(f"profile not found: {path}{did_you_mean(path.stem, known)}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read profile {path}: {getattr(exc, 'strerror', None) or exc}") from None
    # (the cache and validation load with a profile's file: config/__init__.py; none for the built-in)
    return LoadedProfile(name=path.stem, path=path, profile=config.parse_profile(text, str(path)))


def builtin_default() -> LoadedProfile:
    """With no profile at all: the built-in workspace server, rooted at the current directory,
    read-only. `llmc profiles init` writes this out so it can be edited."""

    # Trusted data, built directly: no pydantic.
    workspace = ServerConfig(builtin="workspace", options={"roots": ["."], "read_only": True})
    profile = Profile(
        description="Built-in default: the llmc workspace server, read-only, rooted at the current directory.",
        servers={"workspace": workspace},
    )
    return LoadedProfile(name=BUILTIN_NAME, path=None, profile=profile)


def server_specs(loaded: LoadedProfile, only: tuple[str, ...] | list[str] = ()) -> list[ServerSpec]:
    """The enabled servers of a profile (or just `only`), with ${VAR}s expanded now; the first
    that cannot be configured is a ConfigError (for commands about these very servers)."""
    specs, unusable = usable_specs(loaded, only)
    if unusable:
        raise next(iter(unusable.values()))
    return specs


def no_server(profile: str, name: str, known: Iterable[str]) -> UsageError:
    """A server name the profile does not have is a usage error (exit 2), as a misspelt command
    is: a suggestion when one is close, else the names it has."""
    known = sorted(known)
    hint = did_you_mean(name, known)
    return UsageError(f"profile {profile} has no server {name!r}" + (hint or f" (servers: {', '.join(known) or 'none'})"))


def usable_specs(
    loaded: LoadedProfile, only: tuple[str, ...] | list[str] = ()
) -> tuple[list[ServerSpec], dict[str, ConfigError]]:
    """The enabled servers of a profile (or just `only`), with ${VAR}s expanded now, and apart
    the ones that cannot be configured (an unset variable): one server's problem is that
    server's, so the others still work. An unknown name in `only` is the command's error."""
    servers = loaded.profile.servers
    unknown = [name for name in only if name not in servers]
    if unknown:
        raise no_server(loaded.name, unknown[0], servers)
    names = list(only) if only else [n for n, s in servers.items() if s.enabled]
    specs: list[ServerSpec] = []
    unusable: dict[str, ConfigError] = {}
    for name in names:
        try:
            specs.append(to_spec(name, servers[name], loaded.name))
        except ConfigError as exc:
            unusable[name] = exc
    return specs, unusable


def to_spec(name: str, server: Any, profile_name: str) -> ServerSpec:
    where = f"profile {profile_name}, server {name}"
    if server.command:
        return ServerSpec(
            name=name,
            command=(expand(server.command, where), *(expand(a, where) for a in server.args)),
            env={k: expand(v, f"{where}, env {k}") for k, v in server.env.items()},
            cwd=expand(server.cwd, where) if server.cwd else None,
            timeout=server.timeout,
            connect_timeout=server.connect_timeout,
            description=server.description,
            sandbox=_sandbox_spec(server, where),
        )
    if server.url:
        return ServerSpec(
            name=name,
            url=expand(server.url, where),
            headers={k: expand(v, f"{where}, header {k}") for k, v in server.headers.items()},
            transport=server.transport,
            timeout=server.timeout,
            connect_timeout=server.connect_timeout,
            description=server.description,
            oauth=_oauth_spec(server.oauth),
        )
    return ServerSpec(
        name=name,
        builtin=server.builtin,
        options=dict(server.options),
        timeout=server.timeout,
        connect_timeout=server.connect_timeout,
        description=server.description,
    )


# Not declarable as read_paths or write_paths (as resolved: a link to them counts): other
# processes' command lines and environments, devices, the kernel's and the system's run-time state
# (sockets such as the container runtime's). A sandbox has its own /proc, /dev and /tmp.
KERNEL_TREES = ("/proc", "/sys", "/dev", "/run", "/var/run")


def _sandbox_spec(server: Any, where: str) -> SandboxSpec | None:
    """The profile's confinement of a stdio server, its paths expanded and absolute; None when
    the profile does not say (the server runs as it always did)."""
    if server.sandbox is None:
        return None

    def absolute(paths: list[str], key: str) -> tuple[str, ...]:
        out = []
        for raw in paths:
            path = os.path.normpath(os.path.expanduser(expand(raw, f"{where}, {key}")))
            if os.path.isabs(path):
                path = os.path.realpath(path)  # bound as the kernel names it: llmc's files are covered by real name
            if not os.path.isabs(path) or path in ("/", os.path.realpath(os.path.expanduser("~"))):
                raise ConfigError(f"{where}: {key}: {raw!r} must be an absolute path below / and the home directory")
            kernel = next((k for k in KERNEL_TREES if path == k or path.startswith(k + "/")), None)
            if kernel is not None:
                raise ConfigError(
                    f"{where}: {key}: {raw!r} is {'under ' if path != kernel else ''}{kernel}, which would show the "
                    "server other processes, devices or the kernel's state: name the files it needs elsewhere"
                )
            out.append(path)
        return tuple(dict.fromkeys(out))

    return SandboxSpec(
        mode=server.sandbox,
        network=bool(server.network),
        read_paths=absolute(server.read_paths, "read_paths"),
        write_paths=absolute(server.write_paths, "write_paths"),
    )


def _oauth_spec(oauth: Any) -> OAuthSpec | None:
    if oauth is None:
        return None
    return OAuthSpec(
        client_id=oauth.client_id,
        client_secret_env=oauth.client_secret_env,
        client_metadata_url=oauth.client_metadata_url,
        scopes=tuple(oauth.scopes),
        grant=oauth.grant,
        token_auth_method=oauth.token_auth_method,
    )


def has_placeholder(value: str) -> bool:
    """Does the value contain a ${VAR} (expanded from the environment when used)?"""
    return bool(re.search(_VAR, value))


def editable_path(name_or_path: str | None) -> Path:
    """The file `servers add/remove/import` edit: the chosen profile, else `default`."""
    return profile_path(name_or_path or DEFAULT_PROFILE)


def list_profiles() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every profiles/*.toml under the config directory: (rows of name, path, description,
    servers; errors: a file that does not load, with its one-line reason). One broken file does
    not hide the others."""
    rows, errors = [], []
    directory = paths.profiles_dir()
    for path in sorted(directory.glob("*.toml")) if directory.is_dir() else []:
        try:
            loaded = load_profile(str(path))
        except ConfigError as exc:
            errors.append({"profile": path.stem, "path": str(path), **exc.to_json()})
        else:
            rows.append(
                {
                    "name": path.stem,
                    "path": str(path),
                    "description": loaded.profile.description,
                    "servers": list(loaded.profile.servers),
                }
            )
    return rows, errors
