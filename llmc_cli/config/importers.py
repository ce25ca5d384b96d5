"""Read the MCP server configs people already have and turn them into profile server tables.

Formats (each read from its documented shape):
- `mcpServers` object: Claude Desktop (command/args/env), Claude Code `.mcp.json` (plus
  type stdio|http|sse, url, headers), Cursor (url, headers), Windsurf (serverUrl), Gemini CLI
  (httpUrl); a `disabled: true` entry is imported disabled.
- `servers` object of VS Code's `mcp.json` (type stdio|http|sse), or the `mcp.servers` object of
  its settings.json. Both are JSON with comments; `inputs` and `${input:ID}` become `${ID}`
  environment placeholders, reported to the caller.

Nothing secret is copied: `${env:VAR}` becomes `${VAR}`, and a literal value of a secret-looking
env variable or header becomes a `${VAR}` placeholder the user must set (reported as such).
"""

from __future__ import annotations

import re
from dataclasses import field
from pathlib import Path
from typing import Any

from llmc_cli import jsonish
from llmc_cli.config.profiles import has_placeholder
from llmc_cli.config.secrets import is_secret_name
from llmc_cli.errors import ConfigError
from llmc_cli.model import dataclass, parse_json

_INPUT = re.compile(r"\$\{input:([^}]+)\}")
_ENV = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
_EDITOR_VARS = {"userHome": "${HOME}", "workspaceFolder": "${PWD}"}  # VS Code/Cursor variables
_SCHEME = re.compile(r"^(Bearer|Basic|Token)\s+(\S.*)$", re.IGNORECASE)
_STDIO_KEYS = {"type", "command", "args", "env", "cwd", "disabled", "description"}
_REMOTE_KEYS = {"type", "url", "serverUrl", "httpUrl", "headers", "disabled", "description"}
_TRANSPORTS = {"http": "http", "streamable-http": "http", "streamableHttp": "http", "sse": "sse"}


@dataclass
class Imported:
    source: str  # "mcpServers" or "vscode"
    servers: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> TOML server table
    placeholders: list[dict[str, str]] = field(default_factory=list)  # {"server", "variable", "reason"}
    notes: list[str] = field(default_factory=list)  # things not imported, renamed names


def env_name(text: str) -> str:
    """An environment variable name made from an id: upper-case, [A-Z0-9_], not starting with a digit."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", text).upper().strip("_") or "VALUE"
    return f"_{name}" if name[0].isdigit() else name


def read_json_object(path: Path) -> tuple[dict[str, Any], bool]:
    """An MCP host's JSON config file (comments and trailing commas allowed, as VS Code writes
    them) as an object, and whether it had any (rewriting the file would lose them). An empty
    file is an empty object. ConfigError naming the file for anything else."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    if not text.strip():
        return {}, False
    plain = strip_jsonc(text)
    try:
        data = parse_json(plain, max_depth=None)
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return data, plain != text


def read_config(path: Path) -> Imported:
    data, _ = read_json_object(path)
    if isinstance(data.get("mcpServers"), dict):
        return convert(data["mcpServers"], "mcpServers", {}, str(path))
    vscode = data if isinstance(data.get("servers"), dict) else data.get("mcp")
    if isinstance(vscode, dict) and isinstance(vscode.get("servers"), dict):
        inputs = {str(i.get("id")): i for i in vscode.get("inputs") or [] if isinstance(i, dict)}
        return convert(vscode["servers"], "vscode", inputs, str(path))
    raise ConfigError(f"{path}: no 'mcpServers' or 'servers' object (Claude, Cursor, Windsurf, VS Code)")


def convert(entries: dict[str, Any], source: str, inputs: dict[str, Any], where: str) -> Imported:
    out = Imported(source=source)
    for original, entry in entries.items():
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: server {original!r}: expected an object")
        name = re.sub(r"[^A-Za-z0-9_-]+", "-", original.strip()).strip("-") or "server"
        if name != original:
            out.notes.append(f"server {original!r} imported as {name!r} (names may not contain '.', '/' or spaces)")
        if name in out.servers:
            raise ConfigError(f"{where}: two servers become {name!r}; rename one first")
        out.servers[name] = _server(name, entry, inputs, out, where)
    return out


def _server(name: str, entry: dict[str, Any], inputs: dict[str, Any], out: Imported, where: str) -> dict[str, Any]:
    kind = str(entry.get("type") or "")
    url = entry.get("url") or entry.get("serverUrl") or entry.get("httpUrl")
    table: dict[str, Any] = {}
    if entry.get("command"):
        known = _STDIO_KEYS
        table["command"] = _text(entry["command"], name, "command", inputs, out)
        args = entry.get("args") or []
        if not isinstance(args, list):
            raise ConfigError(f"{where}: server {name!r}: 'args' must be a list")
        if args:
            table["args"] = [_text(str(a), name, "args", inputs, out) for a in args]
        if entry.get("env"):
            table["env"] = _secrets(_mapping(entry["env"], name, "env", where), name, "env", inputs, out)
        if entry.get("cwd"):
            table["cwd"] = _text(str(entry["cwd"]), name, "cwd", inputs, out)
    elif url:
        known = _REMOTE_KEYS
        table["url"] = _text(str(url), name, "url", inputs, out)
        transport = "http" if "httpUrl" in entry else _TRANSPORTS.get(kind, "auto")
        if transport != "auto":
            table["transport"] = transport
        if entry.get("headers"):
            table["headers"] = _secrets(_mapping(entry["headers"], name, "headers", where), name, "headers", inputs, out)
    else:
        raise ConfigError(f"{where}: server {name!r} has neither 'command' nor 'url'")
    if entry.get("disabled") is True:
        table["enabled"] = False
    if isinstance(entry.get("description"), str):
        table["description"] = entry["description"]
    ignored = sorted(set(entry) - known)
    if ignored:
        out.notes.append(f"server {name!r}: not imported: {', '.join(ignored)}")
    return table


def _mapping(value: object, name: str, key: str, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: server {name!r}: {key!r} must be an object")
    return {str(k): str(v) for k, v in value.items()}


def _text(value: str, server: str, key: str, inputs: dict[str, Any], out: Imported) -> str:
    """Rewrite editor variables into llmc's ${VAR} placeholders, reporting each one."""

    def from_input(match: re.Match[str]) -> str:
        input_id = match.group(1)
        variable = env_name(input_id)
        described = (inputs.get(input_id) or {}).get("description")
        reason = f"VS Code input {input_id!r}" + (f" ({described})" if described else "")
        _placeholder(out, server, variable, reason)
        return "${" + variable + "}"

    def editor_var(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in _EDITOR_VARS:
            out.notes.append(f"server {server!r}: {key}: ${{{name}}} became {_EDITOR_VARS[name]}")
            return _EDITOR_VARS[name]
        return match.group(0)

    value = _INPUT.sub(from_input, value)
    value = _ENV.sub(lambda m: "${" + m.group(1) + "}", value)
    return re.sub(r"\$\{([A-Za-z]+)\}", editor_var, value)


def _secrets(values: dict[str, str], server: str, key: str, inputs: dict[str, Any], out: Imported) -> dict[str, str]:
    """Literal secrets stay in the source file: the profile gets a ${VAR} to set instead."""
    result = {}
    for name, value in values.items():
        value = _text(value, server, key, inputs, out)
        if is_secret_name(name) and value and not has_placeholder(value):
            variable = env_name(name if key == "env" else f"{server}_{name}")
            scheme = _SCHEME.match(value) if key == "headers" else None
            value = f"{scheme.group(1)} ${{{variable}}}" if scheme else f"${{{variable}}}"
            _placeholder(out, server, variable, f"literal secret in {key} {name} not copied")
        result[name] = value
    return result


def _placeholder(out: Imported, server: str, variable: str, reason: str) -> None:
    item = {"server": server, "variable": variable, "reason": reason}
    if item not in out.placeholders:
        out.placeholders.append(item)


def strip_jsonc(text: str) -> str:
    """JSON with comments (VS Code's mcp.json and settings.json): drop // and /* */ comments and
    trailing commas outside strings."""
    toks = jsonish.tokens(text, comments=True)
    return "".join(
        token.text for i, token in enumerate(toks) if token.kind != "comment" and not jsonish.is_trailing_comma(toks, i)
    )
