#!/usr/bin/env python3
"""Regenerate completions/ (bash, zsh, fish) and man/ (roff, section 1) from the Click tree.

    python scripts/gen_completions_and_man.py                  # write the files
    python scripts/gen_completions_and_man.py --check          # exit 1 and name the stale files
    python scripts/gen_completions_and_man.py --check --exact  # the same, byte for byte

Completion scripts are Click's own (what `llmc completion SHELL` prints): they call back into
llmc on <TAB>, where the shell_complete callbacks add profile, server and tool names. Man pages
come from a small generator here, walking the real commands with group.get_command (the root
group loads its subcommands lazily, so a walker of `group.commands` would miss them). EXAMPLES,
ENVIRONMENT and FILES are written here (tests check every example parses and every LLMC_*
variable the code reads is listed).

--check compares what the files say (the pages, their options, subcommands, sections and
examples; which shell each completion script is for), not how Click formatted them: Click's help
and script formatting differ between Click versions, and a check that fails on a newer Click
while every command and option is documented would only teach people to ignore it. --exact
compares byte for byte (what regenerating with this Click would change).
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmc_cli import __version__  # noqa: E402
from llmc_cli.cli.completion import completion_script  # noqa: E402
from llmc_cli.cli.main import cli  # noqa: E402

PROG = "llmc"
COMPLETION_FILES = {"bash": "llmc.bash", "zsh": "_llmc", "fish": "llmc.fish"}


def completions() -> dict[str, str]:
    """completions/FILE -> Click's completion script for that shell."""
    return {f"completions/{filename}": completion_script(shell) for shell, filename in COMPLETION_FILES.items()}


# Command path (as in the man page's name) -> (what it does, the command line). Shown in the
# page's EXAMPLES section; a test parses every line against the Click tree.
# llmc_cli/cli/examples.py holds them (each command's --help ends with them), keyed by man page.
from llmc_cli.cli.examples import EXAMPLES as _BY_COMMAND  # noqa: E402
from llmc_cli.cli.examples import MARK as _EXAMPLES_MARK  # noqa: E402

EXAMPLES: dict[str, list[tuple[str, str]]] = {
    "-".join(["llmc", *path.split()]): examples for path, examples in _BY_COMMAND.items()
}

# Every LLMC_* variable the code reads (a test greps the package for them), and the others that
# change what llmc does.
ENVIRONMENT: list[tuple[str, str]] = [
    ("LLMC_PROFILE", "The profile to use when -p is not given (a name in the profiles directory, or a path)."),
    ("LLMC_CONFIG_DIR", "The config directory (default $XDG_CONFIG_HOME/llmc, else ~/.config/llmc)."),
    ("LLMC_STATE_DIR", "The state directory (default $XDG_STATE_HOME/llmc, else ~/.local/state/llmc)."),
    ("LLMC_SESSION", "Use the servers this session keeper holds (as --session)."),
    ("LLMC_STATE_URL", "A PostgreSQL URL for shared state (audit chain, rate windows); wins over [state] url."),
    ("LLMC_REPLICA_LEASE", "Seconds a gateway replica's lease in the state database lasts (default 30); a replica "
                           "that has not renewed it that long is gone and its open calls are closed as lost."),
    ("LLMC_APPROVAL_KEY", "The key of approved call hashes, shared by machines that share approvals "
                          "(at least 32 characters); else approval.key in the state directory."),
    ("LLMC_OTEL", "1 turns on OpenTelemetry export (as --otel); the standard OTEL_* variables configure it."),
    ("LLMC_FORMAT", "A listing's format when --format is not given: json, jsonl, table or auto (a table on a "
                    "terminal, JSON when piped); wins over the profile's [output] format."),
    ("LLMC_MAX_MESSAGE_BYTES", "The largest message accepted from a server, in bytes (default 64 MiB)."),
    ("LLMC_PROTECTED_PATHS", "Set by llmc for the stdio servers it starts: its own config and state "
                             "directories, which `llmc serve workspace` refuses to touch."),
    ("LLMC_REQUIRE_SANDBOX", "Set to 1 by a gateway with principals or auth for the llmc it starts as a server "
                             "(a nested gateway or keeper): it refuses unsandboxed third-party stdio servers "
                             "too, at any depth."),
    ("LLMC_EVENT_LOOP", "asyncio: `llmc serve --http` runs on asyncio's event loop even when uvloop (the `fast` "
                        "extra) is installed, whose loop it uses otherwise."),
    ("LLMC_WORKSPACE_PROCESS", "Set by the workspace server on every process it starts, to find and stop them."),
    ("_LLMC_COMPLETE", "Set by the completion scripts when the shell asks llmc to complete a word."),
    ("XDG_CONFIG_HOME, XDG_STATE_HOME", "Base directories when LLMC_CONFIG_DIR / LLMC_STATE_DIR are not set."),
    ("OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, GOOGLE_API_KEY",
     "The providers' API keys (or the variable [llm] api_key_env names)."),
    ("BROWSER", "A browser for `llmc auth login` (also makes a login possible without a terminal)."),
    ("NO_COLOR", "No colour on stderr."),
    ("COLUMNS", "The terminal's width for tables (else the terminal's own)."),
]

FILES: list[tuple[str, str]] = [
    ("$LLMC_CONFIG_DIR/profiles/NAME.toml", "Profiles: servers, policy, LLM settings (config directory: "
                                           "$LLMC_CONFIG_DIR, else $XDG_CONFIG_HOME/llmc, else ~/.config/llmc)."),
    ("$LLMC_STATE_DIR/audit.jsonl", "The hash-chained audit log (and audit.jsonl.anchor); state directory: "
                                    "$LLMC_STATE_DIR, else $XDG_STATE_HOME/llmc, else ~/.local/state/llmc."),
    ("$LLMC_STATE_DIR/oauth/", "OAuth tokens and registered clients, one 0600 file per authorization server and resource."),
    ("$LLMC_STATE_DIR/servers.json", "Per server: protocol era, transport, version, remembered HTTP sessions."),
    ("$LLMC_STATE_DIR/sessions/", "Session keepers' sockets (NAME.sock) and logs (NAME.log)."),
    ("$LLMC_STATE_DIR/conversations/", "Conversations `llmc ask` saved."),
    ("$LLMC_STATE_DIR/approval.key", "The key of approved call hashes (unless LLMC_APPROVAL_KEY is set)."),
    ("$LLMC_STATE_DIR/ratelimit.json", "Rate-limit windows."),
    ("$LLMC_STATE_DIR/profile-cache/", "Profiles that validated, so they load faster (safe to delete)."),
    ("$LLMC_STATE_DIR/completion-tools.json", "Tool names `llmc tools list` has seen, for completion."),
    ("$LLMC_STATE_DIR/locks/", "Locks held while a file is read, changed and written."),
]


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
    help_text, epilog = _clean(command.help), _clean((command.epilog or "").partition(_EXAMPLES_MARK)[0])
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
    examples = EXAMPLES.get(title, [])
    if examples:
        lines.append(".SH EXAMPLES")
        for text, line in examples:
            lines += [".PP", _esc(text) + ":", ".PP", ".RS 4", ".nf", _esc(line), ".fi", ".RE"]
    if len(path) == 1:
        lines.append(".SH ENVIRONMENT")
        for name, text in ENVIRONMENT:
            lines += [".TP", f"\\fB{_esc(name)}\\fR", _esc(text)]
        lines.append(".SH FILES")
        for name, text in FILES:
            lines += [".TP", f"\\fI{_esc(name)}\\fR", _esc(text)]
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


def meaning(name: str, text: str) -> object:
    """What a generated file says, without Click's formatting: for a man page its sections, the
    option flags and subcommands listed and the example lines; for a completion script, which
    shell asks llmc, through which variable."""
    if name.startswith("completions/"):
        return sorted(set(re.findall(r"_LLMC_COMPLETE=\w+", text)))
    sections: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith(".SH "):
            current = line[4:]
            sections[current] = []
        elif current in ("OPTIONS", "COMMANDS", "ENVIRONMENT", "FILES"):  # the names; their help is Click's
            sections[current] += re.findall(r"^\\f[BI](.*?)\\fR", line)
        elif current != "SYNOPSIS" and not line.startswith("."):  # Click writes the usage line
            sections.setdefault(current, []).append(line)  # "": text before any section
    return sections


def stale(root: Path = ROOT, exact: bool = False) -> list[str]:
    """Files that differ from what the Click tree generates now, plus leftovers no command owns.
    exact=False: differ in what they say (see `meaning`), not in how Click formatted it."""
    wanted = generated()

    def same(name: str, text: str) -> bool:
        old = (root / name).read_text(encoding="utf-8")
        return old == text if exact else meaning(name, old) == meaning(name, text)

    out = [name for name, text in wanted.items() if not (root / name).exists() or not same(name, text)]
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
    if argv[1:2] == ["--check"] and argv[2:] in ([], ["--exact"]):
        names = stale(exact=argv[2:] == ["--exact"])
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
