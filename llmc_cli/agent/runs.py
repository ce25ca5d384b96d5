"""An `ask` run from settings to saved conversation, for any front end: prepare() decides the
settings, makes the model client and holds the conversation (saved once before a token is
spent); run() gives the model the profile's visible tools, runs the loop with every call through
the command's pipeline (services.Pipeline), and saves the conversation whatever happened."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmc_cli.agent.conversations import Conversation, check_name, conversation_path, load_conversation, save_conversation
from llmc_cli.agent.loop import Progress, RunRecord, ask
from llmc_cli.agent.sampling import sampler
from llmc_cli.agent.settings import AskOptions, AskSettings, resolve_settings
from llmc_cli.agent.tool_search import THRESHOLD, wanted
from llmc_cli.errors import PolicyDenied
from llmc_cli.model import dataclass
from llmc_cli.policy.approval import with_hint
from llmc_cli.providers.base import AssistantTurn, Provider, make_provider
from llmc_cli.providers.reachable import check_reachable
from llmc_cli.services import ToolRequest, runs_listings
from llmc_cli.services.catalogs import allowed_tools, cleared_servers
from llmc_cli.services.search import not_drifted

if TYPE_CHECKING:
    from llmc_cli.catalog import Catalog, ServerFailure
    from llmc_cli.config.profiles import LoadedProfile
    from llmc_cli.config.schema import LlmConfig
    from llmc_cli.errors import LlmcError
    from llmc_cli.model import Tool, ToolCall, ToolResult
    from llmc_cli.services import Pipeline


@dataclass
class PreparedRun:
    settings: AskSettings
    provider: Provider
    conversation: Conversation
    save_as: str | None  # the name it is saved under (None: its id)
    continued: bool = False  # a saved conversation goes on (saved back whatever happens)

    @property
    def sample(self) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
        """The sampling hook for the servers, when the profile allows sampling."""
        return sampler(self.provider) if self.settings.allow_sampling else None


def prepare(given: AskOptions, llm: LlmConfig, *, continue_from: str | None = None, save_as: str | None = None) -> PreparedRun:
    """Settings, model client and conversation (a saved one to continue, else a new one). A
    state directory that cannot take the conversation fails now, before the model is asked
    (exit 3); a new conversation is kept only once its first turn began (run())."""
    conversation = load_conversation(continue_from) if continue_from else None
    if continue_from and not save_as:  # a continued conversation is saved back where it came from
        save_as = conversation_path(continue_from).stem
    settings = resolve_settings(given, llm, conversation)
    provider = make_provider(settings.provider, settings.provider_settings)
    continued = conversation is not None
    if conversation is None:
        conversation = Conversation.new(
            settings.provider, settings.provider_settings.model, settings.system_for_new, settings.provider_settings.base_url
        )
        # A state directory that cannot take it fails now (exit 3), before a token is spent; the
        # conversation itself is kept only once its first turn began (runs.run).
        if save_as:
            check_name(save_as)  # a bad --save NAME is usage, before anything runs
        save_conversation(conversation).unlink(missing_ok=True)
    else:
        save_conversation(conversation, save_as)
    return PreparedRun(settings, provider, conversation, save_as, continued)


def run(
    prepared: PreparedRun,
    prompt: str,
    catalog: Catalog,
    profile: LoadedProfile,
    calls: Pipeline,
    *,
    servers: list[str] | None = None,
    progress: Progress | None = None,
    strict: bool = False,
    on_text: Callable[[str], None] | None = None,
    on_unavailable: Callable[[LlmcError], None] | None = None,
) -> tuple[RunRecord, Path]:
    """The loop over the tools the profile lets the model see (`servers`: only theirs); a server
    that cannot list its tools is reported to `on_unavailable` and left out. Returns the record
    and where the conversation was saved (it is saved when the run fails too)."""

    settings = prepared.settings
    with catalog:
        tools, failures, seen = offered_tools(prepared, catalog, profile, servers, calls.context.cleared_for)
        if wanted(settings.tool_search, len(tools)):
            tools = not_drifted(tools, profile)  # a search never offers a tool its call would refuse as drifted
            if settings.tool_search is None and progress is not None:  # switched on by the count: say so
                progress({"event": "notice", "message": search_notice(len(tools))})
        for failure in failures:
            if on_unavailable:
                on_unavailable(failure.error)
        try:
            record = ask(
                prompt,
                provider=prepared.provider,
                tools=tools,
                call_tool=lambda call: _call(calls, call),
                read_only=calls.read_only,
                conversation=prepared.conversation,
                system=settings.system_override,
                limits=settings.limits,
                progress=progress,
                strict=strict,
                on_text=on_text,
                tool_search=settings.tool_search,
                semantic_search=profile.profile.search.semantic,
                # the servers a turn calls start at once, not one after the other as their calls run
                on_calls=lambda called: catalog.pool.warm_up(sorted({t.server for t in called} - set(catalog.pool.sessions))),
            )
        finally:
            # a conversation that never began (the first turn failed: 401, refused) is not kept
            saved = save_conversation(prepared.conversation, prepared.save_as) if began(prepared) else None
            changed = [s for s in runs_listings.remember(catalog, profile, seen) if s in seen]
            if changed and catalog.say is not None:  # an upgraded server: the next run offers its tools as they are
                catalog.say(f"llmc: ask: the tools of {', '.join(changed)} changed since an earlier run listed them")
    if saved is None:  # a run that ended without a turn (its time was up): it is still a run
        saved = save_conversation(prepared.conversation, prepared.save_as)
    return record, saved


def offered_tools(
    prepared: PreparedRun, catalog: Catalog, profile: LoadedProfile, servers: list[str] | None, clearance: str | None
) -> tuple[list[Tool], list[ServerFailure], dict[str, list[Tool]]]:
    """(the tools the model is offered, the servers that could not list theirs, the listings
    taken from the cache). A server whose listing an earlier run cached is not started here
    (services/runs_listings.py): it starts when the model calls one of its tools. The others
    start now, all at once; while they do, a base URL that refuses connections ends the run
    (check_reachable: one connect, only when servers must start before the first request)."""
    names = cleared_servers(catalog, profile, servers, clearance)
    names = list(catalog.specs) if names is None else names
    seen = runs_listings.cached(catalog, profile, names)
    missing = [name for name in names if name not in seen]
    listed: list[Tool] = []
    failures: list[ServerFailure] = []
    if missing:
        catalog.pool.warm_up(missing)
        settings = prepared.settings
        check_reachable(settings.provider, settings.provider_settings)
        listed, failures = catalog.list_tools(missing)
    if seen and catalog.say is not None:
        catalog.say(
            f"llmc: ask: the tools of {', '.join(seen)} as an earlier run listed them; "
            "a server starts when the model calls one of its tools"
        )
    tools = [t for name in names for t in (seen[name] if name in seen else [t for t in listed if t.server == name])]
    allowed, _denied = allowed_tools(tools, profile)
    return allowed, failures, seen


def began(prepared: PreparedRun) -> bool:
    """Whether the conversation holds a model turn (or was saved before: a continued one)."""
    return prepared.continued or any(isinstance(m, AssistantTurn) for m in prepared.conversation.messages)


def search_notice(count: int) -> str:
    return (
        f"llmc: {count} tools: the model gets a tool search instead of every tool (past {THRESHOLD}); "
        "--no-tool-search or [llm] tool_search = false turns it off"
    )


def _call(calls: Pipeline, call: ToolCall) -> ToolResult:
    """One call the model made, through the pipeline; a denial for want of a confirmation says
    how a person would pre-approve the call (the model's words reach the person)."""

    try:
        return calls.run(ToolRequest.of(call)).tool_result
    except PolicyDenied as exc:
        with_hint(exc)
        raise
