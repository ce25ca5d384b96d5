"""`llmc servers add|list|show|remove|enable|disable|import`: the servers table of a profile.

The profile edited is --profile / LLMC_PROFILE, else `default`; a profile that does not exist yet
starts as the built-in default (read-only workspace). Files are rewritten atomically with every
other table kept (comments are lost: tomli-w does not keep them).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

import click

from llmc_cli.cli.complete import complete_servers
from llmc_cli.cli.context import app_of
from llmc_cli.cli.host_install import install
from llmc_cli.cli.output import FORMATS, emit, emit_listing, format_option, note
from llmc_cli.cli.server_rows import _launch_line, _row, _runs, _shown
from llmc_cli.cli.targets import _pair
from llmc_cli.config.importers import read_config
from llmc_cli.config.paths import which
from llmc_cli.config.profile_writer import (
    add_server,
    default_profile_data,
    raw_profile,
    remove_server,
    set_server_enabled,
    update_profile,
)
from llmc_cli.config.profiles import editable_path, has_placeholder, load_profile, no_server, usable_specs
from llmc_cli.config.schema import Profile
from llmc_cli.config.secrets import is_secret_name, mask_url
from llmc_cli.config.validation import adapter, validate
from llmc_cli.errors import UsageError
from llmc_cli.model import SandboxSpec
from llmc_cli.services.confinement import derive, summary
from llmc_cli.services.sandbox import describe


def sandbox_options(f: Any) -> Any:
    """How new stdio servers are confined (README "Sandboxing servers"): boxed by default."""
    for option in reversed(
        [
            click.option(
                "--sandbox",
                type=click.Choice(["auto", "bwrap", "none"]),
                default="auto",
                show_default=True,
                help="How a stdio server runs: auto (bubblewrap where it works), bwrap (always), none.",
            ),
            click.option(
                "--network/--no-network",
                default=None,
                help="May a sandboxed server use the network? (default: only a package runner that downloads at "
                "start: npx, uvx, pipx run, bunx, npm exec, pnpm dlx, yarn dlx, docker run, a pip install)",
            ),
            click.option(
                "--read-path",
                "read_paths",
                multiple=True,
                metavar="PATH",
                help="A path a sandboxed server sees read-only (repeatable; default: the files its arguments name).",
            ),
            click.option(
                "--write-path",
                "write_paths",
                multiple=True,
                metavar="DIR",
                help="A path a sandboxed server sees read-write (repeatable; default: the directories its arguments name).",
            ),
        ]
    ):
        f = option(f)
    return f


def _confinement(
    sandbox: str,
    network: bool | None,
    read_paths: tuple[str, ...],
    write_paths: tuple[str, ...],
    command: tuple[str, ...] = (),
    cwd: str | None = None,
    name: str = "",
) -> dict[str, Any]:
    """The sandbox keys of a new stdio server's table. Without --read-path/--write-path, the
    paths its arguments name are declared (said on stderr); without --network/--no-network,
    only a package runner that downloads at start gets the network."""
    if sandbox == "none":
        if read_paths or write_paths:
            raise UsageError("--read-path and --write-path apply to a sandboxed server (not with --sandbox none)")
        return {"sandbox": "none"}
    derived = derive(command, cwd)
    table: dict[str, Any] = {"sandbox": sandbox, "network": derived.network if network is None else network}
    if not (read_paths or write_paths):
        read_paths, write_paths = tuple(derived.read_paths), tuple(derived.write_paths)
        for line in summary(name, derived):
            note(line)
    for key, paths in (("read_paths", read_paths), ("write_paths", write_paths)):
        if paths:
            table[key] = [p if p.startswith(("~", "${")) else os.path.abspath(p) for p in paths]
    return table


@click.group()
def servers() -> None:
    """Add, list, show, remove and import the MCP servers of a profile."""


@servers.command("add")
@click.argument("name")
@click.argument("command", nargs=-1, metavar="[-- COMMAND ARGS...]")
@click.option("--url", metavar="URL", help="A remote server (Streamable HTTP or HTTP+SSE).")
@click.option(
    "--header",
    "headers",
    multiple=True,
    metavar="'K: V'",
    help="HTTP header for --url (repeatable). Write secrets as ${VAR}: they expand when used.",
)
@click.option("--transport", type=click.Choice(["auto", "http", "sse"]), help="Remote transport (default: auto).")
@click.option("--env", "env", multiple=True, metavar="K=V", help="Environment for a stdio server (repeatable).")
@click.option("--cwd", metavar="DIR", help="Working directory of a stdio server.")
@click.option("--timeout", type=click.FloatRange(min=0.1), metavar="SECONDS", help="Per-request timeout (default 60).")
@click.option(
    "--connect-timeout",
    type=click.FloatRange(min=0.1),
    metavar="SECONDS",
    help="Bound of starting and connecting the server (default 60, or --timeout when longer).",
)
@click.option("--description", metavar="TEXT", help="What this server is for.")
@click.option("--disabled", is_flag=True, help="Add it disabled (used only when named with -s).")
@click.option("--replace", is_flag=True, help="Replace a server of the same name.")
@sandbox_options
@click.pass_context
def add(
    ctx: click.Context,
    name: str,
    command: tuple[str, ...],
    url: str | None,
    headers: tuple[str, ...],
    transport: str | None,
    env: tuple[str, ...],
    cwd: str | None,
    timeout: float | None,
    connect_timeout: float | None,
    description: str | None,
    disabled: bool,
    replace: bool,
    sandbox: str,
    network: bool | None,
    read_paths: tuple[str, ...],
    write_paths: tuple[str, ...],
) -> None:
    """Add a server: `llmc servers add NAME -- COMMAND ARGS...` (stdio) or
    `llmc servers add NAME --url URL [--header 'K: V']` (remote).

    Prints {"added": NAME, "profile": PROFILE, "path": PATH, "server": {...}}. A name already in the profile is an
    error (exit 3) unless --replace. A stdio server is sandboxed (--sandbox auto) unless told
    otherwise: it sees the paths its arguments name (directories read-write, files read-only;
    --read-path/--write-path choose instead), and has the network only when a package runner
    (npx, uvx, pipx run, ...) downloads it at start (--network/--no-network choose).
    """

    if url and (
        read_paths
        or write_paths
        or ctx.get_parameter_source("sandbox") not in (None, click.core.ParameterSource.DEFAULT)
        or ctx.get_parameter_source("network") not in (None, click.core.ParameterSource.DEFAULT)
    ):
        raise UsageError("--sandbox, --network, --read-path and --write-path apply to stdio servers only")
    if command:
        command = _split_command(command)
    confinement = _confinement(sandbox, network, read_paths, write_paths, command, cwd, name) if command else {}
    table = _server_table(name, command, url, headers, transport, env, cwd, timeout, description, disabled, confinement)
    if connect_timeout:
        table["connect_timeout"] = connect_timeout
    for header, value in table.get("headers", {}).items():
        if is_secret_name(header) and not has_placeholder(value):
            note(f"llmc: header {header} holds a literal secret; prefer ${{VAR}} (it expands when used)")
    path = editable_path(_profile_option(ctx))
    created = not path.exists()
    add_server(path, name, table, replace=replace)
    if created:
        note(f"llmc: created profile {path} from the built-in default")
    note(f"llmc: {'replaced' if replace else 'added'} server {name} in {path}")
    emit({"added": name, **_where(path), "server": _shown(table)})


@servers.command("list")
@format_option(*FORMATS, listing=True)
@click.pass_context
def list_(ctx: click.Context, fmt: str) -> None:
    """The servers of the profile as saved (${VAR}s unexpanded, literal secrets masked):
    {"profile": NAME, "path": PATH, "servers": [...], "errors": [...]}. An enabled server that
    cannot be configured now (an unset ${VAR}) is also an entry in `errors`, as every command
    using it would fail (exit 3 there); the listing itself exits 0."""

    loaded = load_profile(_profile_option(ctx))
    rows = [_row(name, server) for name, server in loaded.profile.servers.items()]
    _, unusable = usable_specs(loaded)
    errors = [{"server": name, **exc.to_json()} for name, exc in unusable.items()]
    for error in errors:
        note(f"llmc: {error['message']}")
    people = [
        {**r, "target": _launch_line(r), "runs": _runs(r), "error": "cannot be configured" if r["name"] in unusable else None}
        for r in rows
    ]
    emit_listing(
        "servers",
        rows,
        fmt,
        errors,
        envelope={"profile": loaded.name, "path": str(loaded.path) if loaded.path else None},
        table_rows=people,
        columns=["name", "kind", "enabled", "runs", "target", "description", *(["error"] if unusable else [])],
    )


@servers.command("show")
@click.argument("name", shell_complete=complete_servers)
@format_option("json", "table")
@click.pass_context
def show(ctx: click.Context, name: str, fmt: str) -> None:
    """One server of the profile as saved (${VAR}s unexpanded, literal secrets masked); for a
    stdio server, "runs" says how it runs here: in bwrap (network, paths) or not sandboxed."""

    loaded = load_profile(_profile_option(ctx))
    server = loaded.profile.servers.get(name)
    if server is None:
        raise no_server(loaded.name, name, loaded.profile.servers)
    row = {"profile": loaded.name, **_row(name, server)}
    if server.command:
        row["runs"] = describe(
            SandboxSpec(server.sandbox, bool(server.network), tuple(server.read_paths), tuple(server.write_paths))
            if server.sandbox
            else None
        )
    emit(row, fmt)


@servers.command("remove")
@click.argument("names", nargs=-1, required=True, metavar="NAME...", shell_complete=complete_servers)
@click.pass_context
def remove(ctx: click.Context, names: tuple[str, ...]) -> None:
    """Remove servers from the profile, all or none (a name not there removes nothing):
    {"removed": [NAME, ...], "profile": PROFILE, "path": PATH}."""
    names = tuple(dict.fromkeys(names))
    path = editable_path(_profile_option(ctx))
    remove_server(path, *names)
    note(f"llmc: removed server{'s' if len(names) > 1 else ''} {', '.join(names)} from {path}")
    emit({"removed": list(names), **_where(path)})


@servers.command("enable")
@click.argument("name", shell_complete=complete_servers)
@click.pass_context
def enable(ctx: click.Context, name: str) -> None:
    """Enable a server: every command uses it again.
    Prints {"server": NAME, "enabled": true, "changed": BOOL, "profile": PROFILE, "path": PATH}."""
    _set_enabled(ctx, name, True)


@servers.command("disable")
@click.argument("name", shell_complete=complete_servers)
@click.pass_context
def disable(ctx: click.Context, name: str) -> None:
    """Disable a server: kept in the profile, used only when named with -s.
    Prints {"server": NAME, "enabled": false, "changed": BOOL, "profile": PROFILE, "path": PATH}."""
    _set_enabled(ctx, name, False)


def _set_enabled(ctx: click.Context, name: str, enabled: bool) -> None:

    path = editable_path(_profile_option(ctx))
    changed = set_server_enabled(path, name, enabled)  # a profile not there yet starts as the built-in default
    verb = "enabled" if enabled else "disabled"
    note(f"llmc: {verb} server {name} in {path}" if changed else f"llmc: server {name} was already {verb}")
    emit({"server": name, "enabled": enabled, "changed": changed, **_where(path)})


@servers.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--dry-run", is_flag=True, help="Print what would be added; change nothing.")
@click.option("--replace", is_flag=True, help="Overwrite servers whose names are already in the profile.")
@sandbox_options
@click.pass_context
def import_(
    ctx: click.Context,
    file: Path,
    dry_run: bool,
    replace: bool,
    sandbox: str,
    network: bool | None,
    read_paths: tuple[str, ...],
    write_paths: tuple[str, ...],
) -> None:
    """Import servers from Claude Desktop / Claude Code (.mcp.json) / Cursor / Windsurf
    (`mcpServers`) or VS Code (`servers` in mcp.json) config files.

    Secrets are not copied: VS Code inputs, ${env:VAR} and literal tokens become ${VAR}
    placeholders, listed on stderr and under "placeholders". Names already in the profile are
    reported under "skipped" and left alone unless --replace. Stdio servers are written
    sandboxed (--sandbox auto) unless told otherwise, seeing the paths their arguments name and
    with the network only for a package runner, as `servers add` does.
    """

    imported = read_config(file)
    _confinement(sandbox, network, read_paths, write_paths)  # the options' own errors, before any file is read further
    for server, table in imported.servers.items():
        if table.get("command"):
            argv = (table["command"], *table.get("args", []))
            table.update(_confinement(sandbox, network, read_paths, write_paths, argv, table.get("cwd"), server))
    path = editable_path(_profile_option(ctx))
    existing = raw_profile(path) if path.exists() else default_profile_data()
    clashes = [n for n in imported.servers if n in (existing.get("servers") or {})]
    chosen = {n: t for n, t in imported.servers.items() if replace or n not in clashes}

    def mutate(data: dict[str, Any]) -> None:
        data.setdefault("servers", {}).update(chosen)

    if dry_run:
        mutate(existing)
        validate(existing, f"{path} (after import)")  # would it load?
    elif chosen:
        update_profile(path, mutate)
    for line in imported.notes:
        note(f"llmc: {line}")
    for item in imported.placeholders:
        note(f"llmc: set ${{{item['variable']}}} for server {item['server']}: {item['reason']}")
    for name in clashes:
        note(f"llmc: server {name} already in {path}: " + ("replaced" if replace else "skipped (use --replace)"))
    verb = "would import" if dry_run else "imported"
    note(f"llmc: {verb} {len(chosen)} of {len(imported.servers)} server(s) into {path}")
    emit(
        {
            **_where(path),
            "source": imported.source,
            "dryRun": dry_run,
            "added": [n for n in chosen if n not in clashes],
            "replaced": [n for n in chosen if n in clashes],
            "skipped": [] if replace else clashes,
            "servers": {n: _shown(t) for n, t in chosen.items()},
            "placeholders": imported.placeholders,
        }
    )


def _profile_option(ctx: click.Context) -> str | None:
    return app_of(ctx).profile


def _where(path: Path) -> dict[str, str]:
    """The profile a command edited, as every output names one: its name and its file."""
    return {"profile": path.stem, "path": str(path)}


def _split_command(command: tuple[str, ...]) -> tuple[str, ...]:
    """`servers add fs "npx -y pkg /srv"` (the command line quoted as one word) is split as
    --stdio splits it, and said so on stderr; a program whose path really has a space in it (an
    existing file, or one on PATH) is kept whole."""

    first = command[0]
    if not first.strip() or not any(c.isspace() for c in first) or os.path.exists(first) or which(first):
        return command
    try:
        words = shlex.split(first)
    except ValueError as exc:
        raise UsageError(f"command {first!r}: {exc}") from None
    if not words:
        raise UsageError("give the server's command: `-- COMMAND ARGS...`")
    split = (*words, *command[1:])
    note(
        f"llmc: split the command line {first!r} as --stdio does: command {split[0]!r}, args {list(split[1:])} "
        "(a program with a space in its path: give its full path)"
    )
    return split


def _server_table(
    name: str,
    command: tuple[str, ...],
    url: str | None,
    headers: tuple[str, ...],
    transport: str | None,
    env: tuple[str, ...],
    cwd: str | None,
    timeout: float | None,
    description: str | None,
    disabled: bool,
    confinement: dict[str, Any],
) -> dict[str, Any]:
    """The TOML table for one server from the options, validated by the profile schema."""
    from pydantic import ValidationError

    if bool(command) == bool(url):
        raise UsageError("give either `-- COMMAND ARGS...` (stdio) or --url URL (remote)")
    if command and (headers or transport):
        raise UsageError("--header and --transport apply to --url servers only")
    if url and (env or cwd):
        raise UsageError("--env and --cwd apply to stdio servers only")
    if url and not url.startswith(("http://", "https://", "${")):
        raise UsageError(f"--url must start with http:// or https://: {mask_url(url)}")
    table: dict[str, Any] = {}
    if command:
        table["command"] = command[0]
        if command[1:]:
            table["args"] = list(command[1:])
        if env:
            table["env"] = dict(_pair(e, "=", "--env") for e in env)
        if cwd:
            table["cwd"] = cwd
        table.update(confinement)
    else:
        table["url"] = url
        if headers:
            table["headers"] = dict(_pair(h, ":", "--header") for h in headers)
        if transport and transport != "auto":
            table["transport"] = transport
    if timeout:
        table["timeout"] = timeout
    if disabled:
        table["enabled"] = False
    if description:
        table["description"] = description
    try:
        adapter(Profile).validate_python({"servers": {name: table}})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"server {name!r}: {first['msg'].removeprefix('Value error, ')}") from None
    return table


servers.add_command(install)  # cli/host_install.py
