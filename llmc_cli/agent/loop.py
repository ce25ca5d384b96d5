"""The `ask` loop: a model, the profile's tools, bounded in steps and time.

    record = ask("What's in the newest log?", provider=p, tools=tools, call_tool=run_one)

Each model turn may ask for tool calls; they run through the injected `call_tool` (in llmc,
the services pipeline: policy -> call -> inspection -> audit), concurrently when the injected `read_only` says
so for every tool of the batch (in llmc: the profile's policy, hints included), else in order. A denied or failed call goes back to the model as an error result it
can read. Results over the budget are cut before the model sees them; the run record keeps them
whole. Conversations are saved as JSON in the state directory and can be continued.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypedDict

from llmc_cli import telemetry
from llmc_cli.agent import fence, genai
from llmc_cli.agent.bounded import run_bounded
from llmc_cli.agent.compaction import compact
from llmc_cli.agent.conversations import Conversation
from llmc_cli.agent.tool_search import ToolSearch, native, wanted
from llmc_cli.audit import AuditError
from llmc_cli.errors import LlmcError, PolicyDenied, ProviderError
from llmc_cli.mcp.jsonrpc import has_lone_surrogate, replace_lone_surrogates
from llmc_cli.model import JSONObject, Tool, ToolCall, ToolResult
from llmc_cli.providers.base import (
    END,
    LENGTH,
    PAUSE,
    AssistantTurn,
    Provider,
    ProviderToolCall,
    ToolResultItem,
    ToolResults,
    UserMessage,
)
from llmc_cli.translate import translate
from llmc_cli.translate.anthropic import deferred

if TYPE_CHECKING:
    from llmc_cli.translate import Translation

CallTool = Callable[[ToolCall], ToolResult]
ReadOnly = Callable[[Tool], bool]  # may this tool run beside others? (default: no)
Progress = Callable[[JSONObject], None]  # a progress event (`ask --progress` JSON Lines)

# Stop reasons of a run.
STOP_END, STOP_MAX_STEPS, STOP_TIMEOUT, STOP_LENGTH, STOP_OTHER = "end", "max_steps", "timeout", "length", "other"


class StepOutcome(TypedDict, total=False):
    """How a tool call of a run ended (filled in while it runs; every key is set by the time the
    turn ends, except error, result, compacted and cached)."""

    outcome: str  # ok | error | denied | failed | invalid | unknown_tool | timeout
    error: JSONObject  # the LlmcError (to_json) of a denied or failed call
    result: JSONObject  # the whole result (ToolResult.to_json)
    compacted: JSONObject  # what was cut before the model saw the result
    cached: bool  # present (true) when the result came from the result cache ([cache])
    durationMs: float | None  # None: never run (an unreadable call, no such tool), or the run stopped waiting
    seenResult: ToolResult  # what the model is shown, while the turn runs ...
    seen: str  # ... and its text in the record


class Step(StepOutcome):
    """One tool call of a run, as `ask` prints it and a saved conversation keeps it."""

    step: int
    callId: str
    tool: str  # server.tool, or the name the model wrote when no tool has it
    providerName: str
    arguments: JSONObject  # as the server was sent them


@dataclass
class RunRecord:
    conversation: str
    provider: str
    model: str | None
    prompt: str
    answer: str = ""
    stop_reason: str = STOP_END
    steps: list[Step] = field(default_factory=list)
    usage: list[dict[str, Any]] = field(default_factory=list)
    duration_ms: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        totals = {k: sum(u.get(k) or 0 for u in self.usage) for k in ("inputTokens", "outputTokens")}
        return {
            "conversation": self.conversation,
            "provider": self.provider,
            "model": self.model,
            "prompt": self.prompt,
            "answer": self.answer,
            "stopReason": self.stop_reason,
            "steps": self.steps,
            "usage": self.usage,
            "usageTotal": totals,
            "durationMs": self.duration_ms,
            "warnings": self.warnings,
        }


@dataclass(frozen=True)
class Limits:
    """What bounds one run: model turns (`max_steps`), seconds for the whole run (`timeout`),
    the characters of one tool result the model sees (`result_budget`), and how many read-only
    calls of one turn run at once (`max_parallel`)."""

    max_steps: int = 10
    timeout: float = 300.0
    result_budget: int = 20_000
    max_parallel: int = 8


def ask(
    prompt: str,
    *,
    provider: Provider,
    tools: list[Tool],
    call_tool: CallTool,
    read_only: ReadOnly = lambda tool: False,
    conversation: Conversation | None = None,
    system: str | None = None,
    limits: Limits = Limits(),
    progress: Progress | None = None,
    strict: bool = False,
    on_text: Callable[[str], None] | None = None,
    tool_search: bool | None = None,
    semantic_search: bool | None = None,
    on_calls: Callable[[list[Tool]], None] | None = None,
) -> RunRecord:
    """Run the loop until the model answers without tool calls, `limits.max_steps` model turns
    were taken, or `limits.timeout` seconds passed. `read_only`: the profile's answer for a tool (llmc:
    policy.is_read_only, hints included); a turn's calls run concurrently only when it is true
    for every one of them. `tool_search`: the model first gets only llmc's `search_tools` and
    the tools it finds join from its next turn (None: so past tool_search.THRESHOLD tools);
    `semantic_search`: its ranking fused with the semantic stage's ([search] semantic).
    `on_calls(tools)`: told the tools of a turn's calls before any of them runs (llmc starts
    their servers at once). Appends to `conversation` (a new one if None) and its
    `runs`; the caller saves it. ProviderError propagates with `.record` (the run so far) set."""
    conv = conversation or Conversation.new(provider.name, provider.settings.model, system)
    with genai.agent_span(provider, conv):
        return _ask(
            prompt,
            provider,
            tools,
            call_tool,
            read_only,
            conv,
            system,
            limits,
            progress,
            strict,
            on_text,
            tool_search,
            semantic_search,
            on_calls,
        )


def _ask(
    prompt: str,
    provider: Provider,
    tools: list[Tool],
    call_tool: CallTool,
    read_only: ReadOnly,
    conv: Conversation,
    system: str | None,
    limits: Limits,
    progress: Progress | None,
    strict: bool,
    on_text: Callable[[str], None] | None,
    tool_search: bool | None,
    semantic_search: bool | None = None,
    on_calls: Callable[[list[Tool]], None] | None = None,
) -> RunRecord:
    started = time.monotonic()
    deadline = started + limits.timeout
    if system is not None:
        conv.system = system
    record = RunRecord(conv.id, provider.name, provider.settings.model, prompt)
    record.warnings.extend(getattr(provider, "warnings", []))
    translation = None
    by_name: dict[str, Tool] = {}
    searching = bool(tools) and wanted(tool_search, len(tools))
    # Anthropic searches the tools itself where the model can; everywhere else llmc's search_tools
    server_side = searching and native(provider.name, provider.settings.model)
    search = ToolSearch(tools, provider.format, strict, semantic_search) if searching and not server_side else None
    if search is not None:
        search.restore(c.name for m in conv.messages if isinstance(m, AssistantTurn) for c in m.tool_calls)
        base_read_only = read_only
        read_only = lambda tool: tool is search.tool or base_read_only(tool)  # noqa: E731
    elif tools:
        translation = translate(tools, provider.format, strict=strict)
        if server_side:
            translation = replace(translation, definitions=deferred(translation.definitions))
        record.warnings.extend(str(w) for w in getattr(translation, "warnings", []) or [])
        tools_by_key = {(t.server, t.name): t for t in tools}
        by_name = {name: tools_by_key[owner] for name, owner in provider_tool_names(translation).items() if owner in tools_by_key}
    emit, boundary = _locked(progress), fence.new_boundary()  # tool results reach the model fenced, as data
    conv.messages.append(UserMessage(prompt))
    try:
        for step in range(1, limits.max_steps + 1):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                record.stop_reason = STOP_TIMEOUT
                break
            if search is not None:  # the tools found so far, under names that never change
                translation = search.translation()
                record.warnings.extend(str(w) for w in translation.warnings if str(w) not in record.warnings)
                by_name = dict(translation.tools)
            emit({"event": "model", "step": step})
            t0, (sent_system, sent) = (
                time.monotonic(),
                fence.fenced_request(conv.system, conv.messages, boundary, offered=bool(tools)),
            )
            try:
                # on_text: the model's text, streamed as it arrives (every turn's, not only the answer's)
                turn = genai.traced_chat(
                    provider,
                    conv,
                    functools.partial(
                        provider.complete,
                        sent_system,
                        sent,
                        translation,
                        timeout=remaining,
                        **({"on_text": on_text} if on_text else {}),
                    ),
                )
            except ProviderError:
                if time.monotonic() >= deadline:
                    record.stop_reason = STOP_TIMEOUT
                    break
                raise
            calls = turn.tool_calls  # as the model wrote them: services refuses arguments it cannot record
            turn = _turn_without_lone_surrogates(turn)
            record.usage.append(
                {"step": step, **turn.usage.to_json(), "stopReason": turn.stop_reason, "durationMs": _ms(t0), "text": turn.text}
            )
            conv.messages.append(turn)
            if not turn.tool_calls and turn.stop_reason == PAUSE:
                continue  # a server-side tool paused the turn: the model goes on from the conversation as it is
            if not turn.tool_calls and not turn.text.strip():
                # the same on a terminal (streamed) and in a pipe: nothing is no answer (exit 8)
                raise ProviderError(
                    f"{provider.name}: the model answered nothing (no text, no tool call)", provider=provider.name
                )
            if not turn.tool_calls:
                record.answer = turn.text  # only a turn that calls no tool is the answer
                record.stop_reason = {END: STOP_END, LENGTH: STOP_LENGTH}.get(turn.stop_reason, STOP_OTHER)
                break
            results, timed_out = _run_calls(
                step,
                calls,
                by_name,
                call_tool,
                read_only,
                deadline,
                limits,
                record,
                emit,
                getattr(translation, "arguments_back", None),
                search,
                on_calls,
            )
            conv.messages.append(ToolResults(results))
            if timed_out:
                record.stop_reason = STOP_TIMEOUT
                break
        else:
            record.stop_reason = STOP_MAX_STEPS
    except ProviderError as exc:
        record.stop_reason = "error"
        record.duration_ms = _ms(started)
        conv.runs.append(record.to_json())
        exc.record = record.to_json()  # type: ignore[attr-defined]
        raise
    record.duration_ms = _ms(started)
    conv.runs.append(record.to_json())
    return record


def _turn_without_lone_surrogates(turn: AssistantTurn) -> AssistantTurn:
    """The turn as the conversation keeps it: a model's "\\ud800" escape decodes to text that no
    UTF-8 writer accepts (the next request to the provider, a saved conversation, stdout), so
    it becomes U+FFFD there."""
    if not has_lone_surrogate(turn.to_json()):
        return turn
    return replace(
        turn,
        text=replace_lone_surrogates(turn.text),
        raw=replace_lone_surrogates(turn.raw),
        tool_calls=[replace(c, arguments=replace_lone_surrogates(c.arguments)) for c in turn.tool_calls],
    )


def _run_calls(
    step: int,
    calls: list[ProviderToolCall],
    by_name: dict[str, Tool],
    call_tool: CallTool,
    read_only: ReadOnly,
    deadline: float,
    limits: Limits,
    record: RunRecord,
    emit: Progress,
    arguments_back: Callable[[str, JSONObject], JSONObject] | None = None,
    search: ToolSearch | None = None,
    on_calls: Callable[[list[Tool]], None] | None = None,
) -> tuple[list[ToolResultItem], bool]:
    """Run one turn's calls; every call gets a result, in the model's order, so the conversation
    stays valid for every API even when time runs out."""
    entries, sent, runnable = _planned(step, calls, by_name, emit, arguments_back)
    if on_calls is not None and runnable:
        on_calls([by_name[calls[i].name] for i in runnable])
    lock = threading.Lock()
    closed = False  # set when the batch timed out: a late result must not change the record

    def work(i: int) -> None:
        c = calls[i]
        emit({"event": "tool_start", "step": step, "tool": entries[i]["tool"], "arguments": entries[i]["arguments"]})
        out = _called(by_name[c.name], c, sent[i], call_tool, limits.result_budget, search)
        with lock:
            if closed:
                return
            entries[i].update(out)
        _ended(emit, step, entries[i]["tool"], out["outcome"], out["durationMs"], out["seenResult"])

    parallel = len(runnable) > 1 and all(read_only(by_name[calls[i].name]) for i in runnable)
    timed_out = not run_bounded(telemetry.in_context(work), runnable, limits.max_parallel if parallel else 1, deadline)
    with lock:
        closed = True
    items = []
    for entry, c in zip(entries, calls, strict=True):
        if "outcome" not in entry:
            _fail(entry, "timeout", "llmc stopped waiting for this call: the run's time limit was reached")
            entry["durationMs"] = None
            _ended(emit, step, entry["tool"], "timeout", None, entry["seenResult"])
        seen = entry.pop("seenResult")
        entry["seen"] = seen.text
        record.steps.append(entry)
        items.append(ToolResultItem(c.id, c.name, seen, c.echo_id))
    return items, timed_out


def _planned(
    step: int,
    calls: list[ProviderToolCall],
    by_name: dict[str, Tool],
    emit: Progress,
    arguments_back: Callable[[str, JSONObject], JSONObject] | None,
) -> tuple[list[Step], list[JSONObject], list[int]]:
    """A turn's steps, the arguments each call sends and which calls can run; a call that
    cannot (unreadable, no such tool) has its outcome already, and the model is told so now."""
    entries: list[Step] = []
    sent: list[JSONObject] = []
    runnable: list[int] = []
    for c in calls:
        tool = by_name.get(c.name)
        # Property names a provider could not take (Gemini) go back to the server's own names; the
        # record shows what the server was sent.
        arguments = arguments_back(c.name, dict(c.arguments)) if tool and arguments_back else dict(c.arguments)
        sent.append(arguments)
        entry: Step = {
            "step": step,
            "callId": c.id,
            "tool": tool.qualified_name if tool else c.name,
            "providerName": c.name,
            "arguments": replace_lone_surrogates(arguments),
        }
        if c.error:
            _fail(entry, "invalid", f"llmc could not read this tool call: {c.error}")
        elif tool is None:
            _fail(
                entry,
                "unknown_tool",
                f"there is no tool named {c.name!r}; use one of: " + ", ".join(sorted(by_name))
                if by_name
                else f"there is no tool named {c.name!r}; no tools are available",
            )
        else:
            runnable.append(len(entries))
        entries.append(entry)
        if "outcome" in entry:  # never run; every step has the same fields, and the model sees an error for it
            entry["durationMs"] = None
            _ended(emit, step, entry["tool"], entry["outcome"], None, entry["seenResult"])
    return entries, sent, runnable


def _called(
    tool: Tool, c: ProviderToolCall, arguments: JSONObject, call_tool: CallTool, budget: int, search: ToolSearch | None
) -> StepOutcome:
    """One call's outcome: what it returned (cut to the budget for the model), or why it did not."""
    t0 = time.monotonic()
    out: StepOutcome = {}
    try:
        with genai.tool_span(tool, c.id) as span:
            if search is not None and tool is search.tool:  # llmc answers it: no server, no policy
                result = search.answer(dict(arguments))
            else:
                result = call_tool(ToolCall(tool.server, tool.name, dict(arguments), call_id=c.id))
            if result.is_error:
                span.error("tool_error", "the tool reported an error")
    except PolicyDenied as exc:
        _fail(out, "denied", f"llmc's policy denied this call: {exc.message}", exc)
    except AuditError:
        raise  # the trail cannot be written: the run stops (exit 3), as `call` does
    except LlmcError as exc:
        _fail(out, "failed", f"the call failed ({exc.kind}): {exc.message}", exc)
    else:
        seen, cut = compact(result, budget, tool)
        out.update({"outcome": "error" if result.is_error else "ok", "result": result.to_json(), "seenResult": seen})
        if cut:
            out["compacted"] = cut
        if result.cached:
            out["cached"] = True  # answered from [cache], as `call` says
    out["durationMs"] = _ms(t0)
    return out


def _ended(emit: Progress, step: int, tool: str, outcome: str, duration_ms: float | None, seen: ToolResult) -> None:
    """The tool_end event; unless the call went well, with what the model was told (cut short)."""
    event: JSONObject = {"event": "tool_end", "step": step, "tool": tool, "outcome": outcome, "durationMs": duration_ms}
    if outcome != "ok":
        text = " ".join(seen.text.split())
        event["message"] = text if len(text) <= 300 else text[:299] + "…"
    emit(event)


def _fail(entry: StepOutcome, outcome: str, text: str, exc: LlmcError | None = None) -> None:
    entry["outcome"] = outcome
    entry["seenResult"] = ToolResult(content=[{"type": "text", "text": text}], is_error=True)
    if exc is not None:
        entry["error"] = exc.to_json()


def provider_tool_names(translation: Translation) -> dict[str, tuple[str, str]]:
    """translate's NameMap as a plain dict: the provider's tool name -> (server, tool)."""
    return dict(translation.names)


def _locked(progress: Progress | None) -> Progress:
    """Progress events come from tool threads too: deliver them one at a time."""
    if progress is None:
        return lambda event: None
    lock = threading.Lock()

    def emit(event: JSONObject) -> None:
        with lock:
            progress(event)

    return emit


def _ms(t0: float) -> float:
    return round((time.monotonic() - t0) * 1000, 1)
