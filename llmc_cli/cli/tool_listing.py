"""`llmc tools list`'s work once its servers started (cli/tools.py list_ decides and starts them
first, then loads this): the catalog, the listing, its rendering; and the translations for a
provider that `tools list --format` and `tools export` print."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

import click

from llmc_cli import services
from llmc_cli.cli.common import open_target
from llmc_cli.cli.context import app_of
from llmc_cli.cli.output import emit, emit_listing, note, plain_text, raise_failures, warn
from llmc_cli.cli.starting import Started
from llmc_cli.cli.targets import Target
from llmc_cli.errors import ToolFailed, UsageError
from llmc_cli.guard.clearance import human
from llmc_cli.model import TOOL_FORMATS, Tool
from llmc_cli.services.sandbox import describe
from llmc_cli.services.tools import profile_key, remember_tools

if TYPE_CHECKING:
    from llmc_cli.translate import Translation


def listing(
    ctx: click.Context,
    started: Started,
    fmt: str,
    strict: bool,
    show_all: bool,
    globs: tuple[str, ...],
    defer_loading: bool,
    target: Target,
) -> None:
    """`tools list` (its arguments as there) over the servers `started` holds."""
    catalog, profile = open_target(ctx, target, started=started)
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
