"""The README's five-minute tour, run as written, shows what the README says it shows (issue 39):
each command line of the tour runs in a fresh world (tests/docs/test_readme.py's World: a temp
HOME, the example servers and addresses swapped for the test peers), a listing the README shows
as on a terminal runs on a pseudo-terminal, and the output is held against the README's transcript
below the tour: the JSON fields it shows (a subset; "…" for a value that varies), a table's header
and the cells of the rows it shows ("…" for any text, a cell cut with "…" by its start or end),
and the plain lines it shows (stderr or stdout)."""

from __future__ import annotations

import json
import re
import shlex
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_output_modes import shown
from tests.docs.test_readme import README, SUBSTITUTIONS, World, code_blocks
from tests.terminal import Terminal

pytestmark = pytest.mark.e2e  # the npm filesystem server, a pseudo-terminal

SECTION = "A five-minute tour"
ANY = "…"


def tour() -> tuple[list[str], list[tuple[str, bool, list[str]]]]:
    """(the tour's command lines, the transcript: (command, on a terminal, the lines shown))."""
    blocks = [b for b in code_blocks(README.read_text(encoding="utf-8")) if b.section == SECTION]
    assert len(blocks) == 2, "the tour: its commands, then what they show"
    commands = [line.text.strip() for line in blocks[0].lines]
    transcript: list[tuple[str, bool, list[str]]] = []
    for line in blocks[1].lines:
        if line.text.startswith("$ "):
            command, _, comment = line.text[2:].partition("  #")
            transcript.append((command.strip(), "terminal" in comment, []))
        else:
            transcript[-1][2].append(line.text)
    return commands, transcript


def matches(shown_value: Any, actual: Any) -> bool:
    """Whether the README's value is the actual one: objects by the keys shown, lists item by
    item, "…" any value."""
    if shown_value == ANY:
        return True
    if isinstance(shown_value, dict):
        return isinstance(actual, dict) and all(k in actual and matches(v, actual[k]) for k, v in shown_value.items())
    if isinstance(shown_value, list):
        return (
            isinstance(actual, list)
            and len(shown_value) == len(actual)
            and all(matches(s, a) for s, a in zip(shown_value, actual, strict=True))
        )
    return bool(shown_value == actual)


def cells(line: str, starts: list[int]) -> list[str]:
    ends = [*starts[1:], None]
    return [line[a:b].strip() if len(line) > a else "" for a, b in zip(starts, ends, strict=True)]


def cell_matches(shown_cell: str, actual: str) -> bool:
    if shown_cell == ANY:
        return True
    if shown_cell.startswith(ANY):
        return actual.endswith(shown_cell[1:])
    if shown_cell.endswith(ANY):
        return actual.startswith(shown_cell[:-1]) or actual == shown_cell
    return shown_cell == actual


def check_table(where: str, lines: list[str], screen: str) -> None:
    out = [line for line in shown(screen).splitlines() if line.strip()]
    header = next((i for i, line in enumerate(out) if line.split() == lines[0].split()), None)
    assert header is not None, f"{where}: no header {lines[0].split()} in\n{screen}"
    starts = [m.start() for m in re.finditer(r"\S+", lines[0])]
    actual_starts = [m.start() for m in re.finditer(r"\S+", out[header])]
    rows = [cells(line, actual_starts) for line in out[header + 2 :]]  # past the rule of dashes
    for line in lines[1:]:
        want = cells(line, starts)
        assert any(all(cell_matches(w, a) for w, a in zip(want, row, strict=True)) for row in rows), (
            f"{where}: no row like {want} in\n{screen}"
        )


def test_the_tour_shows_what_the_readme_says(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import shutil
    import tempfile

    for name in [n for n in os.environ if n.startswith(("LLMC_", "XDG_"))]:
        monkeypatch.delenv(name)  # the pseudo-terminal's llmc gets this environment too: the world's HOME decides
    monkeypatch.delenv("COLUMNS", raising=False)  # the terminal's own width (200) decides what a table shows
    monkeypatch.delenv("LINES", raising=False)
    commands, transcript = tour()
    # every llmc line of the tour is in the transcript, in order (the others show nothing)
    assert [c for c, _, _ in transcript] == [c for c in commands if c.startswith("llmc ")]
    shows = {command: (on_terminal, lines) for command, on_terminal, lines in transcript}
    root = Path(tempfile.mkdtemp(prefix="rd", dir="/tmp"))  # short, as /srv/data: a table shows it whole
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, root, True)
        world = World(root, SECTION, stack)
        data = str(world.data)
        for command in commands:
            where = f"README tour: {command}"
            on_terminal, lines = shows.get(command, (False, []))
            run = command
            for example, replacement in SUBSTITUTIONS:
                if example in run:
                    run = run.replace(example, replacement(world))
            if on_terminal:
                with Terminal(*shlex.split(run)[1:], env=world.env, stdout_on_terminal=True) as term:
                    code = term.wait()
                assert code == 0, f"{where}\n{term.screen}"
                check_table(where, lines, term.screen.replace(data, "/srv/data"))
                continue
            proc = world.shell(run, where)
            stdout, stderr = proc.stdout.replace(data, "/srv/data"), proc.stderr.replace(data, "/srv/data")
            for line in lines:
                if line.startswith("{"):
                    assert matches(json.loads(line), json.loads(stdout)), f"{where}: {line}\nnot in\n{stdout}"
                else:
                    assert line in stdout.splitlines() + stderr.splitlines(), f"{where}: {line!r}\n{stdout}\n{stderr}"
