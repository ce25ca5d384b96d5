"""The ONE entry of every tool call and every read (resources/read, prompts/get, completion/complete): a request goes
to Pipeline.run, whose stages are these, in this order, and nowhere else:

    resolve   the name (SERVER.TOOL, a bare name, or a route the caller found) to a tool
    validate  the arguments against its inputSchema (when the request asks for it)
    authorize the policy's decision: rules, the lock, confirmation, pre-approved hashes; its
              audit record written before anything runs, durable before the call reaches its
              server ([audit] sync = "before_call") or before anything of it reaches the caller
              ("before_reply": synced while the server works; services/settle.py)
    limit     the profile's rate limits
    lookup    the result cache ([cache]), for a call whose tool it lists
    run       the request, through the catalog (a server of this process or a session keeper's);
              a call's structuredContent checked against its tool's outputSchema (exit 6 if not)
    inspect   the result, by the context's inspectors (services/inspect.py: DLP, classification)
    record    the outcome record, with the inspectors' findings

Who runs the calls (Invocation: the profile, its state, the command, human or model, how a
person is asked) is made once per command by open_calls(), or per host call of the gateway by
host_calls(); callers hand requests in and render the Outcome (or the LlmcError) that comes back.
A batch (services/batch.py) runs the same stages, its decisions written in one go."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING

from llmc_cli import audit, interrupts, policy, services
from llmc_cli.errors import Cancelled, ConfigError, InputRequired, LlmcError, PolicyDenied, ProtocolError, TimeoutExpired
from llmc_cli.mcp.validation import QuickCheck, check_structured, passes_quickly, quick_check, validate_arguments
from llmc_cli.model import JSONObject, Tool, ToolCall, ToolResult, canonical_json_bytes, sha256
from llmc_cli.services import calls, routes
from llmc_cli.services.calls import Authorization, Conclusions, Invocation
from llmc_cli.services.inspect import inspect, inspect_error
from llmc_cli.services.request import Outcome as Outcome
from llmc_cli.services.request import ToolRequest as ToolRequest
from llmc_cli.services.state import audit_log, open_state
from llmc_cli.services.tools import ToolResolver

if TYPE_CHECKING:
    from types import ModuleType

    from llmc_cli.audit.trail import ChainedLog
    from llmc_cli.catalog import Catalog
    from llmc_cli.config.profiles import LoadedProfile
    from llmc_cli.config.secrets import Masker
    from llmc_cli.mcp.session import ClientSession
    from llmc_cli.policy import Decision
    from llmc_cli.services.reads import Read
    from llmc_cli.store.chain import AuditRecord, AuditSink
    from llmc_cli.store.state import State


# What each result carries: a list (a tool result's content may be left out: it is then empty),
# or a completion's object (its values in it).
_RESULT_SHAPE: dict[str, tuple[str, bool, type]] = {
    "tools/call": ("content", False, list),
    "resources/read": ("contents", True, list),
    "prompts/get": ("messages", True, list),
    "completion/complete": ("completion", True, dict),
}


class Pipeline:
    """The calls and reads of one command (or one host call) against one catalog."""

    def __init__(self, catalog: Catalog, context: Invocation, *, named_as: str | None = None) -> None:
        self.catalog = catalog
        self.context = context
        self._named_as = named_as  # the profile as the command was given it (-p NAME|PATH): the resolver's cache key
        self._resolver: ToolResolver | None = None
        self._log: AuditSink | None = context.audit
        self._opened: ChainedLog | None = None  # the chain opened here (not handed in): released by close()
        # A batch's sessions, each found once (grouped()); one that cannot connect is asked each call
        self._sessions: dict[str, ClientSession] | None = None

    @property
    def profile(self) -> LoadedProfile:
        return self.context.profile

    @property
    def log(self) -> AuditSink:
        """Where the records go: the context's sink, else the state's audit chain (opened once)."""
        if self._log is None:
            self._log = self._opened = audit_log(self.context.state)
        return self._log

    @contextmanager
    def grouped(self) -> Iterator[AuditSink]:
        """Outcome records written in groups (audit.Deferred) while this lasts: a batch's."""

        before = self._log
        chain = audit_log(self.context.state)
        self._sessions = {}
        try:
            with audit.Deferred(chain) as trail:
                self._log = trail
                try:
                    yield trail
                finally:
                    self._log = before
        finally:
            self._sessions = None
            chain.release()

    def close(self) -> None:
        """The command is over: the audit chain opened here lets go of its files (not a sink handed in)."""
        if self._opened is not None:
            self._opened.release()

    # -- the entry ----------------------------------------------------------------------------

    def run(self, request: ToolRequest | Read) -> Outcome:
        """A call or a read through every stage. Raises PolicyDenied (audited) when the policy,
        a rate limit or an inspector says no, UsageError for arguments that do not fit, and the
        LlmcError of a failed request (after its outcome record)."""

        interrupts.check()  # an interrupted command starts no new call (the calls of `ask` run in threads)
        if not isinstance(request, ToolRequest):
            return self._read(request)
        route = self.route(request)
        if request.cleared or calls.unstarted_denial(self.context, *route) is None:
            call, tool = self.resolve(request, route)
            if request.validate:
                self.validate(call, tool)
            # the tool found once, by resolve; the route cleared once, here or by the caller
            # (resolving and validating change neither the invocation nor its conclusions)
            authorized = self.authorize(call, tool, True)
        else:
            # above the caller's clearance, or denied by name: denied (and recorded) without
            # starting the server to find the tool
            arguments = request.arguments if request.arguments is not None else request.typed({}) if request.typed else {}
            authorized = self.authorize(ToolCall(*route, arguments, call_id=request.call_id))
        self.decide([authorized])
        return self.execute(authorized, timeout=request.timeout, meta=request.meta)

    # -- the stages ---------------------------------------------------------------------------

    def route(self, request: ToolRequest) -> tuple[str, str]:
        """(server, tool name) of a request: ToolResolver for a name not yet routed."""
        if request.server is None:
            return self.resolver(request.name)
        return request.server, request.name

    def resolve(self, request: ToolRequest, route: tuple[str, str] | None = None) -> tuple[ToolCall, Tool]:
        """The call a request names, and its tool (`route`: the request's, when the caller has it)."""
        server, name = route or self.route(request)
        tool = request.tool
        if tool is None or request.server is None or (tool.server, tool.name) != (server, name):
            tool = self.catalog.require_tool(server, name)
        if request.arguments is not None:
            arguments = request.arguments
        else:
            arguments = request.typed(tool.input_schema) if request.typed is not None else {}
        return ToolCall(server, name, arguments, call_id=request.call_id), tool

    @property
    def resolver(self) -> ToolResolver:
        """One resolver per command: the tool-name cache is read once (services/tools.py)."""
        if self._resolver is None:
            disabled = [n for n, s in self.profile.profile.servers.items() if not s.enabled]  # named: said so
            self._resolver = ToolResolver(self.catalog, self._named_as, disabled)
        return self._resolver

    def validate(self, call: ToolCall, tool: Tool, *, here: bool = False, name: str | None = None) -> None:
        """The arguments against the tool's inputSchema (UsageError, exit 2). What the compiled
        subset check passes is valid here and now; for the rest a session keeper that holds the
        server checks them when there is one (it keeps jsonschema loaded, slow to import in a
        short-lived process), unless `here` (a batch: one import for every call). `name`:
        call.qualified_name, when the caller has it (a batch's, once per tool)."""
        name = call.qualified_name if name is None else name
        if passes_quickly(call.arguments, tool.input_schema, name):
            return  # the keeper would say the same (the same check): no round trip to it
        if not here and self.catalog.keeper is not None:
            from llmc_cli.keeper.transport import validate_in_keeper

            if validate_in_keeper(*self.catalog.keeper, call.arguments, tool.input_schema, name):
                return

        validate_arguments(call.arguments, tool.input_schema, name)

    def quick_check(self, tool: Tool, name: str) -> QuickCheck:
        """validate's subset check compiled for a batch's many calls of `tool` (mcp/validation.py)."""
        return quick_check(tool.input_schema, name)

    def settled_route(self, key: tuple[str, str], tool: Tool | None) -> routes.Route | None:
        """The Route authorize takes for every later cleared call of `key` once made (routes.py)."""
        return routes.settled(self.context, key, tool)

    def authorize(self, call: ToolCall, tool: Tool | None = None, cleared: bool = False) -> Authorization:
        """The policy's decision, nothing written yet (`tool`: found already; `cleared`: calls.authorize's)."""
        return calls.authorize(self.catalog, self.context, call, tool, cleared)

    def decide(self, authorizations: list[Authorization]) -> None:
        """The decision records, on disk in one write; each allowed call is open until its outcome.
        With [audit] sync = "before_reply" written, not yet durable: each call settles them
        (services/settle.py) before anything of it is shown."""
        calls.record_decisions(self.log, self.context, authorizations)
        if self.context.profile.profile.audit.sync == "before_reply":
            mark = self.log.mark()
            for authorized in authorizations:
                authorized.durable_at = mark

    def execute(self, authorized: Authorization, *, timeout: float | None = None, meta: JSONObject | None = None) -> Outcome:
        """A decided call: denied (PolicyDenied), or rate limits -> cache lookup -> run -> inspect -> record."""
        if authorized.decision.action != "allow":
            self._settle(authorized, "the tool was not run")
            raise authorized.denied()
        call: ToolCall = authorized.call  # type: ignore[assignment]  # a decided call's (no typing.cast: a call each)
        cache = calls.cache_for(self.catalog, self.context, authorized) if self.context.profile.profile.cache.tools else None
        held = self._sessions  # a batch's session of its server, once found: called straight (a call less)
        at = held.get(call.server) if held and timeout is None and meta is None else None
        send = (
            partial(at.call_tool, call.tool, call.arguments) if at is not None else partial(self._call_tool, call, timeout, meta)
        )
        # (partials, not closures: a closure's cells are made at every call); None: "the result of TOOL", made if said
        return self._through(authorized, "tools/call", None, send, cache)

    def _call_tool(self, call: ToolCall, timeout: float | None, meta: JSONObject | None) -> JSONObject:
        """The call, on the catalog's session of its server (a batch's: found once)."""
        held = self._sessions
        session = held.get(call.server) if held is not None else None
        if session is None:
            session = self.catalog.session(call.server)
            if held is not None:
                held[call.server] = session
        return session.call_tool(call.tool, call.arguments, timeout=timeout, meta=meta)

    def give_up(self, authorized: Authorization, outcome: str, reason: str) -> None:
        """The outcome record of a decided call that will not run, or whose run broke."""
        calls.close_call(self.log, authorized, {"outcome": outcome, "reason": reason})

    def read_only(self, tool: Tool) -> bool:
        """Whether calls of the tool may run side by side (annotations and [policy.hints])."""

        return policy.is_read_only(tool, tool.qualified_name, self.profile.profile.policy)

    # -- inside the stages --------------------------------------------------------------------

    def _read(self, request: Read) -> Outcome:

        # services/reads.py through the package's interface: loaded by the first read, not by a batch of calls
        authorized = services.authorize_read(self.catalog, self.context, request)
        self.decide([authorized])
        decision = authorized.decision
        if decision.action != "allow":
            self._settle(authorized, "it was not read")
            raise PolicyDenied(f"denied: {decision.reason} [{decision.rule}]", rule=decision.rule)
        return self._through(
            authorized,
            request.method,
            f"the {'completions of the ' if request.completing else ''}{request.kind} {request.name}",
            lambda: self.catalog.session(request.server).request(request.method, request.params()),
            None,
        )

    def _through(
        self,
        authorized: Authorization,
        method: str,
        what: str | None,
        send: Callable[[], JSONObject],
        cache: calls.CacheEntry | None,
    ) -> Outcome:
        """An allowed call or read (`what` names its result in messages; None: a call's) from its rate limit to
        its outcome record. A cached answer counts against the rate limits like any call: they
        limit what a caller may do, and the policy decides every call afresh. Every failure
        gets its outcome record here, then is raised."""
        config = self.context.profile.profile.policy
        if interrupts.received or config.calls_per_minute or config.tool_calls_per_minute or self.context.rate_share:
            self._limit(authorized)  # (else nothing it checks applies: a call less a call)
        started = time.monotonic_ns()
        try:
            raw, findings, deny, body, hit = self._produce(authorized, method, what, send, cache)
        except LlmcError as exc:
            kind = "audit_error" if isinstance(exc, audit.AuditError) else _ENDINGS.get(type(exc), "transport_error")
            inspect_error(self.context.inspectors, authorized.call, exc)  # DLP: an error quotes what a result would
            try:
                calls.close_call(
                    self.log, authorized, {"outcome": kind, "error": exc.message, "durationMs": _elapsed_ms(started)}
                )
            except audit.AuditError:
                if kind != "audit_error":
                    raise
                # the decision's sync failed (before_reply): this record most likely fails too;
                # the one error the caller hears is that one
            calls.masked_error(exc, authorized.masker)
            raise
        except Exception as exc:  # a bug must not leave a decision without an outcome
            error = f"{type(exc).__name__}: {exc}"
            calls.close_call(
                self.log, authorized, {"outcome": "internal_error", "error": error, "durationMs": _elapsed_ms(started)}
            )
            raise
        duration = (time.monotonic_ns() - started + 50_000) // 100_000 / 10  # tenths_of_ms, a call less
        if deny is not None:
            d = deny
            record: AuditRecord = {"outcome": "denied", "rule": d.rule, "reason": d.reason, "durationMs": duration}
            if findings:
                record["findings"] = authorized.masker(findings)
            calls.close_call(self.log, authorized, record)
            raise PolicyDenied(f"denied: {d.reason} [{d.rule}]", rule=d.rule, callHash=authorized.decision.call_hash)
        result = None
        outcome = "ok"
        if method == "tools/call":
            result = ToolResult.from_mcp(raw)
            result.duration_ms, result.cached = duration, hit
            outcome = "cached" if hit else "tool_error" if result.is_error else "ok"
            if cache is not None and not hit:
                cache.put(raw, body)
        self._record(authorized, outcome, duration, raw, body, findings)
        # Outcome(...) itself: a named tuple's __new__ is a Python function around this very call
        return _new_tuple(Outcome, (authorized.call, raw, duration, hit, tuple(findings), result))

    def _limit(self, authorized: Authorization) -> None:
        """The rate limits: a call over one is denied (audited), not run. Asked only when the
        command was interrupted or a limit is set (the caller's guard names what this checks:
        keep the two in step)."""

        request, profile = authorized.call, self.context.profile
        config = profile.profile.policy
        try:
            interrupts.check()  # a batch's call not yet started when the command was interrupted
            share = self.context.rate_share
            if config.calls_per_minute or config.tool_calls_per_minute or share:  # else no limit applies
                policy.acquire_rate(profile.name, request.qualified_name, config, self.context.state.rate_windows, share)
        except (PolicyDenied, ConfigError) as exc:  # limit reached, or the count could not be stored: not run
            self._settle(authorized, "the tool was not run")
            calls.close_call(self.log, authorized, {"outcome": "denied", "rule": exc.details.get("rule"), "reason": exc.message})
            raise

    def _produce(
        self,
        authorized: Authorization,
        method: str,
        what: str | None,
        send: Callable[[], JSONObject],
        cache: calls.CacheEntry | None,
    ) -> tuple[JSONObject, Sequence[JSONObject], Decision | None, bytes, bool]:
        """The result (from the cache, else the server) as inspected, the inspectors' findings
        and denial (Inspected's, without one made when no inspector runs), its canonical JSON,
        and whether it was the cache's."""

        request = authorized.call
        hit = cache.get() if cache is not None and self.context.use_cache else None
        if hit is not None:
            self._settle(authorized, "its cached result is withheld")
            raw = hit
        elif authorized.durable_at:
            raw = _settling().send_settling(self.log, authorized, send)
        else:
            raw = send()
        items, required, shape = _RESULT_SHAPE[method]
        if not isinstance(raw.get(items, None if required else []), shape):
            raise ProtocolError(f"{request.server}: {method} result has no {items} {'list' if shape is list else 'object'}")
        if authorized.output_schema is not None and hit is None:  # a tool that declares its result's shape
            # (a cached result was checked when the server sent it; what was kept may be redacted since)
            check_structured(raw, authorized.output_schema, request.qualified_name)
        inspectors = self.context.inspectors
        findings: Sequence[JSONObject] = ()
        deny = None
        if inspectors:
            raw, findings, deny = inspect(inspectors, request, self.context.profile, self.catalog.specs.get(request.server), raw)
        try:  # what the outcome record hashes (as bytes: no text made to be encoded); fails on a lone surrogate
            body = canonical_json_bytes(raw) if deny is None else b""
        except UnicodeEncodeError:
            # JSON escapes such as "\\ud800" decode to text no UTF-8 writer accepts (the audit
            # log, stdout, a provider's API): the result cannot be passed on as it is.
            what = what or f"the result of {request.tool}"  # type: ignore[union-attr]  # None: a call's
            raise ProtocolError(f"{request.server}: {what} contains a lone surrogate (invalid Unicode text)") from None
        return raw, findings, deny, body, hit is not None

    def _settle(self, authorized: Authorization, what: str) -> None:
        if authorized.durable_at:  # [audit] sync = "before_reply"
            _settling().settle(self.log, authorized, what)

    def _record(
        self,
        authorized: Authorization,
        outcome: str,
        duration: float,
        raw: JSONObject,
        body: bytes,
        findings: Sequence[JSONObject],
    ) -> None:
        """The outcome record of a call or read that returned a result (`result` with audit_results)."""
        digest = sha256(body).hexdigest()
        log = self._log or self.log  # (the property's call only while no log is open)
        if findings or self.context.profile.profile.audit_results:
            record: AuditRecord = {"outcome": outcome, "durationMs": duration, "resultBytes": len(body), "resultSha256": digest}
            if self.context.profile.profile.audit_results:
                record["result"] = authorized.masker(raw)
            if findings:
                record["findings"] = authorized.masker(findings)
            calls.close_call(log, authorized, record, own=not findings)  # (but findings, llmc's own fields)
        else:  # llmc's own fields only (most calls): set on the record's copy of the base, no dict of them
            calls.close_outcome(log, authorized, outcome, duration, len(body), digest)


# How a call that raised ended, by the error's class (its outcome record); others: transport_error,
# and audit_error: its decision could not be made durable ([audit] sync = "before_reply").
_ENDINGS: dict[type, str] = {TimeoutExpired: "timeout", Cancelled: "cancelled", InputRequired: "input_required"}


_new_tuple = tuple.__new__


def _settling() -> ModuleType:
    """services/settle.py, imported with [audit] sync = "before_reply" only."""
    from llmc_cli.services import settle

    return settle


def _elapsed_ms(started: int) -> float:
    """The milliseconds since `started` (time.monotonic_ns()), to 0.1 ms (tenths_of_ms)."""
    return (time.monotonic_ns() - started + 50_000) // 100_000 / 10


def tenths_of_ms(nanoseconds: int) -> float:
    """Nanoseconds as milliseconds to 0.1 ms, the float round(ms, 1) gives (a half rounds up):
    integer arithmetic and one division, where round(x, 1)'s correctly rounded decimal conversion
    cost ~4,500 instructions (twice a batch call). Written inline where a call counts."""
    return (nanoseconds + 50_000) // 100_000 / 10


def open_calls(
    catalog: Catalog,
    profile: LoadedProfile,
    *,
    command: str,
    caller: str = "human",
    named_as: str | None = None,
    interactive: bool = False,
    assume_yes: bool = False,
    confirm: Callable[[ToolCall, Tool | None], bool] | None = None,
    conversation_id: str | None = None,
    use_cache: bool = True,
    clearance: str | None = None,
) -> Pipeline:
    """The pipeline of one command: its context made here, the profile's state opened once.
    `caller`: "human" (a command a person typed) or "model" (calls an LLM chooses); `confirm`:
    how a person on a terminal is asked (with `interactive`); `named_as`: the profile as the
    command was given it, for the tool-name cache."""
    context = Invocation(
        profile=profile,
        state=open_state(profile),
        command=command,
        caller=caller,
        interactive=interactive,
        assume_yes=assume_yes,
        confirm=confirm,
        conversation_id=conversation_id,
        use_cache=use_cache,
        clearance=clearance,
    )
    return Pipeline(catalog, context, named_as=named_as)


def host_calls(
    catalog: Catalog,
    profile: LoadedProfile,
    state: State,
    *,
    audit: AuditSink,
    masker: Masker,
    client: JSONObject | None,
    interactive: bool = False,
    confirm: Callable[[ToolCall, Tool | None], bool] | None = None,
    host_session: str | None = None,
    clearance: str | None = None,
    conclusions: Conclusions | None = None,
    rate_share: tuple[str, int] | None = None,
) -> Pipeline:
    """The pipeline of one MCP host's call or read through the gateway (`serve`): calls a model
    chose, on the served profile's state and audit trail, recorded with the host's identity
    (`client`); `confirm` asks the host's user, when it can (`interactive`). `host_session`: the
    host session a `per_session` server's cached results belong to. `conclusions`: shared by
    every host call of this profile and clearance (Invocation). `rate_share`: the host's
    principal's own calls per minute (Invocation)."""
    context = Invocation(
        profile=profile,
        state=state,
        command="serve",
        caller="model",
        interactive=interactive,
        confirm=confirm,
        client=client,
        audit=audit,
        environment_masker=masker,
        host_session=host_session,
        clearance=clearance,
        conclusions=conclusions,
        rate_share=rate_share,
    )
    return Pipeline(catalog, context)
