"""`llmc tools ...`: the tools of every server, as MCP sent them or translated for a provider."""

from __future__ import annotations

from typing import Any

import click

from llmc_cli.cli.output import emit, raise_failures
from llmc_cli.cli.targets import target_options

LIST_FORMATS = ["json", "jsonl", "table"]


@click.group()
def tools() -> None:
    """List, translate, export, lint and pin tool manifests."""


@tools.command("list")
@click.option("--format", "fmt", type=click.Choice(LIST_FORMATS), default="json", show_default=True)
@target_options
@click.pass_context
def list_(ctx: click.Context, fmt: str, **target: Any) -> None:
    """The tools of every server (or -s ones), exactly as each server sent them, each with a
    "server" key: {"tools": [...], "errors": [...]}.

    A server that cannot be reached is reported on stderr and in the output; the others' tools
    are still printed, and the exit code is 5 (or, when every server failed the same way, that
    error's own code).
    """
    from llmc_cli.cli.common import open_catalog

    catalog, _profile = open_catalog(ctx, target)
    with catalog:
        found, failures = catalog.list_tools(list(target["servers"]) or None)
    if not (target["stdio"] or target["url"]):  # for shell completion of tool names
        from llmc_cli.cli.complete import profile_key, remember_tools

        listed = [s for s in catalog.specs if s not in {f.server for f in failures}]
        remember_tools(profile_key(ctx.obj.get("profile")), [t.qualified_name for t in found], listed)
    rows = [{"server": t.server, **t.raw} for t in found]
    if fmt == "table":
        emit([{"server": t.server, "tool": t.name, "description": t.description} for t in found], "table")
    elif fmt == "jsonl":
        emit(rows, "jsonl")
    else:
        emit({"tools": rows, "errors": [f.to_json() for f in failures]}, "json")
    raise_failures(failures, len(catalog.specs))
