"""Write the gateway into an MCP host's own config file (`llmc servers install --client C -p P`):
one entry that runs `llmc serve -p PROFILE` on stdio, so the host reaches its servers only
through the profile's policy and audit trail.

The rest of the host's file is kept as it was read (key order included); a file with comments
(JSON with comments) is not rewritten, because comments would be lost: the entry is shown for
the user to paste instead.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmc_cli.config import paths
from llmc_cli.config.files import write_atomic
from llmc_cli.config.importers import read_json_object
from llmc_cli.errors import ConfigError, UsageError
from llmc_cli.model import JSONObject


@dataclass(frozen=True)
class HostFormat:
    key: str  # the object that holds the servers
    typed: bool  # entries carry "type": "stdio"


FORMATS = {
    "mcpServers": HostFormat("mcpServers", False),
    "vscode": HostFormat("servers", True),
    "claude-code": HostFormat("mcpServers", True),
}


def _claude_desktop() -> Path:
    home = Path.home()
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA", home)) / "Claude" / "claude_desktop_config.json"
    return Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "Claude" / "claude_desktop_config.json"


# client -> (where its config lives by default, its format)
CLIENTS: dict[str, tuple[Any, str]] = {
    "claude-desktop": (_claude_desktop, "mcpServers"),
    "cursor": (lambda: Path.home() / ".cursor" / "mcp.json", "mcpServers"),
    "windsurf": (lambda: Path.home() / ".codeium" / "windsurf" / "mcp_config.json", "mcpServers"),
    "vscode": (lambda: Path.cwd() / ".vscode" / "mcp.json", "vscode"),  # this workspace's
    "claude-code": (lambda: Path.cwd() / ".mcp.json", "claude-code"),  # this project's
}


def llmc_command() -> str:
    """The llmc the host should start: this installation's, by absolute path (hosts do not
    start from the user's shell, so PATH may not find it)."""
    beside = Path(sys.executable).parent / "llmc"
    found = str(beside) if beside.exists() else shutil.which("llmc")
    if not found:
        raise ConfigError("cannot find the llmc executable to put into the host's config")
    return str(Path(found).absolute())


def gateway_entry(profile_ref: str, fmt: HostFormat) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "stdio"} if fmt.typed else {}
    entry.update(command=llmc_command(), args=["serve", "-p", profile_ref])
    # The host must find the same profiles and write the same audit trail as this shell.
    env = {k: str(Path(v).absolute()) for k in ("LLMC_CONFIG_DIR", "LLMC_STATE_DIR") if (v := os.environ.get(k))}
    if env:
        entry["env"] = env
    return entry


def profile_reference(name_or_path: str, loaded_path: Path | None) -> str:
    """How the entry names the profile: by name when it lives in llmc's profiles directory,
    else by absolute path (the host's working directory is not ours)."""
    if loaded_path is not None and loaded_path.parent.resolve() == paths.profiles_dir().resolve():
        return loaded_path.stem
    if loaded_path is None:
        return name_or_path
    return str(loaded_path.absolute())


@dataclass
class Plan:
    client: str
    config: Path
    name: str
    entry: dict[str, Any]
    action: str  # add | replace | unchanged
    data: dict[str, Any]  # the whole file after the change

    def to_json(self, dry_run: bool) -> JSONObject:
        return {
            "client": self.client,
            "config": str(self.config),
            "name": self.name,
            "entry": self.entry,
            "action": self.action,
            "dryRun": dry_run,
        }


def plan(client: str, config: Path | None, name: str, profile_ref: str, replace: bool) -> Plan:
    if client not in CLIENTS:
        raise UsageError(f"unknown client {client!r} (clients: {', '.join(CLIENTS)})")
    default_path, format_name = CLIENTS[client]
    fmt = FORMATS[format_name]
    path = Path(config).expanduser() if config else default_path()
    data: dict[str, Any] = {}
    if path.exists():
        data, commented = read_json_object(path)
        if commented:
            raise ConfigError(
                f"{path} has comments, which rewriting it would lose: add this entry under "
                f'"{fmt.key}" by hand: "{name}": ' + json.dumps(gateway_entry(profile_ref, fmt))
            )
    servers = data.setdefault(fmt.key, {})
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: '{fmt.key}' is not an object")
    entry = gateway_entry(profile_ref, fmt)
    if name not in servers:
        action = "add"
    elif servers[name] == entry:
        action = "unchanged"
    elif replace:
        action = "replace"
    else:
        raise UsageError(
            f"{path} already has a server named {name!r}: pass --replace to overwrite it, or --name to choose another"
        )
    servers[name] = entry
    return Plan(client, path, name, entry, action, data)


def apply(planned: Plan) -> None:

    if planned.action == "unchanged":
        return
    mode = planned.config.stat().st_mode & 0o777 if planned.config.exists() else None
    write_atomic(planned.config, json.dumps(planned.data, indent=2, ensure_ascii=False) + "\n", mode)
