"""The parts of one tool call the pipeline (services/pipeline.py, the ONLY path that runs a tool)
puts together: who runs it (Invocation, services/invocation.py), the policy's decision and its audit record (authorize,
record_decisions), the open-call registry interruptions close, the outcome record (close_call),
the result cache's entry of a call (cache_for) and the approval a confirmation would need."""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING, cast

from llmc_cli import audit, interrupts, policy, telemetry
from llmc_cli.catalog import Catalog
from llmc_cli.config.profiles import lock_path
from llmc_cli.config.secrets import Masker
from llmc_cli.errors import ConfigError, LlmcError, RpcError, UsageError
from llmc_cli.guard import clearance
from llmc_cli.mcp.jsonrpc import LONE_SURROGATE, has_lone_surrogate
from llmc_cli.model import (
    ARGUMENTS_TOO_DEEP,
    MAX_ARGUMENT_DEPTH,
    JSONObject,
    NamedTuple,
    Tool,
    ToolCall,
    arguments_too_deep,
)
from llmc_cli.policy import Decision
from llmc_cli.policy.approval import Approval, call_text
from llmc_cli.services import routes
from llmc_cli.services.invocation import Conclusions as Conclusions
from llmc_cli.services.invocation import Invocation as Invocation
from llmc_cli.services.routes import NOT_FREE_TEXT, hidden, record_base
from llmc_cli.services.routes import Authorization as Authorization
from llmc_cli.services.routes import decision_records as decision_records
from llmc_cli.services.routes import masked as masked

if TYPE_CHECKING:
    from llmc_cli.store.chain import AuditRecord, AuditSink
    from llmc_cli.store.results import ResultCache


class OpenCalls:
    """Calls whose "allow" decision is on disk and whose outcome is not: exactly one outcome
    record each. When the command is interrupted (Ctrl-C, SIGTERM, SIGHUP) the main thread
    records `interrupted` for every call still open, those a batch decided but had not started
    included; a worker thread that finishes later finds its call closed and records nothing."""

    def __init__(self) -> None:

        self._lock = threading.Lock()
        self._calls: dict[int, tuple[AuditSink, AuditRecord, Masker]] = {}
        self._next = 0

    def open(self, log: AuditSink, base: AuditRecord, masker: Masker) -> int:
        with self._lock:
            self._next += 1
            self._calls[self._next] = (log, base, masker)
            return self._next

    def open_allowed(self, log: AuditSink, authorizations: list[Authorization]) -> None:
        """open() of each allowed call among `authorizations` (its `opened` set), under one lock."""
        with self._lock:
            calls = self._calls
            for a in authorizations:
                if a.decision.action == "allow":
                    self._next += 1
                    calls[self._next] = (log, a.base, a.masker)
                    a.opened = self._next

    def close(self, opened: int | None) -> bool:
        """True once per call: the caller writes its outcome record. Once the command is
        interrupted, False: what a call in flight reports then (its server was stopped under
        it) is not its outcome; interrupt_all records `interrupted` instead."""

        lock = self._lock  # (acquire and release, not `with`: see mcp/inflight.InFlight.open; a call each)
        lock.acquire()
        try:
            if interrupts.received:  # requested(), without its call (a batch closes one a call)
                return False
            return self._calls.pop(opened, None) is not None  # type: ignore[arg-type]
        finally:
            lock.release()

    def interrupt_all(self, reason: str, outcome: str = "interrupted") -> None:
        """An `interrupted` (or `abandoned`) outcome for every open call, on disk before this returns."""
        with self._lock:
            calls, self._calls = list(self._calls.values()), {}
        logs: list[AuditSink] = []
        for log, base, masker in calls:
            log.record(with_base(base, "outcome", {"outcome": outcome, "reason": reason}, masker), before_action=False)
            if log not in logs:
                logs.append(log)
        for log in logs:
            log.flush()  # a batch's trail keeps outcome records in memory


OPEN_CALLS = OpenCalls()


def with_base(base: AuditRecord, event: str, record: AuditRecord, masker: Masker) -> AuditRecord:
    """A call's record of `event`: its base fields (masked already, Authorization) and `record`'s,
    masked here as masked() masks them, into one copy of the base (not three dicts a record)."""
    out: dict[str, object] = base.copy()  # type: ignore[assignment]  # (dict(base) is a type's call: ~700 instructions more)
    out["event"] = event  # (where {"event": event, **record} put it, without that dict)
    for k, v in record.items():
        out[k] = masker.text(v) if k == "tool" and isinstance(v, str) else v if k in NOT_FREE_TEXT else masker(v)
    return out  # type: ignore[return-value]  # (no typing.cast: a call per record)


def record_decisions(log: AuditSink, invocation: Invocation, authorizations: list[Authorization]) -> None:
    """The decision records of calls about to run, on disk in one write; each allowed call is
    then open until its outcome is recorded. An interruption waits until both are done, so no
    decision is ever on disk without being open."""

    with interrupts.deferred():
        log.record_before_actions(decision_records(authorizations))
        OPEN_CALLS.open_allowed(log, authorizations)


def authorize(
    catalog: Catalog, invocation: Invocation, call: ToolCall, tool: Tool | None = None, cleared: bool = False
) -> Authorization:
    """The policy's decision on a call (a confirmation asked or answered here); nothing runs.
    `tool`: the call's tool, when the caller found it already (the catalog's, for this call).
    `cleared`: the caller found no unstarted_denial of (call.server, call.tool) under this very
    invocation, so it is not asked again (a few thousand instructions a call): that answer
    depends on nothing but the invocation's profile and conclusions, which no stage changes.
    The second cleared call of a tool makes its Route (services/routes.py): what every later one
    concludes alike."""
    profile = invocation.profile
    if cleared and tool is not None:
        route = invocation.routes.get((call.server, call.tool))
        if route is None or not route.holds(invocation, tool):
            route = routes.route_of(invocation, (call.server, call.tool), tool)
        if route is not None and route.decision is not None and (authorized := route.authorize(call)) is not None:
            return authorized
    try:
        canonical = call_text(call)  # what the call's hash is taken over
    except RecursionError:  # far deeper than MAX_ARGUMENT_DEPTH
        raise UsageError(ARGUMENTS_TOO_DEEP) from None
    # Whoever sent them (a `KEY:=JSON` pair, a keeper's client): deeper than the limit only with
    # more opening brackets than that in the text (one count in C before any walk).
    if canonical.count("[") + canonical.count("{") > MAX_ARGUMENT_DEPTH and arguments_too_deep(call.arguments):
        raise UsageError(ARGUMENTS_TOO_DEEP)
    digest = policy.call_hash(call, invocation.approval_key, canonical=canonical)  # once: every decision below carries it
    denial = None if cleared else unstarted_denial(invocation, call.server, call.tool, digest)
    if denial is not None:  # above the caller's clearance, or denied by name: the server is not even started
        return _authorization(invocation, call, denial, None)
    if tool is None:
        tool = catalog.require_tool(call.server, call.tool)
    # the text first: an ASCII one (a flag of the string) has none, else one search in C
    if not canonical.isascii() and LONE_SURROGATE.search(canonical) is not None and has_lone_surrogate(call.arguments):
        # Text no UTF-8 writer accepts (a model's "\\ud800" escape): not checked against path
        # rules, not recorded faithfully, not sent; the record shows it as U+FFFD.
        decision = policy.Decision(
            "deny", "invalid_text", "the arguments contain a lone surrogate (invalid Unicode text)", digest
        )
    else:
        decision = policy.decide(
            call,
            tool,
            profile.profile.policy,
            caller=invocation.caller,  # type: ignore[arg-type]
            # asked only under an argument rule: without any, no partial made a call
            cwd=functools.partial(catalog.pool.working_directory, call.server) if profile.profile.policy.args else None,
            approved=invocation.state.approvals.is_approved,
            digest=digest,
            verdicts=invocation.verdicts,
        )
    if decision.action != "deny" and profile.profile.guard.descriptions == "hide":
        decision = hidden(tool, decision)
    if profile.profile.lock and decision.action != "deny":
        # A denied tool is denied (exit 4), whatever the lock says: `tools lock` pins only
        # the tools the policy allows, so asking the lock first would demand a re-lock that
        # can never help. A drifted tool is refused before anyone is asked to confirm it.
        from llmc_cli.guard.scan import tool_verdict
        from llmc_cli.lockfile import check

        check(lock_path(profile), tool, tool_verdict)
    approval = None
    if decision.action == "confirm":
        decision, approval = _confirm(invocation, call, tool, decision)
    return _authorization(invocation, call, decision, approval, tool.output_schema)


def clearance_denial(invocation: Invocation, server: str, call_hash: str | None = None) -> Decision | None:
    """A denial when `server` is classified above the invocation's clearance (guard/clearance.py)."""
    level = invocation.cleared_for
    allowed = invocation.cleared_servers.get(server)
    if allowed is None:  # judged once per server and invocation: neither the profile nor the level changes
        allowed = invocation.cleared_servers[server] = clearance.cleared(invocation.profile.profile, server, level)
    if allowed:
        return None
    return policy.Decision("deny", "clearance", clearance.reason(invocation.profile.profile, server, level), call_hash)


def unstarted_denial(invocation: Invocation, server: str, tool: str, call_hash: str | None = None) -> Decision | None:
    """A denial needing nothing of the server, so not started (least privilege): clearance, or the name."""
    config, named = invocation.profile.profile.policy, invocation.conclusions.named
    return clearance_denial(invocation, server, call_hash) or policy.denied_by_name(f"{server}.{tool}", config, call_hash, named)


def _authorization(
    invocation: Invocation, call: ToolCall, decision: Decision, approval: Approval | None, output_schema: JSONObject | None = None
) -> Authorization:
    telemetry.policy_decision(call.qualified_name, decision.action, decision.rule, invocation.caller)
    masker = invocation.masker.with_arguments(call.arguments)
    base = record_base(invocation, call.server, call.tool, masker)
    base["arguments"] = masker(call.arguments)
    if decision.call_hash is not None:
        base["callHash"] = decision.call_hash
    return Authorization(call, decision, base, masker, None, approval, output_schema, True)


class CacheEntry(NamedTuple):
    """Where a cacheable call's result is looked up and kept. The cache is best effort: a store
    that cannot be read or written costs a call to the server, never the call itself."""

    store: ResultCache
    key: str
    server: str
    ttl: float
    masker: Masker

    def get(self) -> JSONObject | None:
        try:
            return self.store.get(self.key, self.server, self.ttl)
        except ConfigError:
            return None

    def put(self, raw: JSONObject, body: bytes) -> None:
        from llmc_cli.services import caching

        if caching.storable(raw, body) and caching.secret_free(raw, self.masker):
            try:
                self.store.put(self.key, self.server, raw, self.ttl)
            except ConfigError:
                pass


def cache_for(catalog: Catalog, invocation: Invocation, authorized: Authorization) -> CacheEntry | None:
    """The cache entry of an allowed call whose tool [cache] lists and is read-only; None otherwise.
    (--no-cache skips the lookup, not the store: the fresh answer replaces the entry.) A server
    that announced tools/list_changed has its entries dropped first."""
    profile = invocation.profile.profile
    if not profile.cache.tools:  # no tool is cached: nothing to import or look up
        return None
    from llmc_cli.services import caching

    call = cast(ToolCall, authorized.call)
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
    table = profile.servers.get(call.server)
    if table is not None and table.per_session and invocation.host_session is None:
        return None  # its state is a host session's own; a local command's session ends with it
    session = invocation.host_session if table is not None and table.per_session else None
    spec = catalog.specs.get(call.server)  # as reached now: ${VAR}s expanded
    reach = caching.reach(spec, invocation.approval_key) if spec is not None else None
    return CacheEntry(
        store,
        caching.key(invocation.profile, principal, tool, call, authorized.decision.call_hash, session=session, reach=reach),
        call.server,
        profile.cache.ttl_seconds,
        invocation.masker.with_arguments(call.arguments),
    )


def close_call(log: AuditSink, authorized: Authorization, record: AuditRecord, own: bool = False) -> None:
    """The one outcome record of a decided call, unless an interruption recorded it already.
    `own`: every field of `record` is one llmc writes itself (NOT_FREE_TEXT's, masked where
    made): added to the base as they are, not each asked (a batch's every call)."""
    if OPEN_CALLS.close(authorized.opened):
        if own:
            out = authorized.base.copy()
            out["event"] = "outcome"
            out.update(record)
        else:
            out = with_base(authorized.base, "outcome", record, authorized.masker)
        log.record(out, before_action=False)


def close_outcome(log: AuditSink, authorized: Authorization, outcome: str, duration: float, size: int, digest: str) -> None:
    """close_call(log, authorized, {"outcome", "durationMs", "resultBytes", "resultSha256"},
    own=True): the outcome record of a call that returned a result, without findings or the
    result itself (a batch's every call), its fields set on the base's copy (no dict of them)."""
    if OPEN_CALLS.close(authorized.opened):
        out = authorized.base.copy()
        out["event"], out["outcome"], out["durationMs"], out["resultBytes"], out["resultSha256"] = (
            "outcome",
            outcome,
            duration,
            size,
            digest,
        )
        log.record(out, before_action=False)


def masked_error(exc: LlmcError, masker: Masker) -> LlmcError:
    """The error with the call's secrets masked in its message and details: an upstream's error
    may quote a secret argument or its own credentials, and the error goes on to a terminal, an
    MCP host (the gateway's other tenants' operator secrets included) or a model's provider."""
    exc.message = masker.text(exc.message)
    exc.args = (exc.message, *exc.args[1:])
    exc.details = masker.strings(exc.details)
    if isinstance(exc, RpcError):
        exc.data = exc.details.get("data")
    return exc


def _confirm(invocation: Invocation, call: ToolCall, tool: Tool, decision: Decision) -> tuple[Decision, Approval | None]:
    """A confirmation: --yes, a human on a terminal, or a denial with what pre-approving this
    exact call would take (a front end says how, policy/approval.py hint())."""

    if invocation.assume_yes:
        return Decision("allow", f"{decision.rule} (--yes)", "confirmed with --yes", decision.call_hash), None
    if invocation.interactive and invocation.confirm is not None:
        if invocation.confirm(call, tool):
            return Decision("allow", f"{decision.rule} (confirmed)", "confirmed by the user", decision.call_hash), None
        return Decision("deny", f"{decision.rule} (refused)", "refused by the user", decision.call_hash), None
    denied = Decision("deny", decision.rule, f"{decision.reason}, and there is no terminal to ask", decision.call_hash)
    secret = audit.mask_secrets(call.arguments) != call.arguments  # masked as the audit log masks it
    return denied, Approval.of(invocation.profile, call, decision.call_hash, secret=secret)
