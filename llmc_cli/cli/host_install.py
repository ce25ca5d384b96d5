"""`llmc servers install --client C -p P`: the gateway into an MCP host's own config
(config/host_configs.py), with what that host needs: provider-safe tool names, and for a running
HTTP gateway the host's own way to reach it (Claude Desktop: mcp-remote)."""

from __future__ import annotations

from pathlib import Path

import click

from llmc_cli.cli.context import app_of
from llmc_cli.cli.output import emit, note


@click.command("install")
@click.option(
    "--client",
    required=True,
    metavar="CLIENT",
    type=click.Choice(["claude-desktop", "cursor", "windsurf", "vscode", "claude-code"]),
    help="The MCP host whose config gets the entry.",
)
@click.option(
    "--profile",
    "-p",
    "profile_name",
    metavar="NAME|PATH",
    help="The profile the host gets (default: llmc's own -p / LLMC_PROFILE, else 'default').",
)
@click.option("--name", metavar="NAME", help="The entry's name in the host's config (default: llmc-PROFILE).")
@click.option(
    "--config",
    "config",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The host's config file (default: where that host keeps it).",
)
@click.option(
    "--name-separator",
    type=click.Choice([".", "__", "_"]),
    help="Tool names the host gets: SERVER.TOOL, SERVER__TOOL, SERVER_TOOL (default: what the host needs, "
    "__ for every client here: they hand names to a model provider; a profile's own __ or _ is kept).",
)
@click.option(
    "--url",
    metavar="URL",
    help="Reach a running HTTP gateway (llmc serve --http) at this URL instead of starting one "
    "(Claude Desktop: through mcp-remote).",
)
@click.option(
    "--token-env",
    metavar="VAR",
    help="With --url: the environment variable holding a principal's bearer token. Claude Desktop: read "
    "now and written into its config (which is then made private); the others read VAR when they start.",
)
@click.option("--dry-run", is_flag=True, help="Print the entry and where it would go; change nothing.")
@click.option("--replace", is_flag=True, help="Overwrite an entry of that name.")
@click.pass_context
def install(
    ctx: click.Context,
    client: str,
    profile_name: str | None,
    name: str | None,
    config: Path | None,
    name_separator: str | None,
    url: str | None,
    token_env: str | None,
    dry_run: bool,
    replace: bool,
) -> None:
    """Put the gateway (`llmc serve -p PROFILE` on stdio) into an MCP host's config, so the host
    reaches the profile's servers only through its policy and audit trail. Try --dry-run first.

    Claude Desktop, Cursor and Windsurf: their user config; VS Code (.vscode/mcp.json) and
    Claude Code (.mcp.json): the current directory's. The rest of the file is kept. Every one of
    them hands tool names to a model provider, so the entry asks for provider-safe names
    (--name-separator __).
    """
    from llmc_cli.config import host_configs
    from llmc_cli.config.profiles import load_profile

    chosen = profile_name or app_of(ctx).profile or "default"
    loaded = load_profile(chosen)  # the host must get a profile that loads
    reference = host_configs.profile_reference(chosen, loaded.path)
    separator, remote, warning = host_configs.host_needs(
        client, loaded.profile.serve.name_separator, name_separator, url, token_env
    )
    if warning:
        note(f"llmc: {warning}")
    planned = host_configs.plan(client, config, name or f"llmc-{loaded.name}", reference, replace, separator, remote)
    if not dry_run:
        host_configs.apply(planned)
    verb = {
        "add": "would add" if dry_run else "added",
        "replace": "would replace" if dry_run else "replaced",
        "unchanged": "already has",
    }[planned.action]
    note(
        f"llmc: {verb} {planned.name} in {planned.config}"
        + ("; restart the host to use it" if not dry_run and planned.action != "unchanged" else "")
    )
    emit(planned.to_json(dry_run))
