"""Issue 39, "Help where people look": every command's --help ends with real examples (the same
lines its man page shows); each example parses against the commands (tests/profiles/
test_completions_man.py checks the lines themselves)."""

from __future__ import annotations

import click

from llmc_cli.cli.examples import EXAMPLES, MARK
from tests.helpers import llmc


def command_paths() -> list[str]:
    from llmc_cli.cli.main import cli

    paths: list[str] = []

    def walk(command: click.Command, ctx: click.Context, path: list[str]) -> None:
        paths.append(" ".join(path))
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, click.Context(sub, info_name=name, parent=ctx), [*path, name])

    walk(cli, click.Context(cli, info_name="llmc"), [])
    return paths


def test_every_command_has_examples() -> None:
    paths = command_paths()
    assert len(paths) > 50
    missing = [p or "llmc" for p in paths if len(EXAMPLES.get(p, [])) < 1]
    assert not missing, missing
    assert not set(EXAMPLES) - set(paths), set(EXAMPLES) - set(paths)  # no examples of a command gone


def test_help_ends_with_the_examples() -> None:
    for path in ["", "call", "tools list", "servers add", "serve token create", "audit tail"]:
        shown = llmc(*path.split(), "--help")
        assert shown.returncode == 0, shown.stderr
        tail = shown.stdout[shown.stdout.rindex(MARK) :]
        for text, line in EXAMPLES[path]:
            assert f"# {text}" in tail and line in tail, (path, line)


def test_servers_remove_takes_many_names_all_or_none(isolated_dirs) -> None:
    for name in ("a", "b", "c"):
        assert llmc("servers", "add", name, "--", "true").returncode == 0
    refused = llmc("servers", "remove", "a", "zz")
    assert refused.returncode == 2 and "has no server 'zz'" in refused.stderr
    assert [s["name"] for s in llmc("servers", "list", "--format", "json").json()["servers"]] == ["workspace", "a", "b", "c"]
    removed = llmc("servers", "remove", "a", "b", "c")
    assert removed.returncode == 0, removed.stderr
    assert removed.json()["removed"] == ["a", "b", "c"]
    assert [s["name"] for s in llmc("servers", "list", "--format", "json").json()["servers"]] == ["workspace"]


def test_a_group_without_its_subcommand_shows_its_examples() -> None:
    """The examples are put into a command's help when the help is made (cli/main.py
    ExamplesContext), also where click shows it itself: a group named without a subcommand."""
    for path in ["servers", "tools", "serve token"]:
        shown = llmc(*path.split())
        text = shown.stdout + shown.stderr  # click 8.2 shows it on stderr (exit 2), 8.1 on stdout
        tail = text[text.rindex(MARK) :] if MARK in text else ""
        assert tail and all(line in tail for _, line in EXAMPLES[path]), (path, shown.stdout[-500:], shown.stderr[-500:])
