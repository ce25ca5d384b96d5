"""`llmc tools`: `list` is in cli/tools.py, the group's other commands load when they run (its
registry, TOOLS). The group still offers and runs every command as before."""

from __future__ import annotations

from pathlib import Path

import click

from llmc_cli.cli.main import cli
from llmc_cli.cli.tools import TOOLS, tools
from tests.helpers import llmc

EVERY = ["diff", "export", "lint", "list", "lock", "scan", "search", "show"]


def test_the_group_lists_and_finds_every_command(isolated_dirs: Path) -> None:
    assert cli.get_command(click.Context(cli), "tools") is tools  # as a command line finds it
    ctx = click.Context(tools)
    assert tools.list_commands(ctx) == EVERY
    for name in EVERY:
        command = tools.get_command(ctx, name)
        assert isinstance(command, click.Command) and command.name == name
        # the root's -p/-v/-q and llmc's own -h, as every command gets them
        opts = {o for p in command.params for o in getattr(p, "opts", [])}
        helping = command.get_help_option(click.Context(command))
        assert {"-p", "-v", "-q"} <= opts and helping is not None and "-h" in helping.opts, name
    assert set(TOOLS) == set(EVERY) - {"list"}
    helped = llmc("tools", "--help")
    assert helped.returncode == 0
    rows = helped.stdout.split("Commands:\n")[1].split("\n\n")[0].splitlines()
    assert [row.split()[0] for row in rows] == EVERY  # each with its short help, as click words it


def test_a_command_of_the_registry_runs_with_its_examples_and_errors(isolated_dirs: Path) -> None:
    helped = llmc("tools", "show", "--help")
    assert helped.returncode == 0 and "llmc tools show fs.write_file" in helped.stdout  # examples.py's "tools show"
    wrong = llmc("tools", "lint", "--provider", "nope")
    assert wrong.returncode == 2 and "Invalid value for '--provider'" in wrong.stderr
    unknown = llmc("tools", "bogus")
    assert unknown.returncode == 2 and "No such command 'bogus'." in unknown.stderr
