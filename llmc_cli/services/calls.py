"""One tool call: who runs it (Invocation), the policy's decision and its audit record (authorize,
record_decisions), the call and its outcome record (call_tool, the ONLY path that runs a tool).
A request and its outcome record (run_recorded, record_success) are shared with reads.py."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, cast

from llmc_cli import telemetry
from llmc_cli.catalog import Catalog
from llmc_cli.config.profiles import LoadedProfile
from llmc_cli.config.secrets import Masker, environment_secrets
from llmc_cli.errors import (
    Cancelled,
    ConfigError,
    InputRequired,
    LlmcError,
    PolicyDenied,
    ProtocolError,
    RpcError,
    TimeoutExpired,
    UsageError,
)
from llmc_cli.mcp.jsonrpc import has_lone_surrogate
from llmc_cli.model import (
    ARGUMENTS_TOO_DEEP,
    JSONObject,
    Tool,
    ToolCall,
    ToolResult,
    arguments_too_deep,
    canonical_json,
    compact_json,
)

if TYPE_CHECKING:
    from llmc_cli.policy import Decision
    from llmc_cli.services.reads import Read
    from llmc_cli.store.chain import AuditRecord, AuditSink
    from llmc_cli.store.results import ResultCache
    from llmc_cli.store.state import State


@dataclass
class Invocation:
    """Who runs a tool call and how a human may be asked about it."""

    profile: LoadedProfile
    # The profile's state (services.open_state), composed once by whoever runs the command or the
    # gateway: the rate windows, approvals and result cache every call uses, and the audit chain's store.
    state: State
    command: str = "call"  # call | ask | batch
    # "human": a command a person typed (call, call --batch); "model": calls an LLM chose (ask,
    # sampling, the gateway). The default is the guarded one.
    caller: str = "model"
    interactive: bool = False  # a human can answer a confirmation prompt
    assume_yes: bool = False  # --yes: confirmations answered yes
    confirm: Callable[[ToolCall, Tool | None], bool] | None = None
    conversation_id: str | None = None
    audit: AuditSink | None = None  # where call_tool writes: None = the state's audit log; a batch's audit.Deferred
    # Who asked, when that is not this process's user: an MCP host through the gateway (its
    # clientInfo and, over HTTP, the authenticated principal). Recorded in every audit record.
    client: JSONObject | None = None
    # The masking of the environment's and the profile's secrets, when the caller already made it:
    # the gateway makes an invocation per call; its environment and profile are fixed.
    environment_masker: Masker | None = None
    use_cache: bool = True  # False: --no-cache, every call goes to its server (its answer still cached)

    @cached_property
    def masker(self) -> Masker:
        """Masks the secret values of the environment and the profile in audit records; made
        once per invocation (a batch would otherwise scan the environment twice per call)."""
        if self.environment_masker is not None:
            return self.environment_masker
        return Masker(environment_secrets(self.profile.profile))


@dataclass
class Authorization:
    """A call (or a read) the policy has decided on, with the fields every audit record of it carries."""

    call: ToolCall | Read
    decision: Decision
    base: AuditRecord
    masker: Masker  # the invocation's, and the values of this call's secret-looking arguments
    opened: int | None = None  # its entry in OPEN_CALLS once an allow decision is on disk

    def decision_record(self) -> AuditRecord:
        d = self.decision
        return {**self.base, "event": "decision", "decision": d.action, "rule": d.rule, "reason": d.reason}


class OpenCalls:
    """Calls whose "allow" decision is on disk and whose outcome is not: exactly one outcome
    record each. When the command is interrupted (Ctrl-C, SIGTERM, SIGHUP) the main thread
    records `interrupted` for every call still open, those a batch decided but had not started
    included; a worker thread that finishes later finds its call closed and records nothing."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self._calls: dict[int, tuple[AuditSink, AuditRecord, Masker]] = {}
        self._next = 0

    def open(self, log: AuditSink, base: AuditRecord, masker: Masker) -> int:
        with self._lock:
            self._next += 1
            self._calls[self._next] = (log, base, masker)
            return self._next

    def close(self, opened: int | None) -> bool:
        """True once per call: the caller writes its outcome record. Once the command is
        interrupted, False: what a call in flight reports then (its server was stopped under
        it) is not its outcome; interrupt_all records `interrupted` instead."""
        from llmc_cli import interrupts

        with self._lock:
            if interrupts.requested():
                return False
            return self._calls.pop(opened, None) is not None  # type: ignore[arg-type]

    def interrupt_all(self, reason: str, outcome: str = "interrupted") -> None:
        """An `interrupted` (or `abandoned`) outcome for every open call, on disk before this returns."""
        with self._lock:
            calls, self._calls = list(self._calls.values()), {}
        logs: list[AuditSink] = []
        for log, base, masker in calls:
            write_record(log, {**base, "event": "outcome", "outcome": outcome, "reason": reason}, masker, before_action=False)
            if log not in logs:
                logs.append(log)
        for log in logs:
            log.flush()  # a batch's trail keeps outcome records in memory


OPEN_CALLS = OpenCalls()

# Record fields llmc writes itself (names, verdicts, numbers, hashes): never text a server or a
# person chose, and kept readable even where a short secret happens to equal one of them.
# "arguments" and "result" are masked where they are built, with the same masker.
_NOT_FREE_TEXT = frozenset(
    {
        "time",
        "event",
        "decision",
        "outcome",
        "rule",
        "profile",
        "server",
        "tool",
        "command",
        "conversation",
        "user",
        "host",
        "pid",
        "durationMs",
        "resultBytes",
        "callHash",
        "resultSha256",
        "arguments",
        "result",
    }
)


def write_record(log: AuditSink, record: AuditRecord, masker: Masker, *, before_action: bool) -> None:
    """Every record that is not a batch of decisions goes out through here (those through record_decisions)."""
    log.record(masked(record, masker), before_action=before_action)


def masked(record: AuditRecord, masker: Masker) -> AuditRecord:
    """Secret values masked in every free-text field (a reason or an error message may quote an
    argument or the environment), before the record is hashed into the chain."""
    return cast("AuditRecord", {k: v if k in _NOT_FREE_TEXT else masker(v) for k, v in record.items()})


def record_decisions(log: AuditSink, invocation: Invocation, authorizations: list[Authorization]) -> None:
    """The decision records of calls about to run, on disk in one write; each allowed call is
    then open until its outcome is recorded. An interruption waits until both are done, so no
    decision is ever on disk without being open."""
    from llmc_cli import interrupts

    with interrupts.deferred():
        log.record_before_actions([masked(a.decision_record(), a.masker) for a in authorizations])
        for a in authorizations:
            if a.decision.action == "allow":
                a.opened = OPEN_CALLS.open(log, a.base, a.masker)


def authorize(catalog: Catalog, invocation: Invocation, call: ToolCall) -> Authorization:
    """The policy's decision on a call (a confirmation asked or answered here); nothing runs."""
    from llmc_cli import audit, policy

    profile = invocation.profile
    if arguments_too_deep(call.arguments):  # whoever sent them (a `KEY:=JSON` pair, a keeper's client)
        raise UsageError(ARGUMENTS_TOO_DEEP)
    tool = catalog.require_tool(call.server, call.tool)
    if has_lone_surrogate(call.arguments):
        # Text no UTF-8 writer accepts (a model's "\\ud800" escape): not checked against path
        # rules, not recorded faithfully, not sent; the record shows it as U+FFFD.
        decision = policy.Decision(
            "deny", "invalid_text", "the arguments contain a lone surrogate (invalid Unicode text)", policy.call_hash(call)
        )
    else:
        decision = policy.decide(
            call,
            tool,
            profile.profile.policy,
            caller=invocation.caller,  # type: ignore[arg-type]
            cwd=catalog.pool.working_directory(call.server),
            approved=invocation.state.approvals.is_approved,
        )
    if profile.profile.lock and decision.action != "deny":
        # A denied tool is denied (exit 4), whatever the lock says: `tools lock` pins only
        # the tools the policy allows, so asking the lock first would demand a re-lock that
        # can never help. A drifted tool is refused before anyone is asked to confirm it.
        from llmc_cli.lockfile import check

        check(lock_path(profile), tool)
    if decision.action == "confirm":
        decision = _confirm(invocation, call, tool, decision)
    telemetry.policy_decision(call.qualified_name, decision.action, decision.rule, invocation.caller)
    masker = invocation.masker.with_arguments(call.arguments)
    base = {
        **audit.identity(),
        "profile": profile.name,
        "command": invocation.command,
        "conversation": invocation.conversation_id,
        "client": invocation.client,
        "server": call.server,
        "tool": call.tool,
        "arguments": masker(call.arguments),
        "callHash": decision.call_hash,
    }
    return Authorization(call, decision, cast("AuditRecord", {k: v for k, v in base.items() if v is not None}), masker)


def call_tool(
    catalog: Catalog,
    invocation: Invocation,
    call: ToolCall,
    *,
    timeout: float | None = None,
    authorized: Authorization | None = None,
    meta: JSONObject | None = None,
) -> ToolResult:
    """The ONLY path that runs a tool: policy decision (and confirmation) -> audit record of the
    decision, on disk -> rate limit -> the call, or its answer from [cache] (services/caching.py)
    -> audit record of the outcome (`cached` for a cached answer). A denial is
    audited, then raised as PolicyDenied. Returns the result (is_error included); raises
    LlmcError otherwise. `authorized`: decided, and its decision record written, by the caller
    (run_batch writes all of a batch's decisions at once). `meta`: the request's _meta, relayed
    (the gateway's progress token)."""
    from llmc_cli import interrupts
    from llmc_cli.services.state import audit_log

    log = invocation.audit or audit_log(invocation.state)
    if authorized is None:
        interrupts.check()  # an interrupted command starts no new call (the calls of `ask` run in threads)
        authorized = authorize(catalog, invocation, call)
        record_decisions(log, invocation, [authorized])
    decision = authorized.decision
    if decision.action != "allow":
        raise PolicyDenied(f"denied: {decision.reason} [{decision.rule}]", rule=decision.rule, callHash=decision.call_hash)
    cache = _cache_for(catalog, invocation, authorized)
    raw, body, duration, hit = run_recorded(
        log,
        invocation,
        authorized,
        "tools/call",
        f"the result of {call.tool}",
        lambda: catalog.session(call.server).call_tool(call.tool, call.arguments, timeout=timeout, meta=meta),
        cached=cache.get if cache and invocation.use_cache else None,
    )
    result = ToolResult.from_mcp(raw)
    result.duration_ms = duration
    result.cached = hit
    if cache and not hit:
        cache.put(raw, body)
    record_success(
        log, invocation, authorized, "cached" if hit else "tool_error" if result.is_error else "ok", duration, raw, body
    )
    return result


@dataclass
class _CacheEntry:
    """Where a cacheable call's result is looked up and kept. The cache is best effort: a store
    that cannot be read or written costs a call to the server, never the call itself."""

    store: ResultCache
    key: str
    server: str
    ttl: float

    def get(self) -> JSONObject | None:
        try:
            return self.store.get(self.key, self.server)
        except ConfigError:
            return None

    def put(self, raw: JSONObject, body: bytes) -> None:
        from llmc_cli.services import caching

        if caching.storable(raw, body):
            try:
                self.store.put(self.key, self.server, raw, self.ttl)
            except ConfigError:
                pass


def _cache_for(catalog: Catalog, invocation: Invocation, authorized: Authorization) -> _CacheEntry | None:
    """The cache entry of an allowed call whose tool [cache] lists and is read-only; None otherwise.
    (--no-cache skips the lookup, not the store: the fresh answer replaces the entry.) A server
    that announced tools/list_changed has its entries dropped first."""
    from llmc_cli.services import caching

    call, profile = cast(ToolCall, authorized.call), invocation.profile.profile
    if not profile.cache.tools:
        return None
    tool = catalog.require_tool(call.server, call.tool)
    if not caching.cacheable(tool, call.qualified_name, profile):
        return None
    store = invocation.state.results
    try:
        caching.forget_changed(catalog, store, call.server)
    except ConfigError:
        pass
    principal = (invocation.client or {}).get("principal")
    principal = principal if isinstance(principal, str) else None  # host_identity's: a str or absent
    return _CacheEntry(
        store,
        caching.key(invocation.profile, principal, tool, call, authorized.decision.call_hash),
        call.server,
        profile.cache.ttl_seconds,
    )


# The list each result carries (a tool result's content may be left out: it is then empty).
_RESULT_LIST = {"tools/call": ("content", False), "resources/read": ("contents", True), "prompts/get": ("messages", True)}


def run_recorded(
    log: AuditSink,
    invocation: Invocation,
    authorized: Authorization,
    method: str,
    what: str,
    send: Callable[[], JSONObject],
    cached: Callable[[], JSONObject | None] | None = None,
) -> tuple[JSONObject, bytes, float, bool]:
    """An allowed call or read (`what` names its result in messages): rate limit -> the cached
    result, if `cached` has one, else the request -> (result, its canonical JSON, milliseconds,
    whether it came from the cache). A cached answer counts against the rate limits like any
    call: they limit what a caller may do, and the policy decides every call afresh. Every
    failure gets its outcome record here, then is raised; the caller records a success (record_success)."""
    from llmc_cli import interrupts, policy

    request, profile = authorized.call, invocation.profile
    started = time.monotonic()

    def elapsed() -> float:
        return round((time.monotonic() - started) * 1000, 1)

    try:
        interrupts.check()  # a batch's call not yet started when the command was interrupted
        policy.acquire_rate(profile.name, request.qualified_name, profile.profile.policy, invocation.state.rate_windows)
    except (PolicyDenied, ConfigError) as exc:  # limit reached, or the count could not be stored: not run
        _outcome(log, invocation, authorized, {"outcome": "denied", "rule": exc.details.get("rule"), "reason": exc.message})
        raise
    try:
        hit = cached() if cached is not None else None
        raw = hit if hit is not None else send()
        items, required = _RESULT_LIST[method]
        if not isinstance(raw.get(items, None if required else []), list):
            raise ProtocolError(f"{request.server}: {method} result has no {items} list")
        try:  # what the outcome record hashes; the encoding fails on a lone surrogate
            body = canonical_json(raw).encode("utf-8")
        except UnicodeEncodeError:
            # JSON escapes such as "\\ud800" decode to text no UTF-8 writer accepts (the audit
            # log, stdout, a provider's API): the result cannot be passed on as it is.
            raise ProtocolError(f"{request.server}: {what} contains a lone surrogate (invalid Unicode text)") from None
    except LlmcError as exc:
        kind = {TimeoutExpired: "timeout", Cancelled: "cancelled", InputRequired: "input_required"}.get(
            type(exc), "transport_error"
        )
        _outcome(log, invocation, authorized, {"outcome": kind, "error": exc.message, "durationMs": elapsed()})
        _masked_error(exc, authorized.masker)
        raise
    except Exception as exc:  # a bug must not leave a decision without an outcome
        _outcome(
            log,
            invocation,
            authorized,
            {"outcome": "internal_error", "error": f"{type(exc).__name__}: {exc}", "durationMs": elapsed()},
        )
        raise
    return raw, body, elapsed(), hit is not None


def record_success(
    log: AuditSink, invocation: Invocation, authorized: Authorization, outcome: str, duration: float, raw: JSONObject, body: bytes
) -> None:
    """The outcome record of a call or read that returned a result (`result` with audit_results)."""
    record: AuditRecord = {
        "outcome": outcome,
        "durationMs": duration,
        "resultBytes": len(body),
        "resultSha256": hashlib.sha256(body).hexdigest(),
    }
    if invocation.profile.profile.audit_results:
        record["result"] = authorized.masker(raw)
    _outcome(log, invocation, authorized, record)


def _outcome(log: AuditSink, invocation: Invocation, authorized: Authorization, record: AuditRecord) -> None:
    """The one outcome record of a decided call, unless an interruption recorded it already."""
    if OPEN_CALLS.close(authorized.opened):
        write_record(log, {**authorized.base, "event": "outcome", **record}, authorized.masker, before_action=False)


def _masked_error(exc: LlmcError, masker: Masker) -> LlmcError:
    """The error with the call's secrets masked in its message and details: an upstream's error
    may quote a secret argument or its own credentials, and the error goes on to a terminal, an
    MCP host (the gateway's other tenants' operator secrets included) or a model's provider."""
    exc.message = masker.text(exc.message)
    exc.args = (exc.message, *exc.args[1:])
    exc.details = masker.strings(exc.details)
    if isinstance(exc, RpcError):
        exc.data = exc.details.get("data")
    return exc


def lock_path(profile: LoadedProfile) -> str:
    """The profile's lock file; a relative path is relative to the profile file that names it."""
    from pathlib import Path

    path = Path(profile.profile.lock or "").expanduser()
    return str(path if path.is_absolute() or profile.path is None else profile.path.parent / path)


def _confirm(invocation: Invocation, call: ToolCall, tool: Tool, decision: Decision) -> Decision:
    """A confirmation: --yes, a human on a terminal, or a denial that says how to approve."""
    from llmc_cli.policy import Decision

    if invocation.assume_yes:
        return Decision("allow", f"{decision.rule} (--yes)", "confirmed with --yes", decision.call_hash)
    if invocation.interactive and invocation.confirm is not None:
        if invocation.confirm(call, tool):
            return Decision("allow", f"{decision.rule} (confirmed)", "confirmed by the user", decision.call_hash)
        return Decision("deny", f"{decision.rule} (refused)", "refused by the user", decision.call_hash)
    return Decision(
        "deny",
        decision.rule,
        f"{decision.reason}, and there is no terminal to ask: pass --yes, or pre-approve this exact "
        f"call: {approval_hint(invocation.profile, call, decision.call_hash)}",
        decision.call_hash,
    )


def approval_hint(profile: LoadedProfile, call: ToolCall, call_hash: str | None) -> str:
    """How to pre-approve exactly this call: the `llmc policy approve` command with the call's own
    arguments, shell-quoted, ready to paste; when an argument holds a secret (masked as the audit
    log masks it), the command would show it, so the callHash to list under `approved` instead."""
    import shlex

    from llmc_cli.audit import mask_secrets

    # A profile loaded by path is named by its path: `-p NAME` would not find it.
    name = profile.name if profile.path is None or profile.path.parent.name == "profiles" else str(profile.path)
    if mask_secrets(call.arguments) != call.arguments:
        return (
            f'an argument holds a secret, so add "{call_hash}" to `approved` under [policy] of profile '
            f"{name} (the hash of this exact call)"
        )
    arguments = compact_json(call.arguments)
    return (
        f"llmc -p {shlex.quote(name)} policy approve {shlex.quote(call.qualified_name)} --json "
        f"{shlex.quote(arguments)} --write ({call_hash})"
    )
