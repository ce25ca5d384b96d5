"""Rendering: JSON (default) and JSON Lines for machines, tables for people; errors on stderr.

Text that reaches a person's terminal passes through `clean`: servers and models write it, and an
escape sequence in it would act on the terminal (OSC 52 clipboard writes, cursor movement, bidi
overrides that reorder what is shown). JSON on stdout is data and stays as it is (JSON escapes
control characters itself)."""

from __future__ import annotations

import codecs
import json
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

# config, policy: their lazy interfaces (profiles load with a listing's format, approval with a denial's hint)
from llmc_cli import config, lazy_pattern, policy
from llmc_cli.errors import ConnectionFailed, LlmcError, UsageError
from llmc_cli.model import clean as clean  # text fit for a terminal (model.py: the gateway's log uses it too)
from llmc_cli.model import clean_line as clean_line
from llmc_cli.model import compact_json, compact_json_line

FORMATS = ("json", "jsonl", "table")  # a listing's formats
FORMAT_ENV = "LLMC_FORMAT"
F = TypeVar("F", bound=Callable[..., Any])


def format_option(*choices: str, required: bool = False, listing: bool = False, help: str | None = None) -> Callable[[F], F]:
    """The one `--format` option (as `fmt`): these choices, the first the default unless the
    format is required. Every command declares its output formats through this. A `listing`
    has no fixed default: see _listing_format."""
    if listing:
        return click.option(
            "--format",
            "fmt",
            type=click.Choice(choices),
            default=None,
            callback=_listing_format,
            help=help
            or "Default: a table when stdout is a terminal, else JSON "
            f"({FORMAT_ENV}, then the profile's [output] format, decide first).",
        )
    if required:  # no default at all: Click 8.3 takes an explicit default=None for a value given
        return click.option("--format", "fmt", type=click.Choice(choices), required=True, help=help)
    return click.option("--format", "fmt", type=click.Choice(choices), default=choices[0], show_default=True, help=help)


def _listing_format(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A listing's format: --format, else LLMC_FORMAT, else the profile's [output] format, else a
    table when stdout is a terminal and JSON when it is not. Runs after every option given on the
    command line (Click processes options that were not given last), so `-p` after the
    subcommand already chose the profile. Presentation only: the data is the same either way."""
    if value is not None or ctx.resilient_parsing:
        return value
    choices = [str(c) for c in getattr(param.type, "choices", FORMATS)]
    wanted = os.environ.get(FORMAT_ENV, "").strip().lower()
    if wanted and wanted not in ("auto", *FORMATS):
        raise UsageError(f"{FORMAT_ENV}={wanted!r}: expected auto, json, jsonl or table")
    if not wanted or wanted == "auto":
        wanted = _profile_format(ctx)
    if wanted == "auto":
        wanted = "table" if sys.stdout.isatty() else "json"
    if wanted in choices:
        return wanted
    return next(c for c in choices if c != "table")  # JSON asked of a JSON Lines command: its own machine format


def _profile_format(ctx: click.Context) -> str:
    """[output] format of the profile in use; "auto" when it has none or does not load (the
    command itself reports a profile that does not load, where it needs one)."""
    try:  # ctx.obj: the App the root command made (cli/context.py, which renders through here)
        return config.load_profile(getattr(ctx.obj, "profile", None)).profile.output.format
    except LlmcError:
        return "auto"


def emit(data: Any, fmt: str = "json", *, columns: list[str] | None = None) -> None:
    """Write data to stdout in the requested format. Lists become rows for jsonl/table."""
    _end_status()  # a progress line on the same terminal goes first: `[progress] 3/3 {` no more
    if fmt == "jsonl":
        for item in data if isinstance(data, list) else [data]:
            click.echo(json_line(item))
    elif fmt == "table":
        click.echo(table(data if isinstance(data, list) else [data], columns))
    else:
        click.echo(_json_safe(json.dumps(data, ensure_ascii=False, indent=2)))


def emit_lines() -> tuple[Callable[[Any], None], Callable[[], None]]:
    """(write, flush): JSON Lines on stdout, kept until the caller flushes them, in one write,
    when it would wait (`call --batch`: a click.echo, a write and a flush per line were a
    measurable share of a thousand calls). On a UTF-8 stdout the lines go to the bytes under it
    as they were encoded (compact_json_line: not decoded to text and encoded again)."""
    raw = _utf8_bytes_of(sys.stdout)
    if raw is None:
        return _text_lines()
    pending: list[bytes] = []
    errors = sys.stdout.errors or "strict"

    def write(item: Any) -> None:
        if _status_shown:
            _end_status()
        try:
            line = compact_json_line(item)  # json_line's and its newline
        except UnicodeEncodeError:  # a lone surrogate: escaped below
            line = b"\x80"
        # (_json_safe's test: a call less for an ASCII line; DEL as an integer, a memchr: `bytes in
        # bytes` and bytes.find cost ~2,000 instructions a search in CPython 3.11)
        if not line.isascii() or 127 in line:
            line = (_json_safe(compact_json(item)) + "\n").encode("utf-8", errors)  # as the text layer would
        pending.append(line)

    def flush() -> None:
        if pending:
            data = b"".join(pending)
            pending.clear()
            # Not click.echo (a context lookup, colour and terminal checks per flush: a batch
            # flushes after every call): the lines are JSON, control characters escaped.
            raw.write(data)
            raw.flush()

    return write, flush


def _utf8_bytes_of(out: Any) -> Any:
    """The bytes under a text stream that writes UTF-8 and "\\n" as they are (what emit_lines
    may write to directly), its text flushed first; None for any other stream."""
    raw = getattr(out, "buffer", None)
    encoding = getattr(out, "encoding", None)
    if raw is None or not isinstance(encoding, str) or os.linesep != "\n":
        return None
    try:
        if codecs.lookup(encoding).name != "utf-8":
            return None
        out.flush()  # what the text layer holds goes first
    except (LookupError, OSError, ValueError):
        return None
    return raw


def _text_lines() -> tuple[Callable[[Any], None], Callable[[], None]]:
    """emit_lines on any other stream: the lines as text."""
    pending: list[str] = []

    def write(item: Any) -> None:
        if _status_shown:
            _end_status()
        text = compact_json(item)
        if not text.isascii() or "\x7f" in text:
            text = _json_safe(text)
        pending.append(text + "\n")

    def flush() -> None:
        if pending:
            text = "".join(pending)
            pending.clear()
            out = sys.stdout
            out.write(text)
            out.flush()

    return write, flush


def emit_listing(
    key: str,
    rows: list[dict[str, Any]],
    fmt: str,
    errors: list[dict[str, Any]] | None = None,
    *,
    table_rows: list[dict[str, Any]] | None = None,
    columns: list[str] | None = None,
    envelope: dict[str, Any] | None = None,
    noun: str | None = None,
) -> None:
    """The one shape of every listing. JSON: {**envelope, KEY: rows, "errors": [...]}. JSON Lines:
    one line per row, then one per error (an error line is the only kind with an "error" key), so
    a script reading lines loses nothing. Table: the rows for people (`table_rows` when they are
    shaped differently) in `columns`; errors are on stderr, as always (or rows of `table_rows`)."""
    errors = errors or []
    if fmt == "json":
        emit({**(envelope or {}), key: rows, "errors": errors})
    elif fmt == "jsonl":
        emit([*rows, *errors], "jsonl")
    else:
        show_table(rows if table_rows is None else table_rows, columns, noun or _spaced_words(key), quiet_empty=bool(errors))


def show_table(rows: list[dict[str, Any]], columns: list[str] | None, noun: str, *, quiet_empty: bool = False) -> None:
    """A listing's table on stdout; an empty listing prints nothing there and says so on stderr
    (unless its errors already did: `quiet_empty`)."""
    if rows:
        _end_status()
        click.echo(table(rows, columns, width=_terminal_width()))
    elif not quiet_empty:
        note(f"llmc: no {noun}")


def _spaced_words(key: str) -> str:
    """resourceTemplates -> resource templates."""
    return re.sub(r"(?<=[a-z])([A-Z])", lambda m: " " + m.group(1).lower(), key)


def _terminal_width() -> int | None:
    """Columns of the terminal stdout is (COLUMNS first, as everywhere); None for a pipe."""

    # shutil.get_terminal_size's rule, without importing shutil (and bz2, lzma) for it
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else None


def json_line(item: object) -> str:
    """One JSON Lines record."""
    return _json_safe(compact_json(item))


# Characters json.dumps(ensure_ascii=False) leaves raw that act on a terminal or cannot be encoded:
# DEL, C1 controls, bidi controls, line/paragraph separators, lone surrogates. In JSON output
# they can only be inside strings, and there \uXXXX is the same data: escaped, a document is
# unchanged for every JSON reader and harmless on a terminal. Compiled on first use (text that
# is not ASCII): ~0.9 ms of every start-up otherwise.
_JSON_UNSAFE = lazy_pattern("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _json_safe(text: str) -> str:
    if text.isascii() and "\x7f" not in text:  # ASCII (a flag of the string) but DEL: nothing to escape
        return text
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def plain_text(text: str) -> None:
    """--text output: into a pipe as it is (data); on a terminal cleaned, as anything shown to people.
    A newline ends it unless the text ends with one (a file's text prints as `cat` prints it)."""
    _end_status()
    click.echo(clean(text) if sys.stdout.isatty() else text, nl=not text.endswith("\n"))


def table(rows: Iterable[dict[str, Any]], columns: list[str] | None = None, width: int | None = None) -> str:
    """Rows as a table for people: one line per row; durations and sizes humanised (by the
    column's name), nested JSON summarised, every cell one line, cleaned and cut to 60
    characters; with `width`, the widest columns are cut further until a line fits in it."""
    from tabulate import tabulate

    rows = list(rows)
    if not rows:
        return "(none)"
    columns = columns or list(dict.fromkeys(k for row in rows for k in row))
    body = [[_cell(c, row.get(c)) for c in columns] for row in rows]
    if width:
        body = _fit(columns, body, width)
    return str(tabulate(body, headers=columns, tablefmt="simple", disable_numparse=True))


def _fit(columns: list[str], body: list[list[str]], width: int, narrowest: int = 8) -> list[list[str]]:
    """Cut cells so that a row (columns two spaces apart) fits in `width`: always the widest
    column loses a character, never one below `narrowest` (or its header) wide. A column is at
    least its header and two wide (tabulate's padding of headers)."""
    widths = [max([len(c) + 2, *(len(row[i]) for row in body)]) for i, c in enumerate(columns)]
    floor = [max(narrowest, len(c) + 2) for c in columns]
    excess = sum(widths) + 2 * (len(columns) - 1) - width
    while excess > 0:
        i = max(range(len(widths)), key=lambda k: widths[k] - floor[k])
        if widths[i] <= floor[i]:
            break
        widths[i] -= 1
        excess -= 1
    return [[cell if len(cell) <= w else cell[: w - 1] + "…" for cell, w in zip(row, widths, strict=False)] for row in body]


def _cell(column: str, value: object, width: int = 60) -> str:
    unit = _unit(column)
    if unit and isinstance(value, (int, float)) and not isinstance(value, bool):
        text = human_size(value) if unit == "bytes" else human_duration(value / 1000 if unit == "ms" else value)
    else:
        text = summary(value)
    text = clean(" ".join(text.split()))
    return text if len(text) <= width else text[: width - 1] + "…"


# Columns whose numbers are durations in seconds; any column ending in "ms" (durationMs, pingMs,
# duration_ms) is milliseconds; size/bytes columns are byte counts.
_SECONDS = {"idlefor", "idletimeout", "timeout", "seconds", "elapsed"}


def _unit(column: str) -> str | None:
    name = column.replace("_", "").lower()
    if name.endswith("ms"):
        return "ms"
    if name in _SECONDS or name.endswith("seconds"):
        return "s"
    if name in ("size", "bytes") or name.endswith(("bytes", "size")):
        return "bytes"
    return None


def human_duration(seconds: float) -> str:
    """0.4 ms, 12 ms, 1.5 s, 2m 05s, 3h 20m, 2d 4h."""
    if seconds < 1:
        ms = seconds * 1000
        return f"{ms:.1f} ms" if ms < 10 and ms != int(ms) else f"{ms:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h {minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h"


def human_size(count: float) -> str:
    """512 B, 1.5 KiB, 20 MiB, 3.2 GiB (binary units, as `ls -h`)."""
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" or size >= 10 else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def summary(value: object, depth: int = 0) -> str:
    """A value in one short line: text as it is, yes/no, lists joined (objects by their name),
    objects as `key: value` pairs; deeper levels as {…} and [n items]."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, list):
        if not value:
            return ""
        if depth:
            return f"[{len(value)} item{'s' if len(value) != 1 else ''}]"
        return ", ".join(_named(v) for v in value)
    if isinstance(value, dict):
        if depth:
            return "{…}" if value else "{}"
        return ", ".join(f"{k}: {summary(v, depth + 1)}" for k, v in value.items())
    return str(value)


def _named(item: object) -> str:
    """One list item: an object by its name (tools, prompts' arguments, servers), else summarised."""
    if isinstance(item, dict):
        for key in ("name", "uri", "id", "text"):
            value = item.get(key)
            if isinstance(value, str):
                return value
    return summary(item, 1)


# One prompt at a time on the terminal: whoever holds _prompt_lock is showing a question and
# waiting for its answer. Messages from other threads meanwhile are held back and shown after the
# answer, so they neither interleave with the question nor wipe its line.
_prompt_lock = threading.RLock()
_state = threading.Lock()
_prompt_owner: int | None = None
_held: list[str] = []
_status_shown = False  # a status line (progress) stands on the terminal's last line


@contextmanager
def prompt_turn() -> Iterator[None]:
    """Hold the terminal for one question and its answer."""
    global _prompt_owner
    with _prompt_lock:
        with _state:
            outer = _prompt_owner
            _prompt_owner = threading.get_ident()
        try:
            yield
        finally:
            with _state:
                _prompt_owner = outer
                held = _held[:] if outer is None else []
                if outer is None:
                    _held.clear()
            for message in held:
                click.echo(message, err=True)


def note(message: str) -> None:
    """A message for people: stderr, never stdout, control characters made visible."""
    message = clean(message)
    with _state:
        if _prompt_owner is not None and _prompt_owner != threading.get_ident():
            _held.append(message)
            return
    _end_status()
    click.echo(message, err=True)


def end_status() -> None:
    """Erase a standing status line before something else is written to the terminal."""
    _end_status()


def _end_status() -> None:
    """Erase a standing status line, so that a message after it starts on a clean line."""
    global _status_shown
    if _status_shown:
        _status_shown = False
        click.echo("\r\x1b[2K", err=True, nl=False)


# -q: warnings are left out; errors (report_error) and answers to questions still show.
QUIET = False


def warn(message: str) -> None:
    """A warning for people ("llmc: warning: ..." on stderr), silenced by -q."""
    if not QUIET:
        note(f"llmc: warning: {clean_line(message)}")


def status_line(message: str) -> None:
    """A line that replaces itself (progress; "" clears it): drawn only while no prompt is open,
    cut to the terminal's width (a line that wrapped could not be rewritten)."""
    with _state:
        if _prompt_owner is not None:
            return
    message = clean(message)
    try:
        width = os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError):
        width = 0
    if width and len(message) >= width:
        message = message[: width - 2] + "…"
    global _status_shown
    _status_shown = bool(message)
    click.echo(f"\r\x1b[2K{message}", err=True, nl=False)


def use_color() -> bool:
    return sys.stderr.isatty() and "NO_COLOR" not in os.environ


def raise_failures(failures: list[Any], total: int) -> None:
    """After a listing across servers: each failed server is one line on stderr. When every
    server failed the same way, exit with that error's own code (an expired login is 9, a
    timeout 7); when only some did, 5, so a CI step notices while the others' results stand."""
    if not failures:
        return
    for failure in failures:  # each line says which server it is about
        if not re.search(rf"\b{re.escape(failure.server)}\b", failure.error.message):
            failure.error.message = f"{failure.server}: {failure.error.message}"
    codes = {f.error.exit_code for f in failures}
    if len(failures) == total and len(codes) == 1:
        for failure in failures[1:]:
            note(f"llmc: {failure.error.message}")
        raise failures[0].error
    for failure in failures:
        note(f"llmc: {failure.error.message}")

    raise ConnectionFailed(f"{len(failures)} of {total} server(s) failed")


def report_error(exc: LlmcError) -> None:
    if getattr(exc, "approval", None) is not None:  # a confirmation nobody could give: say how to pre-approve
        policy.with_hint(exc)
    prefix = click.style("llmc:", fg="red", bold=True) if use_color() else "llmc:"
    _end_status()
    click.echo(f"{prefix} {clean_line(exc.message)}", err=True)
    for line in exc.details.get("stderr") or []:
        click.echo(f"  server stderr | {clean(str(line))}", err=True)
