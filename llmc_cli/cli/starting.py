"""A server-facing command's first act: decide its servers (the profile's, or the ad-hoc one) and
start the stdio ones it uses first, before the rest of its machinery loads (cli/common.py: the
client hooks, telemetry, the catalog), so that a server's own start-up (node: about a third of a
second) overlaps llmc's. Only what that decision needs is imported here: the profile, the policy's
whole-server denials, the launch (services/sandbox.py) and the stdio transport."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from llmc_cli import config, policy, services
from llmc_cli.cli.context import app_of
from llmc_cli.cli.targets import Target
from llmc_cli.model import collector_paused

if TYPE_CHECKING:
    from llmc_cli.config.profiles import LoadedProfile
    from llmc_cli.model import ServerSpec
    from llmc_cli.services.sandbox import Launched


class Started:
    """What start_servers decided: the ad-hoc server (None: the profile's), the session keeper
    used (None: none), the profile (None until it loads: an ad-hoc server's loads after its
    start), the servers a person may use (None: all) and the launch (None with a session).
    (A plain class: a NamedTuple's is built by exec at import, ~0.5 M instructions.)"""

    __slots__ = ("adhoc", "cleared", "launched", "loaded", "session")

    def __init__(
        self,
        adhoc: ServerSpec | None,
        session: str | None,
        loaded: LoadedProfile | None,
        cleared: list[str] | None,
        launched: Launched | None,
    ) -> None:
        self.adhoc, self.session, self.loaded, self.cleared, self.launched = adhoc, session, loaded, cleared, launched


def start_servers(
    ctx: click.Context, target: Target, warm: bool = True, first: str | None = None, calling: str | None = None
) -> Started:
    """target: what @target_options gave. `warm`: start every server now; a command that needs
    only some (a call) starts those when it knows them (tool_resolver, Pool.warm_up). `first`:
    the server the command names, if any (services.open_catalog); `calling`: the tool
    (SERVER.TOOL) it calls first, whose server does not start first when the policy denies that
    call by its name. The stdio servers it uses first start now (start_first); an ad-hoc
    server's before the profile loads, too. With the cyclic collector paused, as open_target."""
    with collector_paused():
        adhoc = target.adhoc_spec()
        session = target.session
        if adhoc and ctx.get_parameter_source("session") == click.core.ParameterSource.ENVIRONMENT:
            session = None  # --stdio/--url on the command line beat an LLMC_SESSION of the shell
        loaded = None if adhoc else config.load_profile(app_of(ctx).profile)
        cleared = _usable_by_person(loaded)  # what may start before anything is decided
        eager = None if warm or adhoc else [first] if first and not _call_denied_by_name(loaded, calling) else []
        if cleared is not None:
            eager = [name for name in (cleared if eager is None else eager) if name in cleared]
        launched = None if session else start_first(ctx, loaded, target, adhoc, eager)
        return Started(adhoc, session, loaded, cleared, launched)


def _usable_by_person(loaded: LoadedProfile | None) -> list[str] | None:
    """The servers a person may use (None: every server): not those above the profile's [policy]
    clearance (README, Classification and clearance), nor those its policy denies as a whole
    (`deny = ["s.*"]`). Those are not even started: least privilege."""
    if loaded is None:
        return None
    config = loaded.profile.policy
    names = list(loaded.profile.servers)
    if config.clearance is not None:
        from llmc_cli.guard import clearance

        level = clearance.human(loaded.profile)
        names = [name for name in names if clearance.cleared(loaded.profile, name, level)]
    if config.deny:  # (the rules load only for a profile that has deny patterns: start-up stays lean)
        names = [name for name in names if not policy.whole_server_denial(name, config)]
    return None if len(names) == len(loaded.profile.servers) else names


def _call_denied_by_name(loaded: LoadedProfile | None, calling: str | None) -> bool:
    """Whether the profile's policy denies a call of `calling` (SERVER.TOOL) by its name alone."""
    if loaded is None or calling is None:
        return False
    config = loaded.profile.policy
    if not config.deny and config.default != "deny":
        return False  # no rule could: the rules stay unloaded (start-up stays lean)
    return policy.denied_by_name(calling, config) is not None


def start_first(
    ctx: click.Context, loaded: LoadedProfile | None, target: Target, adhoc: ServerSpec | None, first: list[str] | None
) -> Launched:
    """The command's servers (services.launch: the profile's or the ad-hoc one, contained as the
    profile says) with the stdio ones among `first` (None: all) started now; they are stopped
    when the command ends, however it ends (its catalog stops those it used before)."""

    only = () if adhoc else tuple(target.servers)
    launched = services.launch(loaded, only, adhoc, target.timeout, target.connect_timeout)
    ctx.call_on_close(launched.close)
    launched.start(first)
    return launched
