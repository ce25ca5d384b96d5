#!/usr/bin/env python3
"""Regenerate completions/ (bash, zsh, fish) and man/ (roff, section 1) from the Click tree.

    python scripts/gen_completions_and_man.py          # write the files
    python scripts/gen_completions_and_man.py --check  # exit 1 and name the stale files

Completion scripts are Click's own (`_LLMC_COMPLETE=<shell>_source llmc`): they call back into
llmc on <TAB>, where the shell_complete callbacks add profile, server and tool names. Man pages
come from a small generator here, walking the real commands with group.get_command (the root
group loads its subcommands lazily, so a walker of `group.commands` would miss them).
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import click
from click.shell_completion import get_completion_class

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmc_cli import __version__  # noqa: E402
from llmc_cli.cli.main import cli  # noqa: E402

PROG = "llmc"
COMPLETION_FILES = {"bash": "llmc.bash", "zsh": "_llmc", "fish": "llmc.fish"}


def completions() -> dict[str, str]:
    """completions/FILE -> Click's completion script for that shell."""
    out = {}
    for shell, filename in COMPLETION_FILES.items():
        cls = get_completion_class(shell)
        assert cls is not None, shell
        out[f"completions/{filename}"] = cls(cli, {}, PROG, "_LLMC_COMPLETE").source()
    return out


def man_pages() -> dict[str, str]:
    """man/NAME.1 -> roff page, for llmc and every subcommand at every depth."""
    pages: dict[str, str] = {}

    def walk(command: click.Command, ctx: click.Context) -> None:
        subcommands = []
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    subcommands.append((name, sub))
        path = ctx.command_path.split()
        pages[f"man/{'-'.join(path)}.1"] = _page(command, ctx, path, subcommands)
        for name, sub in subcommands:
            walk(sub, click.Context(sub, info_name=name, parent=ctx, **sub.context_settings))

    walk(cli, click.Context(cli, info_name=PROG, **cli.context_settings))
    return pages


def _page(command: click.Command, ctx: click.Context, path: list[str],
          subcommands: list[tuple[str, click.Command]]) -> str:
    title = "-".join(path)
    short = command.get_short_help_str(limit=200) if len(path) > 1 else (command.help or "").split("\n")[0]
    lines = [
        f'.TH "{title.upper()}" "1" "" "{PROG} {__version__}" "{PROG} manual"',
        ".SH NAME", f"{_esc(title)} \\- {_esc(short)}",
        ".SH SYNOPSIS", f".B {_esc(' '.join(path))}", _esc(" ".join(command.collect_usage_pieces(ctx))),
    ]
    help_text, epilog = _clean(command.help), _clean(command.epilog)
    if help_text:
        lines += [".SH DESCRIPTION", *_paragraphs(help_text)]
    # Arguments are in the synopsis; options get a paragraph each.
    options = [r for p in command.get_params(ctx) if isinstance(p, click.Option) and (r := p.get_help_record(ctx))]
    if options:
        lines.append(".SH OPTIONS")
        for opts, text in options:
            lines += [".TP", f"\\fB{_esc(opts)}\\fR", _esc(text) if text else "\\&"]
    if subcommands:
        lines.append(".SH COMMANDS")
        for name, sub in subcommands:
            lines += [".TP", f"\\fB{_esc(name)}\\fR",
                      f"{_esc(sub.get_short_help_str(limit=200))} See \\fB{_esc('-'.join([*path, name]))}\\fR(1)."]
    if epilog:
        heading, _, body = epilog.partition("\n")
        lines += [f".SH {_esc(heading.rstrip(':').upper())}", ".nf", *(_esc(l) for l in body.splitlines()), ".fi"]
    see_also = ["-".join(path[:-1])] if len(path) > 1 else []
    see_also += ["-".join([*path, name]) for name, _ in subcommands]
    if see_also:
        lines += [".SH SEE ALSO", ", ".join(f"\\fB{_esc(name)}\\fR(1)" for name in see_also)]
    return "\n".join(lines) + "\n"


def _clean(text: str | None) -> str:
    """Click help text without its \\b (no-rewrap) markers."""
    text = inspect.cleandoc(text or "")
    return "\n".join(line for line in text.splitlines() if line.strip() != "\b").strip()


def _paragraphs(text: str) -> list[str]:
    out = []
    for block in text.split("\n\n"):
        out += [".PP", *(_esc(line.strip()) for line in block.splitlines() if line.strip())]
    return out


def _esc(text: str) -> str:
    """Roff-safe text: backslashes and hyphens escaped, no line starting with a control character."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + text if text.startswith((".", "'")) else text


def generated() -> dict[str, str]:
    return {**completions(), **man_pages()}


def stale(root: Path = ROOT) -> list[str]:
    """Files that differ from what the Click tree generates now, plus leftovers no command owns."""
    wanted = generated()
    out = [name for name, text in wanted.items()
           if not (root / name).exists() or (root / name).read_text(encoding="utf-8") != text]
    existing = {f"man/{p.name}" for p in (root / "man").glob("*.1")} | {
        f"completions/{p.name}" for p in (root / "completions").glob("*") if p.is_file()}
    return sorted(out + sorted(existing - set(wanted)))


def write(root: Path = ROOT) -> list[str]:
    wanted = generated()
    for name, text in wanted.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    leftovers = [p for p in (root / "man").glob("*.1") if f"man/{p.name}" not in wanted]
    for path in leftovers:
        path.unlink()
    return sorted(wanted)


def main(argv: list[str]) -> int:
    if argv[1:] == ["--check"]:
        names = stale()
        for name in names:
            print(f"stale: {name} (run python scripts/gen_completions_and_man.py)", file=sys.stderr)
        return 1 if names else 0
    if argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    print(f"wrote {len(write())} files", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
