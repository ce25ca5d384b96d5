"""`llmc tools ...`: the tools of every server, as MCP sent them or translated for a provider.

`tools list` is here; the group's other commands load when they run (TOOLS, the command
registry's seam, cli/main.py RegistryGroup): a listing builds none of their options."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

import click

from llmc_cli import services
from llmc_cli.cli.common import open_target
from llmc_cli.cli.context import app_of
from llmc_cli.cli.main import RegistryGroup
from llmc_cli.cli.output import FORMATS, emit, emit_listing, format_option, note, plain_text, raise_failures, warn
from llmc_cli.cli.targets import Target, target_options
from llmc_cli.errors import ToolFailed, UsageError
from llmc_cli.guard.clearance import human
from llmc_cli.model import TOOL_FORMATS, Tool
from llmc_cli.services.sandbox import describe
from llmc_cli.services.tools import profile_key, remember_tools

if TYPE_CHECKING:
    from llmc_cli.translate import Translation

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


@click.group(cls=RegistryGroup, registry=TOOLS, path="tools")
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
    catalog, profile = open_target(ctx, target)
    if app_of(ctx).verbose:
        for spec in catalog.specs.values():
            if spec.kind == "stdio":
                note(f"llmc: {spec.name} runs {describe(spec.sandbox, bool(spec.launch))}")
    # The listing is written before the catalog closes: a stdio server that does not exit on
    # EOF holds the close for the grace and a SIGTERM (~60 ms), which the reader (a terminal,
    # jq) need not wait for. The process still ends only once its servers have.
    with catalog:
        found, denied, failures = services.visible_tools(
            catalog, profile, list(target.servers) or None, human(profile.profile), closed=show_all
        )
        if show_all:
            found = found + denied
        if not target.is_adhoc:  # for shell completion of tool names
            listed = [s for s in catalog.specs if s not in {f.server for f in failures}]
            remember_tools(profile_key(app_of(ctx).profile), [t.qualified_name for t in found], listed)
        if globs:
            found = [t for t in found if _matches(t, globs)]
        if fmt in TOOL_FORMATS:
            if show_all:
                raise UsageError("--all lists denied tools; a translation holds only the tools the profile allows")
            _print_translation(found, fmt, strict, defer_loading)
            raise_failures(failures, len(catalog.specs))
            return
        rows = [{"server": t.server, **t.raw, **({"denied": True} if t in denied else {})} for t in found]
        people = [
            {
                "server": t.server,
                "tool": t.name,
                **({"denied": "yes" if t in denied else ""} if show_all else {}),
                "description": t.description,
            }
            for t in found
        ]
        emit_listing(
            "tools",
            rows,
            fmt,
            [f.to_json() for f in failures],
            table_rows=people,
            columns=["server", "tool", *(["denied"] if show_all else []), "description"],
        )
        raise_failures(failures, len(catalog.specs))


def _matches(tool: Tool, globs: tuple[str, ...]) -> bool:

    return any(fnmatchcase(tool.name, g) or fnmatchcase(tool.qualified_name, g) for g in globs)


def translated_for(found: list[Tool], fmt: str, strict: bool) -> Translation:
    """Translate, print every warning on stderr; with --strict a warning is a failure (exit 1)."""
    from llmc_cli.translate import translate

    result = translate(found, fmt, strict=strict)
    for line in grouped_warnings(result.warnings):
        warn(line)
    return result


def grouped_warnings(findings: list[Any]) -> list[str]:
    """One line per kind of finding (what happened, why, for which target) naming every tool
    and place it happened, instead of one line per tool: forty tools losing `format` is one fact."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for f in findings:
        groups.setdefault((f.target, f.what, f.why), []).append(f.tool)
    return [
        f"{target}: {what} ({why}): {len(tools)} place(s) in {', '.join(dict.fromkeys(tools))}"
        for (target, what, why), tools in groups.items()
    ]


def fail_on_warnings(result: Translation, strict: bool) -> None:
    if strict and result.warnings:
        raise ToolFailed(f"{len(result.warnings)} translation warning(s) with --strict")


def _print_translation(found: list[Tool], fmt: str, strict: bool, defer_loading: bool = False) -> None:
    result = translated_for(found, fmt, strict)
    if isinstance(result.definitions, str):
        plain_text(result.definitions)  # a prompt for a model: cleaned only on a terminal
    elif defer_loading:
        from llmc_cli.translate.anthropic import deferred

        emit(deferred(result.definitions))
    else:
        emit(result.definitions)
    fail_on_warnings(result, strict)
