"""`llmc tools ...`: the tools of every server, as MCP sent them or translated for a provider.

`tools list` is here; the group's other commands load when they run (TOOLS, the command
registry's seam, cli/main.py RegistryGroup): a listing builds none of their options."""

from __future__ import annotations

import click

from llmc_cli.cli.main import RegistryGroup
from llmc_cli.cli.output import FORMATS, format_option
from llmc_cli.cli.starting import start_servers
from llmc_cli.cli.targets import Target, target_options
from llmc_cli.errors import UsageError
from llmc_cli.model import TOOL_FORMATS

STRICT = click.option(
    "--strict", is_flag=True, help="OpenAI strict-mode schemas; any loss or rewrite fails the command (exit 1)."
)

# The group's commands but `list`: name -> "module:attribute", loaded when one runs.
TOOLS = {
    "search": "llmc_cli.cli.tool_views:search",
    "show": "llmc_cli.cli.tool_views:show",
    "scan": "llmc_cli.cli.tool_views:scan",
    "export": "llmc_cli.cli.tool_manifests:export",
    "lint": "llmc_cli.cli.tool_manifests:lint",
    "lock": "llmc_cli.cli.tool_manifests:lock",
    "diff": "llmc_cli.cli.tool_manifests:diff",
}


@click.group(cls=RegistryGroup, registry=TOOLS)
def tools() -> None:
    """List, translate, export, lint and pin tool manifests."""


@tools.command("list")
@format_option(
    *FORMATS,
    *TOOL_FORMATS,
    listing=True,
    help="A listing (default: a table on a terminal, else JSON; LLMC_FORMAT, [output] format), "
    "or the tools translated for a provider's API.",
)
@STRICT
@click.option("--all", "show_all", is_flag=True, help='Also the tools the profile\'s policy denies, marked "denied".')
@click.option(
    "--match",
    "globs",
    multiple=True,
    metavar="GLOB",
    help="Only tools whose name or SERVER.TOOL matches this glob (repeatable: any of them).",
)
@click.option(
    "--defer-loading",
    is_flag=True,
    help="With --format anthropic: every tool with defer_loading, after Anthropic's server-side "
    "tool search tool (BM25; needs the advanced-tool-use-2025-11-20 beta).",
)
@target_options
@click.pass_context
def list_(
    ctx: click.Context, fmt: str, strict: bool, show_all: bool, globs: tuple[str, ...], defer_loading: bool, target: Target
) -> None:
    """The tools of every server (or -s ones), exactly as each server sent them, each with a
    "server" key: {"tools": [...], "errors": [...]}.

    A server that cannot be reached is reported on stderr and in the output; the others' tools
    are still printed, and the exit code is 5 (or, when every server failed the same way, that
    error's own code).
    """
    if defer_loading and fmt != "anthropic":
        raise UsageError("--defer-loading is Anthropic's tool search: use it with --format anthropic")
    started = start_servers(ctx, target)  # the server starts before the listing's machinery loads
    from llmc_cli.cli.tool_listing import listing  # (the command registry's seam: after the spawn)

    listing(ctx, started, fmt, strict, show_all, globs, defer_loading, target)
