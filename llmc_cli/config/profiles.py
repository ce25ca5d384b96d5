"""Profiles: TOML files that say which servers a person or a job uses, under which policy, with
which LLM. Loading validates against config/schema.py; ${VAR} expands when a server is used.

Writing (update_profile, save_profile) round-trips the parsed TOML: every table llmc did not
change is written back with the same values, ${VAR}s stay unexpanded, and the file is replaced
atomically. tomli-w cannot keep comments, so a profile llmc has edited loses its comments.

Start-up: importing pydantic and building its validator costs ~200 ms, more than the rest of a
command's start-up. So a profile text that validated once is cached (state dir, profile-cache/)
as the validated data in JSON, keyed by the schema's source and the text; a hit rebuilds the
dataclasses without pydantic (schema.from_json).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Callable

from llmc_cli.config import files, paths
from llmc_cli.errors import ConfigError
from llmc_cli.model import OAuthSpec, ServerSpec

DEFAULT_PROFILE = "default"
BUILTIN_NAME = "builtin:default"
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_TOML_LINE = re.compile(r"\(at line (\d+), column \d+\)")
# Names of env variables and headers whose literal values are secrets: masked when shown, never
# copied from an imported file.
_SECRET_NAME = re.compile(r"token|secret|passw|api[-_]?key|apikey|authori[sz]|auth(?!or)|credential|cookie|private|\bpat\b|_pat$",
                          re.IGNORECASE)


@dataclass
class LoadedProfile:
    name: str
    path: Path | None  # None for the built-in default profile
    profile: Any  # config.schema.Profile


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
    """Validate TOML text as a Profile; errors are one line: FILE:LINE: KEY: problem.
    A text that validated before comes from the profile cache, without pydantic."""
    key = _cache_key(text)
    cached = _cache_read(key)
    if cached is not None:
        return cached
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = _TOML_LINE.search(str(exc))
        line = f":{found.group(1)}" if found else ""
        raise ConfigError(f"{where}{line}: invalid TOML: {exc}") from None
    profile = validate(data, where, text)  # raises on errors: they are never cached
    _cache_write(key, profile)
    return profile


@cache
def adapter(cls: type) -> Any:
    """pydantic's validator/serializer for a schema dataclass (imports pydantic: call only when
    validating or dumping)."""
    from pydantic import TypeAdapter

    return TypeAdapter(cls)


def dump(obj: Any, **options: Any) -> dict[str, Any]:
    """A schema dataclass as JSON-ready data (pydantic's model_dump(mode="json", ...))."""
    return adapter(type(obj)).dump_python(obj, mode="json", **options)


def validate(data: dict[str, Any], where: str, text: str | None = None) -> Any:
    """A Profile from parsed TOML; `text` (the file's) lets the error name the line."""
    from pydantic import ValidationError

    from llmc_cli.config.schema import Profile

    try:
        return adapter(Profile).validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = [str(p) for p in first["loc"]]
        # No loc: a check across the whole profile (server names), its message says what.
        key = f"{'.'.join(loc)}: " if loc else ""
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] in ("extra_forbidden", "unexpected_keyword_argument"):  # dataclasses say the latter
            message = "unknown key"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        line = _line_of(text, loc) if text else None
        raise ConfigError(f"{where}{f':{line}' if line else ''}: {key}{message}{more}") from None


# -- the profile cache ------------------------------------------------------------------------
# Entries are JSON: {"key": KEY, "profile": TypeAdapter(Profile).dump_python(mode="json")}, in
# files named KEY.json. The key covers the schema's source, so a changed schema (or builder)
# misses. Anything unreadable or unexpected is a miss: the text is validated again.

_CACHE_VERSION = b"llmc profile cache 1\0"
_CACHE_ENTRIES = 16  # newest kept; one per profile text in use is enough


def _cache_dir() -> Path:
    return paths.state_dir() / "profile-cache"


def _cache_key(text: str) -> str:
    from llmc_cli.config import schema

    digest = hashlib.sha256(_CACHE_VERSION)
    digest.update(Path(schema.__file__).read_bytes())
    digest.update(b"\0")
    digest.update(text.encode("utf-8"))
    return digest.hexdigest()


def _cache_read(key: str) -> Any:
    from llmc_cli.config.schema import from_json

    try:
        entry = json.loads((_cache_dir() / f"{key}.json").read_bytes())
        if entry["key"] != key:
            return None
        return from_json(entry["profile"])
    except Exception:  # missing, unreadable, corrupt or from another schema: validate instead
        return None


def _cache_write(key: str, profile: Any) -> None:
    """Store a validated profile, if it rebuilds equal (JSON loses nothing for it; a TOML date in
    a server's options, say, would come back a string), replacing the file atomically. Failing
    to write is no error: the next load validates again."""
    from llmc_cli.config.schema import from_json

    data = dump(profile)
    try:
        if from_json(json.loads(json.dumps(data))) != profile:
            return
    except Exception:
        return
    try:
        directory = paths.ensure_private_dir(_cache_dir())
        text = json.dumps({"key": key, "profile": data}, ensure_ascii=False, separators=(",", ":"))
        files.write_atomic(directory / f"{key}.json", text, durable=False)
        # Bounded: a profile edit leaves its old entry behind; keep only the newest few.
        entries = sorted(directory.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in entries[_CACHE_ENTRIES:]:
            old.unlink(missing_ok=True)
    except (OSError, ConfigError):
        pass


def _line_of(text: str, loc: list[str]) -> int | None:
    """The line of the failing key, when the text says so unambiguously (TOML parsers do not
    keep positions): its `key =` line, or its `[table]` header; None when unsure."""
    if not loc:
        return None
    lines = text.splitlines()
    key = re.escape(loc[-1])
    assignment = re.compile(rf"^\s*[\"']?{key}[\"']?\s*=")
    hits = [n for n, line in enumerate(lines, 1) if assignment.match(line)]
    if len(hits) != 1:
        header = re.compile(rf"^\s*\[+\s*{re.escape('.'.join(loc))}\s*\]+")
        hits = [n for n, line in enumerate(lines, 1) if header.match(line)]
    return hits[0] if len(hits) == 1 else None


def builtin_default() -> LoadedProfile:
    """With no profile at all: the built-in workspace server, rooted at the current directory,
    read-only. `llmc profiles init` writes this out so it can be edited."""
    from llmc_cli.config.schema import Profile, ServerConfig

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


def usable_specs(loaded: LoadedProfile, only: tuple[str, ...] | list[str] = ()
                 ) -> tuple[list[ServerSpec], dict[str, ConfigError]]:
    """The enabled servers of a profile (or just `only`), with ${VAR}s expanded now, and apart
    the ones that cannot be configured (an unset variable): one server's problem is that
    server's, so the others still work. An unknown name in `only` is the command's error."""
    servers = loaded.profile.servers
    unknown = [name for name in only if name not in servers]
    if unknown:
        known = ", ".join(sorted(servers)) or "none"
        raise ConfigError(f"profile {loaded.name} has no server {unknown[0]!r} (servers: {known})")
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
            timeout=server.timeout, description=server.description,
        )
    if server.url:
        return ServerSpec(
            name=name, url=expand(server.url, where),
            headers={k: expand(v, f"{where}, header {k}") for k, v in server.headers.items()},
            transport=server.transport, timeout=server.timeout, description=server.description,
            oauth=_oauth_spec(server.oauth),
        )
    return ServerSpec(name=name, builtin=server.builtin, options=dict(server.options),
                      timeout=server.timeout, description=server.description)


def _oauth_spec(oauth: Any) -> OAuthSpec | None:
    if oauth is None:
        return None
    return OAuthSpec(client_id=oauth.client_id, client_secret_env=oauth.client_secret_env,
                     client_metadata_url=oauth.client_metadata_url, scopes=tuple(oauth.scopes),
                     grant=oauth.grant, token_auth_method=oauth.token_auth_method)


def is_secret_name(name: str) -> bool:
    """Does an env variable or header with this name usually hold a secret?"""
    return bool(_SECRET_NAME.search(name))


def has_placeholder(value: str) -> bool:
    """Does the value contain a ${VAR} (expanded from the environment when used)?"""
    return bool(_VAR.search(value))


def mask_secrets(table: dict[str, Any]) -> dict[str, Any]:
    """A server table fit to print: literal values of secret-looking env/header names masked
    (${VAR} placeholders are not secrets and stay visible)."""
    out = dict(table)
    for field in ("env", "headers"):
        if isinstance(out.get(field), dict):
            out[field] = {k: "***" if is_secret_name(k) and isinstance(v, str) and not has_placeholder(v) else v
                          for k, v in out[field].items()}
    return out


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
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = _TOML_LINE.search(str(exc))
        raise ConfigError(f"{path}{':' + found.group(1) if found else ''}: invalid TOML: {exc}") from None


def update_profile(path: Path, mutate: Callable[[dict[str, Any]], None]) -> LoadedProfile:
    """Read the profile's TOML (or the built-in default when the file does not exist yet), let
    `mutate` change the dict in place, validate, and write it back atomically.

    Every table `mutate` leaves alone is written back with its values unchanged; ${VAR}s are
    never expanded. Comments and formatting are lost (tomli-w writes plain TOML).
    """
    import tomli_w

    # Locked from read to write: concurrent `servers add/remove` must not lose each other's edit.
    with files.locked(path):
        if path.exists():
            data = raw_profile(path)
            validate(data, str(path), path.read_text(encoding="utf-8"))  # errors name the file's lines
        else:
            data = default_profile_data()
        mutate(data)
        profile = validate(data, str(path))  # never write a file llmc itself could not load
        write_profile(path, tomli_w.dumps(data))
    return LoadedProfile(name=path.stem, path=path, profile=profile)


def save_profile(loaded: LoadedProfile, profile: Any) -> LoadedProfile:
    """Write `profile`'s servers table to `loaded.path`, keeping every other table of the file
    as it is on disk (a new file gets the whole profile). Comments are lost (tomli-w)."""
    if loaded.path is None:
        raise ConfigError("the built-in default profile has no file: run `llmc profiles init` first")
    servers = {name: server_table(server) for name, server in profile.servers.items()}
    if not loaded.path.exists():
        whole = dump(profile, exclude_defaults=True, exclude_none=True)
        whole["servers"] = servers
        return update_profile(loaded.path, lambda data: (data.clear(), data.update(whole)))
    return update_profile(loaded.path, lambda data: data.__setitem__("servers", servers))


def write_profile(path: Path, text: str) -> None:
    """Replace a profile file atomically. An existing file keeps its mode; a new one is private
    (0600) as profiles may name secrets."""
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = files.PRIVATE_FILE
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
    files.write_atomic(path, text, mode)


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
    import tomli_w

    write_profile(path, tomli_w.dumps(default_profile_data()))
    return path


def editable_path(name_or_path: str | None) -> Path:
    """The file `servers add/remove/import` edit: the chosen profile, else `default`."""
    return profile_path(name_or_path or DEFAULT_PROFILE)


def list_profiles() -> list[dict[str, Any]]:
    """Every profiles/*.toml under the config directory: name, path, description, servers, or
    the one-line error that stops it loading (one broken file does not hide the others)."""
    rows = []
    directory = paths.profiles_dir()
    for path in sorted(directory.glob("*.toml")) if directory.is_dir() else []:
        row: dict[str, Any] = {"name": path.stem, "path": str(path)}
        try:
            loaded = load_profile(str(path))
        except ConfigError as exc:
            row["error"] = exc.message
        else:
            row["description"] = loaded.profile.description
            row["servers"] = list(loaded.profile.servers)
        rows.append(row)
    return rows
