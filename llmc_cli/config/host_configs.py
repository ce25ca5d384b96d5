"""Write the gateway into an MCP host's own config file (`llmc servers install --client C -p P`):
one entry that runs `llmc serve -p PROFILE` on stdio (or, with --url, reaches a running HTTP
gateway), so the host reaches its servers only through the profile's policy and audit trail.

Every host here hands tool names straight to a model provider (Anthropic, OpenAI, Gemini), which
refuses `sdk.add`: the entry asks the gateway for provider-safe names (`--name-separator __`;
HOST_NEEDS). Claude Desktop's config has no remote entries and no ${VAR} of its own: it reaches
an HTTP gateway through mcp-remote with a static `--header Authorization:${VAR}`, the value in the
entry's env; the others name the gateway's URL themselves and read the token from the environment
they start with.

The rest of the host's file is kept as it was read (key order included); a file with comments
(JSON with comments) is not rewritten, because comments would be lost: the entry is shown for
the user to paste instead.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from llmc_cli.config import paths
from llmc_cli.config.files import write_atomic
from llmc_cli.config.importers import read_json_object
from llmc_cli.errors import ConfigError, UsageError
from llmc_cli.model import JSONObject, dataclass


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


# client -> the name_separator it needs (every one sends tool names to a model provider; a host
# that cleans names itself does it lossily, the gateway's map is exact and collision-checked)
HOST_NEEDS = {"claude-desktop": "__", "cursor": "__", "windsurf": "__", "vscode": "__", "claude-code": "__"}
# client -> how its config reads an environment variable in a value (None: it cannot)
ENV_REFERENCE = {
    "claude-desktop": None,
    "cursor": "${env:%s}",
    "windsurf": "${env:%s}",
    "vscode": "${env:%s}",
    "claude-code": "${%s}",
}
MCP_REMOTE = "mcp-remote@0.15"  # the stdio bridge Claude Desktop needs for an HTTP server (tried: 0.15.1)
HEADER_VARIABLE = "AUTH_HEADER"  # the entry's env variable mcp-remote's --header reads

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
    found = str(beside) if beside.exists() else paths.which("llmc")
    if not found:
        raise ConfigError("cannot find the llmc executable to put into the host's config")
    return str(Path(found).absolute())


@dataclass(frozen=True)
class Remote:
    """A running HTTP gateway the entry reaches instead of starting one: its URL, and the
    environment variable holding a principal's bearer token (None: a gateway without auth)."""

    url: str
    token_env: str | None = None


def gateway_entry(
    profile_ref: str, fmt: HostFormat, separator: str = ".", client: str = "", remote: Remote | None = None
) -> dict[str, Any]:
    if remote is not None:
        return remote_entry(client, remote)
    entry: dict[str, Any] = {"type": "stdio"} if fmt.typed else {}
    entry.update(
        command=llmc_command(), args=["serve", "-p", profile_ref, *(["--name-separator", separator] if separator != "." else [])]
    )
    # The host must find the same profiles and write the same audit trail as this shell.
    env = {k: str(Path(v).absolute()) for k in ("LLMC_CONFIG_DIR", "LLMC_STATE_DIR") if (v := os.environ.get(k))}
    if env:
        entry["env"] = env
    return entry


def remote_entry(client: str, remote: Remote) -> dict[str, Any]:
    """The entry for a running HTTP gateway; the token is read from `remote.token_env` now only
    for Claude Desktop (its config cannot name the environment), and written where mcp-remote
    reads it."""
    reference = ENV_REFERENCE[client]
    if reference is None:
        args = ["-y", MCP_REMOTE, remote.url, "--transport", "http-only"]
        host = urlsplit(remote.url).hostname or ""
        if remote.url.startswith("http:") and host not in ("localhost", "127.0.0.1", "::1"):
            args.append("--allow-http")  # mcp-remote wants HTTPS past loopback
        entry: dict[str, Any] = {"command": paths.which("npx") or "npx", "args": args}
        if remote.token_env:
            # no space inside an argument: some hosts split arguments on spaces
            entry["args"] += ["--header", f"Authorization:${{{HEADER_VARIABLE}}}"]
            entry["env"] = {HEADER_VARIABLE: f"Bearer {token_value(remote.token_env)}"}
        return entry
    entry = {"type": "http", "url": remote.url} if client in ("vscode", "claude-code") else {}
    entry["serverUrl" if client == "windsurf" else "url"] = remote.url
    if remote.token_env:
        entry["headers"] = {"Authorization": "Bearer " + reference % remote.token_env}
    return entry


def host_needs(
    client: str, profiled: str, option: str | None, url: str | None, token_env: str | None
) -> tuple[str, Remote | None, str | None]:
    """(the name separator the host gets, the running gateway it reaches or None, a warning):
    `profiled` is the profile's [serve] name_separator, `option` --name-separator."""
    needed = HOST_NEEDS[client]
    if url is None:
        if token_env:
            raise UsageError("--token-env goes with --url (a gateway the host starts needs no token)")
        return option or (profiled if profiled != "." else needed), None, None
    if option:
        raise UsageError(
            "--name-separator applies to a gateway the host starts: with --url, set [serve] name_separator "
            "in the HTTP gateway's profile"
        )
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--url {url!r}: give the gateway's http:// or https:// URL (e.g. http://127.0.0.1:8765/mcp)")
    if token_env is not None and not token_env.replace("_", "a").isalnum():
        raise UsageError(f"--token-env {token_env!r}: give the name of an environment variable")
    warning = None
    if needed != "." and profiled == ".":
        warning = (
            f"{client} hands tool names to a model provider, which refuses names like 'server.tool': set "
            f'[serve] name_separator = "{needed}" in the profile the gateway at {url} serves'
        )
    return profiled, Remote(url, token_env), warning


def token_value(variable: str) -> str:
    value = os.environ.get(variable, "").strip()
    if not value:
        raise UsageError(f"--token-env {variable}: set {variable} to the principal's token (llmc serve token create prints it)")
    return value.removeprefix("Bearer ").strip()


def shown_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry as it may be shown: a token written into it is not."""
    env = entry.get("env")
    if isinstance(env, dict) and HEADER_VARIABLE in env:
        return {**entry, "env": {**env, HEADER_VARIABLE: "Bearer ***"}}
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
    separator: str = "."  # the name_separator the host gets

    @property
    def secret(self) -> bool:
        """Whether the entry holds a token (the file is then kept to its owner)."""
        return self.entry is not shown_entry(self.entry)

    def to_json(self, dry_run: bool) -> JSONObject:
        return {
            "client": self.client,
            "config": str(self.config),
            "name": self.name,
            "entry": shown_entry(self.entry),
            "nameSeparator": self.separator,
            "action": self.action,
            "dryRun": dry_run,
        }


def plan(
    client: str,
    config: Path | None,
    name: str,
    profile_ref: str,
    replace: bool,
    separator: str = ".",
    remote: Remote | None = None,
) -> Plan:
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
                f'"{fmt.key}" by hand: "{name}": '
                + json.dumps(shown_entry(gateway_entry(profile_ref, fmt, separator, client, remote)))
            )
    servers = data.setdefault(fmt.key, {})
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: '{fmt.key}' is not an object")
    entry = gateway_entry(profile_ref, fmt, separator, client, remote)
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
    return Plan(client, path, name, entry, action, data, separator)


def apply(planned: Plan) -> None:

    if planned.action == "unchanged":
        return
    mode = planned.config.stat().st_mode & 0o777 if planned.config.exists() else None
    if planned.secret:  # a token now lives in it: its owner's alone
        mode = 0o600
    write_atomic(planned.config, json.dumps(planned.data, indent=2, ensure_ascii=False) + "\n", mode, follow_link=True)
