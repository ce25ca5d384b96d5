"""Classification and clearance: each server holds data of a class (`[servers.NAME]
classification`, public < internal < confidential < restricted; default internal), and whoever
uses a profile has a clearance. A model or a gateway principal never gets a server above it: its
tools are not offered, its resources and prompts not listed, a direct call is denied.

Who has which clearance (each capped by `[policy] clearance` when the profile sets it):
- a command a person types (`call`, `call --batch`, `tools list`, `resources read`): `[policy]
  clearance`, unset: unrestricted (the person runs the servers anyway);
- `ask` (the model): `[llm] provider_clearance.PROVIDER`, else `[llm] clearance`, else internal;
- a gateway host: its principal's `clearance`, else `[serve] clearance`, else internal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmc_cli.config.schema import LEVELS

if TYPE_CHECKING:
    from llmc_cli.config.schema import Profile, ServeConfig

MODEL_DEFAULT = "internal"


def rank(level: str) -> int:
    return LEVELS.index(level)


def capped(level: str, profile: Profile) -> str:
    """`level`, lowered to [policy] clearance when the profile sets one."""
    ceiling = profile.policy.clearance
    return level if ceiling is None or rank(level) <= rank(ceiling) else ceiling


def human(profile: Profile) -> str:
    return profile.policy.clearance or LEVELS[-1]


def model(profile: Profile, provider: str | None = None) -> str:
    """The clearance of the model `ask` talks to (`provider`: the one it runs, if known)."""
    llm = profile.llm
    level = llm.provider_clearance.get(provider or llm.provider or "") or llm.clearance or MODEL_DEFAULT
    return capped(level, profile)


def principal(serve: ServeConfig, profile: Profile, name: str | None) -> str:
    """The clearance of a gateway host: its principal's (by name, in the served profile's
    [serve]), else [serve] clearance, capped by the [policy] clearance of the profile it uses."""
    own = (serve.principals or {}).get(name) if name else None
    level = (own.clearance if own is not None else None) or serve.clearance or MODEL_DEFAULT
    return capped(level, profile)


def classification(profile: Profile, server: str) -> str:
    """A server's class; a server the profile does not name (ad hoc, a keeper's) is internal."""
    config = profile.servers.get(server)
    return config.classification if config is not None else "internal"


def cleared(profile: Profile, server: str, clearance: str | None) -> bool:
    """May someone of this clearance (None: unrestricted) see `server`?"""
    return clearance is None or rank(classification(profile, server)) <= rank(clearance)


def reason(profile: Profile, server: str, clearance: str) -> str:
    return f"server {server} is classified {classification(profile, server)}, above the caller's clearance ({clearance})"
