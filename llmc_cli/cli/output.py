"""Rendering: JSON (default) and JSON Lines for machines, tables for people; errors on stderr."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Iterable

import click

from llmc_cli.errors import LlmcError

FORMATS = ("json", "jsonl", "table")


def emit(data: Any, fmt: str = "json", *, columns: list[str] | None = None) -> None:
    """Write data to stdout in the requested format. Lists become rows for jsonl/table."""
    if fmt == "jsonl":
        for item in data if isinstance(data, list) else [data]:
            click.echo(json.dumps(item, ensure_ascii=False, separators=(",", ":")))
    elif fmt == "table":
        click.echo(table(data if isinstance(data, list) else [data], columns))
    else:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))


def table(rows: Iterable[dict[str, Any]], columns: list[str] | None = None) -> str:
    from tabulate import tabulate

    rows = list(rows)
    if not rows:
        return "(none)"
    columns = columns or list(dict.fromkeys(k for row in rows for k in row))
    body = [[_cell(row.get(c)) for c in columns] for row in rows]
    return tabulate(body, headers=columns, tablefmt="simple")


def _cell(value: Any, width: int = 60) -> str:
    text = value if isinstance(value, str) else "" if value is None else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def note(message: str) -> None:
    """A message for people: stderr, never stdout."""
    click.echo(message, err=True)


def use_color() -> bool:
    return sys.stderr.isatty() and "NO_COLOR" not in os.environ


def report_error(exc: LlmcError) -> None:
    prefix = click.style("llmc:", fg="red", bold=True) if use_color() else "llmc:"
    click.echo(f"{prefix} {exc.message}", err=True)
    for line in exc.details.get("stderr") or []:
        click.echo(f"  server stderr | {line}", err=True)
