"""The servers a command talks to: the profile's (or an ad-hoc one, or those a session keeper
holds) as one catalog, told where llmc's own files are; the tools, resources, resource templates
and prompts a profile may see; where the gateway shares its host sessions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from llmc_cli import keeper, policy, services
from llmc_cli.catalog import Catalog, ConnectOptions, ServerFailure
from llmc_cli.config.profiles import LoadedProfile, usable_specs
from llmc_cli.config.secrets import Masker, environment_secrets, is_secret_name
from llmc_cli.errors import ConfigError, ConnectionFailed, LlmcError, SessionHoldsServers, UsageError
from llmc_cli.guard.clearance import cleared
from llmc_cli.mcp.hooks import ClientHooks
from llmc_cli.model import JSONObject, ServerSpec, Tool
from llmc_cli.store import client_stores

if TYPE_CHECKING:
    from llmc_cli.policy import ReadKind
    from llmc_cli.services.sandbox import Launched

# A listing -> (the key of its items, the field each item is judged by, what policy.decide_read judges)
READ_KINDS: dict[str, tuple[str, str, ReadKind]] = {
    "resources/list": ("resources", "uri", "resource"),
    "resources/templates/list": ("resourceTemplates", "uriTemplate", "template"),
    "prompts/list": ("prompts", "name", "prompt"),
}


def builtin_servers() -> dict[str, Callable[[ServerSpec], Any]]:
    def workspace(spec: ServerSpec) -> Any:

        options = dict(spec.options)
        from llmc_cli.server.workspace import make_workspace_server  # the built-in server: loaded only when it runs

        return make_workspace_server(**options)

    return {"workspace": workspace}


def authenticated(profile: LoadedProfile) -> bool:
    """Does the profile's gateway serve principals (inbound tokens or OAuth, any auth but none)?"""
    serve = profile.profile.serve
    return bool(serve.principals) or serve.oauth is not None or getattr(serve, "auth", None) not in (None, "none")


def open_catalog(
    profile: LoadedProfile | None,
    only: tuple[str, ...] = (),
    adhoc: ServerSpec | None = None,
    hooks: ClientHooks | None = None,
    on_stderr: Callable[[str, str], None] | None = None,
    timeout: float | None = None,
    session: str | None = None,
    first: str | None = None,
    connect_timeout: float | None = None,
    require_sandbox: bool = False,
    launched: Launched | None = None,
) -> Catalog:
    """The servers a command talks to: an ad-hoc one, the profile's, or those a session keeper
    holds (`session`: its name; the servers then run in the keeper, policy and audit still here).
    `first`: the server the command will use first, when it names one (SERVER.TOOL): a keeper's
    is then attached at once, and its reply lists the rest (no status request before).
    `launched`: the servers services.launch decided (for this profile, `only`, `adhoc`, `timeout`
    and `connect_timeout`), and the processes of those it started: the catalog's connections
    adopt them."""
    if adhoc is None and profile is None:
        raise ValueError("open_catalog needs a profile or an ad-hoc server")
    held: tuple[str, str] | None = None  # the keeper's socket and session, when it holds the servers
    reach: dict[str, str] | None = None  # how this command would reach each of them (server_reach)
    unusable: dict[str, ConfigError] = {}  # servers of the profile that cannot be configured
    if launched is not None:
        specs, unusable = launched.specs, launched.unusable
    elif session:
        if adhoc:
            raise SessionHoldsServers(session)
        reach = server_reach(profile, only)
        if first and (not only or first in only):
            attached = _attach_first(session, first, only, hooks, on_stderr, timeout, reach)
            if attached is not None:
                return attached
        path, specs = keeper.held_specs(session, only)
        held = (path, session)
        if timeout:
            specs = [replace(spec, timeout=timeout) for spec in specs]
    else:
        # services/sandbox.py (its lazy name): a call through a keeper launches nothing, and loads none of it
        specs, unusable = services.launch_specs(profile, only, adhoc, timeout, connect_timeout, require_sandbox=require_sandbox)

    # A keeper's servers are connected in the keeper: no era cache or OAuth tokens here.
    options = ConnectOptions(
        hooks,
        builtin_servers(),
        on_stderr,
        keeper=held,
        stores=None if held else client_stores(),
        unusable=unusable,
        mask=_secret_mask(profile, specs),
        reach=reach,
    )
    return Catalog(specs, options, started=launched.started if launched is not None else None)


def server_reach(profile: LoadedProfile | None, only: tuple[str, ...] = (), adhoc: ServerSpec | None = None) -> dict[str, str]:
    """How each server (the ad-hoc one, or the profile's, or those in `only`) is reached now, by
    name (ServerSpec.reach under the approval key): a session keeper is told this of the servers
    it starts, and a command run in the session tells it the same of the server it attaches to.
    A keeper serves a server only to a command that would reach it the same way: with another
    token in its env or headers it would be another account's server. A server this profile
    cannot configure (an unset ${VAR}) or does not have makes no claim: the keeper's is used."""
    if adhoc is not None:
        specs = [adhoc]
    elif profile is None:
        return {}
    else:
        held = [name for name in only if name in profile.profile.servers]  # a name it lacks: the keeper's
        specs = usable_specs(profile, held)[0] if held or not only else []
    key = policy.approval_key() if specs else b""
    return {spec.name: spec.reach(key) for spec in specs}


def _secret_mask(profile: LoadedProfile | None, specs: list[ServerSpec]) -> Callable[[str], str]:
    """Masks (config.secrets.Masker) the environment's and the profile's secrets, and the values
    of the servers' secret-looking env and header entries, in what servers say back. Built on
    first use: only a failure or a stderr line shown with -v needs it."""
    made: list[Masker] = []

    def mask(text: str) -> str:
        if not made:
            known = environment_secrets(profile.profile if profile is not None else None)
            for spec in specs:
                for name, value in (*spec.env.items(), *spec.headers.items()):
                    if is_secret_name(name) and value.strip():
                        known |= {value, value.split()[-1]}
            made.append(Masker(known))
        return made[0].text(text)

    return mask


def _attach_first(
    session: str,
    first: str,
    only: tuple[str, ...],
    hooks: ClientHooks | None,
    on_stderr: Callable[[str, str], None] | None,
    timeout: float | None,
    reach: dict[str, str],
) -> Catalog | None:
    """The keeper's catalog with `first` attached, its other servers taken from the attach
    reply; None when that does not work out (the keeper holds no server of that name, is not
    running, or is too old to list its servers): then the status request says why, or what."""
    path = str(keeper.socket_path(session))
    guess = ServerSpec(name=first, timeout=timeout or 60.0, description=f"held by session {session}")
    catalog = Catalog([guess], ConnectOptions(hooks, builtin_servers(), on_stderr, keeper=(path, session), reach=reach))
    try:
        attached = catalog.session(first)
    except (UsageError, ConnectionFailed):
        catalog.close()
        return None
    roster = getattr(attached.transport, "attached", None)
    if roster is None or roster.servers is None:
        catalog.close()
        return None
    specs = keeper.specs_of(session, roster.servers, only)
    if timeout:
        specs = [replace(spec, timeout=timeout) for spec in specs]
    catalog.pool.add_servers(specs)
    attached.timeout = catalog.specs[first].timeout  # the keeper's (the profile's) timeout for this server
    return catalog


def cleared_servers(
    catalog: Catalog, profile: LoadedProfile, servers: list[str] | None, clearance: str | None
) -> list[str] | None:
    """`servers` (None: all of the catalog's) less those classified above `clearance` (None: unrestricted)."""
    if clearance is None:
        return servers
    return [s for s in (servers if servers is not None else list(catalog.specs)) if cleared(profile.profile, s, clearance)]


def usable_servers(
    catalog: Catalog, profile: LoadedProfile, servers: list[str] | None, clearance: str | None
) -> list[str] | None:
    """cleared_servers less those the policy denies as a whole (`deny = ["s.*"]`): the servers
    something could be used of (None: all of the catalog's). The others are not started."""
    config = profile.profile.policy
    usable = cleared_servers(catalog, profile, servers, clearance)
    if not config.deny:
        return usable
    return [s for s in (usable if usable is not None else list(catalog.specs)) if not policy.whole_server_denial(s, config)]


def visible_tools(
    catalog: Catalog,
    profile: LoadedProfile,
    servers: list[str] | None = None,
    clearance: str | None = None,
    *,
    closed: bool = False,
) -> tuple[list[Tool], list[Tool], list[Any]]:
    """(allowed, denied, failures): the model and listings see only the allowed ones. A server
    above `clearance` (guard/clearance.py; None: unrestricted) is not listed, nor started; nor is
    one the policy denies as a whole, unless `closed` (a listing that shows denied tools too)."""

    servers = (
        cleared_servers(catalog, profile, servers, clearance) if closed else usable_servers(catalog, profile, servers, clearance)
    )
    if servers == []:
        return [], [], []
    tools, failures = catalog.list_tools(servers)
    allowed, denied = allowed_tools(tools, profile)
    return allowed, denied, failures


def allowed_tools(tools: list[Tool], profile: LoadedProfile) -> tuple[list[Tool], list[Tool]]:
    """(allowed, denied) of tools listed however (live, or an earlier listing `ask` cached)."""
    config = profile.profile.policy
    allowed = [t for t in tools if policy.visible(t, config).action == "allow"]
    if profile.profile.guard.descriptions == "hide":  # a tool whose text attacks the model is not offered
        from llmc_cli.guard.scan import flagged

        hidden = flagged(allowed)
        allowed = [t for t in allowed if t.qualified_name not in hidden]
    return allowed, [t for t in tools if t not in allowed]


def visible_items(
    catalog: Catalog, profile: LoadedProfile, method: str, server: str, items: list[JSONObject]
) -> list[JSONObject]:
    """The items of one server's listing (`method`, a key of READ_KINDS) the profile may read: the
    others are absent, as denied tools are (read_decision, the judge of every read)."""
    _key, field, kind = READ_KINDS[method]
    # through the package: services/reads.py (and services/calls.py under it, ~2.4 ms of imports)
    # loads with the first listing of resources or prompts, not with every `tools list`
    decide = services.read_decision
    return [item for item in items if decide(catalog, profile, kind, server, str(item.get(field, ""))).action == "allow"]


def visible_offered(
    catalog: Catalog, profile: LoadedProfile, method: str, capability: str, clearance: str | None = None
) -> tuple[dict[str, list[JSONObject]], list[str], list[ServerFailure]]:
    """Catalog.list_offered with only what the profile may read (visible_items); a server whose
    tools cannot be listed when the policy needs them to judge is a failure, its items absent. A
    server the policy denies as a whole is not asked (nor started)."""

    open_servers = usable_servers(catalog, profile, None, clearance)
    if open_servers is None:
        open_servers = list(catalog.specs)
    if not open_servers:
        return {}, [], []
    per_server, skipped, failures = catalog.list_offered(method, READ_KINDS[method][0], capability, open_servers)
    shown: dict[str, list[JSONObject]] = {}
    for server, items in per_server.items():
        try:
            shown[server] = visible_items(catalog, profile, method, server, items)
        except LlmcError as exc:
            failures.append(ServerFailure(server, exc))
    return shown, skipped, failures
