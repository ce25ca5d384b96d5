"""The application context: what the root command's options decide for every command below it,
read as one typed object (`app_of(ctx)` or `@pass_app`) instead of a dict read with several
spellings."""

from __future__ import annotations

import sys
from dataclasses import field
from typing import TYPE_CHECKING

import click

from llmc_cli import cli, config, telemetry
from llmc_cli.cli import output
from llmc_cli.model import dataclass

if TYPE_CHECKING:
    from llmc_cli.config.profiles import LoadedProfile


@dataclass
class App:
    profile: str | None = None  # -p / LLMC_PROFILE: a name or a path; None: the default profile
    verbose: int = 0  # -v count: server stderr and logs on stderr
    quiet: bool = False  # -q: no warnings on stderr
    # Notices from the protocol layer (server state lost), also put into a command's JSON output
    # for scripts that do not read stderr.
    warnings: list[str] = field(default_factory=list)

    @property
    def interactive(self) -> bool:
        """A person can answer a question (a confirmation, an elicitation) on this terminal."""

        return interactive()

    def load_profile(self) -> LoadedProfile:

        return config.load_profile(self.profile)


def interactive() -> bool:
    """A person can answer: questions go to stderr and answers come from stdin, both a terminal.
    (Here, not in cli/prompt.py, which the questions need: that loads after a command's servers
    start.)"""

    return sys.stdin.isatty() and sys.stderr.isatty()


pass_app = click.make_pass_decorator(App, ensure=True)


def app_of(ctx: click.Context) -> App:
    """The App of this invocation (the root command made it; a fresh default one otherwise)."""
    return ctx.ensure_object(App)


def start_app(ctx: click.Context, *, profile: str | None, verbose: int, quiet: bool, otel: bool) -> None:
    """The root command's options, for the command about to run: its App, telemetry when asked
    for (--otel, LLMC_OTEL or OTEL_* variables), -q."""
    ctx.obj = App(profile=profile, verbose=verbose, quiet=quiet)
    if otel or telemetry.env_requested():
        # the telemetry seam (cli/common.py, through the package's interface): the exporters load there
        cli.start_telemetry(f"llmc {ctx.invoked_subcommand or ''}".strip())
    if quiet:
        output.QUIET = True


def set_global(ctx: click.Context, name: str, value: object) -> None:
    """-p, -v or -q given after the subcommand (`global_profile`, `global_verbose`,
    `global_quiet`): the same as before it (a later -p wins, -v adds up)."""
    app = app_of(ctx)
    if name == "global_profile":
        app.profile = str(value)
    elif name == "global_verbose":
        app.verbose += int(value)  # type: ignore[call-overload]
    else:
        app.quiet = output.QUIET = True
