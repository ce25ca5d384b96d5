"""Tables for people (--format table): durations and sizes humanised, nested JSON summarised
on one line, text from servers cleaned; every listing command has one."""

from __future__ import annotations

import itertools
import shlex

import click
import pytest

from llmc_cli.cli.output import _listing_format, human_duration, human_size, summary, table
from tests.helpers import llmc, sdk_server

SDK = shlex.join(sdk_server("sdk_server.py"))
HOSTILE = shlex.join(sdk_server("hostile_text.py"))

DURATIONS = [
    (0.0004, "0.4 ms"),
    (0.012, "12 ms"),
    (1.5, "1.5 s"),
    (42, "42 s"),
    (125, "2m 05s"),
    (12000, "3h 20m"),
    (187200, "2d 4h"),
]
SIZES = [(512, "512 B"), (1536, "1.5 KiB"), (20 * 1024**2, "20 MiB"), (3.2 * 1024**3, "3.2 GiB")]
SUMMARIES = [
    (None, ""),
    (True, "yes"),
    (False, "no"),
    (3, "3"),
    ("text", "text"),
    ([], ""),
    (["a", "b"], "a, b"),
    ([{"name": "path", "required": True}, {"name": "mode"}], "path, mode"),  # objects by their name
    ([{"type": "text", "text": "hello"}], "hello"),  # content blocks by their text
    ({"name": "srv", "version": "1.0"}, "name: srv, version: 1.0"),
    ({"a": {"b": 1}, "c": [1, 2, 3], "d": None}, "a: {…}, c: [3 items], d: "),
]


@pytest.mark.parametrize("seconds,expected", DURATIONS, ids=[e for _, e in DURATIONS])
def test_durations(seconds, expected):
    assert human_duration(seconds) == expected


@pytest.mark.parametrize("count,expected", SIZES, ids=[e for _, e in SIZES])
def test_sizes(count, expected):
    assert human_size(count) == expected


@pytest.mark.parametrize("value,expected", SUMMARIES, ids=[repr(v)[:30] for v, _ in SUMMARIES])
def test_summaries(value, expected):
    assert summary(value) == expected


def test_columns_decide_units_and_cells_are_one_clean_line():
    text = table(
        [
            {
                "durationMs": 1500,
                "duration_ms": 12,
                "idleFor": 125,
                "size": 2048,
                "description": "two\nlines \x1b[2J and a very long tail " + "x" * 80,
                "count": 1500,
            }
        ]
    )
    header, _, row = text.splitlines()
    assert header.split() == ["durationMs", "duration_ms", "idleFor", "size", "description", "count"]
    for expected in ("1.5 s", "12 ms", "2m 05s", "2.0 KiB", "two lines \\x1b[2J and", "…", "1500"):
        assert expected in row
    assert "\x1b" not in text and len(text.splitlines()) == 3


# Every command that lists things, with what it needs to list something here.
LISTINGS = [
    ["tools", "list", "--stdio", SDK],
    ["tools", "lint", "--stdio", SDK],
    ["tools", "search", "--stdio", SDK, "echo"],
    ["resources", "list", "--stdio", SDK],
    ["resources", "templates", "--stdio", SDK],
    ["prompts", "list", "--stdio", SDK],
    ["ping", "--stdio", SDK],
    ["servers", "list"],
    ["profiles", "list"],
    ["auth", "status"],
    ["session", "list"],
    ["conversations", "list"],
    ["audit", "tail"],
    ["serve", "token", "list"],
]


def test_every_listing_command_has_a_table_and_every_list_command_is_here():
    from llmc_cli.cli.main import cli

    def commands(group: click.Group, ctx: click.Context, path: list[str]):
        for name in group.list_commands(ctx):
            sub = group.get_command(ctx, name)
            if isinstance(sub, click.Group):
                yield from commands(sub, click.Context(sub, info_name=name, parent=ctx), [*path, name])
            elif sub is not None:
                yield [*path, name], sub

    listed = {" ".join(itertools.takewhile(lambda w: not w.startswith("-"), argv)) for argv in LISTINGS}
    for path, command in commands(cli, click.Context(cli, info_name="llmc"), []):
        if path[-1] in ("list", "templates", "status", "tail", "search"):
            assert " ".join(path) in listed, f"{' '.join(path)}: add it to LISTINGS"
        if " ".join(path) in listed:
            fmt = next((p for p in command.params if p.name == "fmt"), None)
            assert fmt is not None and "table" in fmt.type.choices, " ".join(path)  # type: ignore[attr-defined]
            # one rendering path: no fixed default, a table on a terminal and JSON when piped
            assert fmt.default is None and fmt.callback is _listing_format, " ".join(path)


@pytest.mark.parametrize("argv", LISTINGS, ids=[" ".join(a[:2]) for a in LISTINGS])
def test_a_listing_as_a_table(argv):
    proc = llmc(*argv, "--format", "table")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    if not lines:  # an empty listing prints nothing and says so on stderr
        assert proc.stderr.startswith("llmc: no "), proc.stderr
    else:
        assert set(lines[1].replace(" ", "")) == {"-"}, proc.stdout  # a header, then its rule


def test_server_text_in_a_table_is_cleaned():
    proc = llmc("tools", "list", "--stdio", HOSTILE, "--format", "table")
    assert proc.returncode == 0, proc.stderr
    assert "\\x1b" in proc.stdout and not any(c in proc.stdout for c in "\x1b\x07\x9b\u202e")
