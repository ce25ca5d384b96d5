"""`llmc audit tail|verify|head`: read and check the tamper-evident audit trail."""

from __future__ import annotations

import fnmatch
import json
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from llmc_cli import services
from llmc_cli.cli.context import app_of
from llmc_cli.cli.durations import parse_since
from llmc_cli.cli.output import clean, emit, end_status, format_option, show_table
from llmc_cli.config.profiles import load_profile
from llmc_cli.errors import ToolFailed, UsageError

if TYPE_CHECKING:
    from llmc_cli.audit import ChainedLog

FOLLOW_POLL_SECONDS = 0.5


@click.group()
def audit() -> None:
    """Read and verify the audit trail of every tool invocation."""


def _log(ctx: click.Context) -> ChainedLog:

    return services.audit_log(services.open_state(load_profile(app_of(ctx).profile)))


@audit.command("verify")
@click.option(
    "--expect",
    metavar="HASH",
    help="A head printed earlier by `llmc audit head`: it must still be in "
    "the chain (catches a log and anchor rewritten together).",
)
@click.pass_context
def verify(ctx: click.Context, expect: str | None) -> None:
    """Check the hash chain across every audit file and against its anchor: ok, or the first
    broken or missing link, a cut-off end, a deleted log (exit 1)."""
    report = _log(ctx).verify(expect=expect)
    emit(report)
    if not report["ok"]:
        where = f"{report['file']}:{report['line']}" if report.get("line") else report["file"]
        raise ToolFailed(f"audit log broken at {where}: {report['reason']}")


@audit.command("head")
@click.pass_context
def head(ctx: click.Context) -> None:
    """The current head hash and record count: record them elsewhere (a CI log, a ticket) and
    check later with `llmc audit verify --expect HASH`."""
    emit(_log(ctx).head())


@audit.command("tail")
@click.option("-n", "--lines", "count", type=click.IntRange(min=0), default=20, show_default=True)
@click.option("-f", "--follow", is_flag=True, help="Keep printing new records (across rotation) until Ctrl-C.")
@click.option("--since", metavar="30m|1h|2d|ISO", help="Only records from then on.")
@click.option("--server", "servers", multiple=True, help="Only these servers (repeatable).")
@click.option("--tool", "tool_glob", metavar="GLOB", help="Only tools matching this glob.")
@click.option(
    "--outcome",
    type=click.Choice(
        [
            "ok",
            "cached",
            "tool_error",
            "transport_error",
            "timeout",
            "cancelled",
            "denied",
            "interrupted",
            "abandoned",
            "lost",
            "skipped",
            "internal_error",
        ]
    ),
)
@format_option("jsonl", "table", listing=True)
@click.pass_context
def tail(
    ctx: click.Context,
    count: int,
    follow: bool,
    since: str | None,
    servers: tuple[str, ...],
    tool_glob: str | None,
    outcome: str | None,
    fmt: str,
) -> None:
    """The last records, as JSON Lines (or a table)."""

    log = _log(ctx)
    try:
        since_ts = parse_since(since) if since else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None

    def keep(record: dict[str, Any]) -> bool:
        if servers and record.get("server") not in servers:
            return False
        if tool_glob and (
            "tool" not in record  # a resource read or a prompt get
            or (
                not fnmatch.fnmatchcase(f"{record.get('server')}.{record.get('tool')}", tool_glob)
                and not fnmatch.fnmatchcase(str(record.get("tool")), tool_glob)
            )
        ):
            return False
        if outcome and (record.get("outcome") or ("denied" if record.get("decision") == "deny" else None)) != outcome:
            return False
        if since_ts is not None:
            try:
                return datetime.fromisoformat(record["time"].replace("Z", "+00:00")).timestamp() >= since_ts
            except (KeyError, ValueError):
                return False
        return True

    lines = [line for _, _, line in log.records()]  # read once: what is shown and what follows meet exactly
    records = [r for r in _parse(lines) if keep(r)]
    shown = records[-count:] if count else []
    if not follow:
        _print(shown, fmt)
        return
    if fmt == "table":  # one header, then a line per record as it comes, in fixed columns
        _follow_line({c: c for c, _ in FOLLOW_COLUMNS})
    for record in shown:
        _follow_record(record, fmt)
    seen = len(lines)
    while True:  # ends with Ctrl-C (exit 130)
        time.sleep(FOLLOW_POLL_SECONDS)
        lines = [line for _, _, line in log.records()]
        if len(lines) > seen:
            for record in _parse(lines[seen:]):
                if keep(record):
                    _follow_record(record, fmt)
            seen = len(lines)


# The columns of `audit tail -f --format table` and their widths (a followed table cannot size
# its columns by records that have not come yet).
FOLLOW_COLUMNS = [("time", 27), ("event", 8), ("server", 14), ("tool", 24), ("decision", 8), ("outcome", 11), ("durationMs", 10)]


def _follow_record(record: dict[str, Any], fmt: str) -> None:
    if fmt == "table":
        _follow_line({c: "" if record.get(c) is None else str(record.get(c)) for c, _ in FOLLOW_COLUMNS})
    else:
        emit([record], "jsonl")


def _follow_line(cells: dict[str, str]) -> None:
    end_status()
    line = " ".join(clean(cells[c])[:w].ljust(w) for c, w in FOLLOW_COLUMNS).rstrip()
    click.echo(line)
    sys.stdout.flush()


def _parse(lines: Any) -> Iterator[dict[str, Any]]:
    for line in lines:
        try:
            yield json.loads(line)
        except (ValueError, RecursionError):
            continue


def _print(records: list[dict[str, Any]], fmt: str) -> None:
    if fmt == "table":
        show_table(records, ["time", "event", "server", "tool", "decision", "outcome", "durationMs"], "audit records")
    else:
        emit(records, "jsonl")
