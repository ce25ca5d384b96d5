"""The application context: what the root command's options decide for every command below it,
read as one typed object (`app_of(ctx)` or `@pass_app`) instead of a dict read with several
spellings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import click

from llmc_cli.cli.prompt import interactive
from llmc_cli.config.profiles import load_profile

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

        return load_profile(self.profile)


pass_app = click.make_pass_decorator(App, ensure=True)


def app_of(ctx: click.Context) -> App:
    """The App of this invocation (the root command made it; a fresh default one otherwise)."""
    return ctx.ensure_object(App)
