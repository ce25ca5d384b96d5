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


def raise_failures(failures: list[Any], total: int) -> None:
    """After a listing across servers: each failed server is one line on stderr. When every
    server failed the same way, exit with that error's own code (an expired login is 9, a
    timeout 7); when only some did, 5, so a CI step notices while the others' results stand."""
    if not failures:
        return
    codes = {f.error.exit_code for f in failures}
    if len(failures) == total and len(codes) == 1:
        for failure in failures[1:]:
            note(f"llmc: {failure.error.message}")
        raise failures[0].error
    for failure in failures:
        note(f"llmc: {failure.error.message}")
    from llmc_cli.errors import ConnectionFailed

    raise ConnectionFailed(f"{len(failures)} of {total} server(s) failed")


def report_error(exc: LlmcError) -> None:
    prefix = click.style("llmc:", fg="red", bold=True) if use_color() else "llmc:"
    click.echo(f"{prefix} {exc.message}", err=True)
    for line in exc.details.get("stderr") or []:
        click.echo(f"  server stderr | {line}", err=True)
