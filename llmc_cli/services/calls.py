"""One tool call: who runs it (Invocation), the policy's decision and its audit record (authorize,
record_decisions), the call and its outcome record (call_tool, the ONLY path that runs a tool)."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, cast

from llmc_cli import telemetry
from llmc_cli.catalog import Catalog
from llmc_cli.config.profiles import LoadedProfile
from llmc_cli.errors import (Cancelled, ConfigError, InputRequired, LlmcError, PolicyDenied, ProtocolError,
                             TimeoutExpired)
from llmc_cli.mcp.jsonrpc import has_lone_surrogate
from llmc_cli.model import Tool, ToolCall, ToolResult, canonical_json

if TYPE_CHECKING:
    from llmc_cli.policy import Decision
    from llmc_cli.store.chain import AuditRecord, AuditSink


@dataclass
class Invocation:
    """Who runs a tool call and how a human may be asked about it."""

    profile: LoadedProfile
    command: str = "call"  # call | ask | batch
    # "human": a command a person typed (call, call --batch); "model": calls an LLM chose (ask,
    # sampling, the gateway). The default is the guarded one.
    caller: str = "model"
    interactive: bool = False  # a human can answer a confirmation prompt
    assume_yes: bool = False  # --yes: confirmations answered yes
    confirm: Callable[[ToolCall, Tool | None], bool] | None = None
    conversation_id: str | None = None
    audit: AuditSink | None = None  # where call_tool writes: None = the profile's audit log; a batch's audit.Deferred
    # Who asked, when that is not this process's user: an MCP host through the gateway (its
    # clientInfo and, over HTTP, the authenticated principal). Recorded in every audit record.
    client: dict[str, Any] | None = None
    # The secret values, when the caller already read them: the gateway makes an invocation per
    # call, and scanning the environment per call was ~5% of its CPU; its environment is fixed.
    environment_secrets: frozenset[str] | None = None

    @cached_property
    def secrets(self) -> set[str]:
        """Values of secret-looking environment variables, masked in audit records; read once
        per invocation (a batch would otherwise scan the environment twice per call)."""
        if self.environment_secrets is not None:
            return set(self.environment_secrets)
        from llmc_cli.audit import secret_values

        return secret_values()


@dataclass
class Authorization:
    """A call the policy has decided on, with the fields every audit record of it carries."""

    call: ToolCall
    decision: Decision
    base: AuditRecord
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
        self._calls: dict[int, tuple[AuditSink, AuditRecord, set[str]]] = {}
        self._next = 0

    def open(self, log: AuditSink, base: AuditRecord, secrets: set[str]) -> int:
        with self._lock:
            self._next += 1
            self._calls[self._next] = (log, base, secrets)
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
        for log, base, secrets in calls:
            write_record(log, {**base, "event": "outcome", "outcome": outcome, "reason": reason}, secrets,
                   before_action=False)
            if log not in logs:
                logs.append(log)
        for log in logs:
            log.flush()  # a batch's trail keeps outcome records in memory


OPEN_CALLS = OpenCalls()

# Record fields that are not free text (hashes) or are masked where they are built.
_NOT_FREE_TEXT = frozenset({"arguments", "result", "callHash", "resultSha256"})


def write_record(log: AuditSink, record: AuditRecord, secrets: set[str], *, before_action: bool) -> None:
    """Every record that is not a batch of decisions goes out through here (those through record_decisions)."""
    log.record(masked(record, secrets), before_action=before_action)


def masked(record: AuditRecord, secrets: set[str]) -> AuditRecord:
    """Secret values masked in every free-text field (a reason or an error message may quote an
    argument or the environment)."""
    from llmc_cli.audit import mask_secrets

    return cast("AuditRecord", {k: v if k in _NOT_FREE_TEXT else mask_secrets(v, secrets) for k, v in record.items()})


def record_decisions(log: AuditSink, invocation: Invocation, authorizations: list[Authorization]) -> None:
    """The decision records of calls about to run, on disk in one write; each allowed call is
    then open until its outcome is recorded. An interruption waits until both are done, so no
    decision is ever on disk without being open."""
    from llmc_cli import interrupts

    with interrupts.deferred():
        log.record_before_actions([masked(a.decision_record(), invocation.secrets) for a in authorizations])
        for a in authorizations:
            if a.decision.action == "allow":
                a.opened = OPEN_CALLS.open(log, a.base, invocation.secrets)


def authorize(catalog: Catalog, invocation: Invocation, call: ToolCall) -> Authorization:
    """The policy's decision on a call (a confirmation asked or answered here); nothing runs."""
    from llmc_cli import audit, policy

    profile = invocation.profile
    tool = catalog.require_tool(call.server, call.tool)
    if has_lone_surrogate(call.arguments):
        # Text no UTF-8 writer accepts (a model's "\\ud800" escape): not checked against path
        # rules, not recorded faithfully, not sent; the record shows it as U+FFFD.
        decision = policy.Decision("deny", "invalid_text", "the arguments contain a lone surrogate "
                                   "(invalid Unicode text)", policy.call_hash(call))
    else:
        from llmc_cli.store.postgres import approvals, state_url

        decision = policy.decide(call, tool, profile.profile.policy, caller=invocation.caller,  # type: ignore[arg-type]
                                 cwd=catalog.working_directory(call.server),
                                 approved=approvals(state_url(profile.profile.state.url), profile.name))
    if profile.profile.lock and decision.action != "deny":
        # A denied tool is denied (exit 4), whatever the lock says: `tools lock` pins only
        # the tools the policy allows, so asking the lock first would demand a re-lock that
        # can never help. A drifted tool is refused before anyone is asked to confirm it.
        from llmc_cli.lockfile import check

        check(lock_path(profile), tool)
    if decision.action == "confirm":
        decision = _confirm(invocation, call, tool, decision)
    telemetry.policy_decision(call.qualified_name, decision.action, decision.rule, invocation.caller)
    base = {**audit.identity(), "profile": profile.name, "command": invocation.command,
            "conversation": invocation.conversation_id, "client": invocation.client, "server": call.server, "tool": call.tool,
            "arguments": audit.mask_secrets(call.arguments, invocation.secrets), "callHash": decision.call_hash}
    return Authorization(call, decision, cast("AuditRecord", {k: v for k, v in base.items() if v is not None}))


def call_tool(catalog: Catalog, invocation: Invocation, call: ToolCall, *, timeout: float | None = None,
              authorized: Authorization | None = None, meta: dict[str, Any] | None = None) -> ToolResult:
    """The ONLY path that runs a tool: policy decision (and confirmation) -> audit record of the
    decision, on disk -> rate limit -> the call -> audit record of the outcome. A denial is
    audited, then raised as PolicyDenied. Returns the result (is_error included); raises
    LlmcError otherwise. `authorized`: decided, and its decision record written, by the caller
    (run_batch writes all of a batch's decisions at once). `meta`: the request's _meta, relayed
    (the gateway's progress token)."""
    from llmc_cli import audit, interrupts, policy
    from llmc_cli.config.paths import state_dir
    from llmc_cli.store.postgres import state_url

    log = invocation.audit or audit.open_log(invocation.profile.profile)
    if authorized is None:
        interrupts.check()  # an interrupted command starts no new call (the calls of `ask` run in threads)
        authorized = authorize(catalog, invocation, call)
        record_decisions(log, invocation, [authorized])
    decision, base, profile = authorized.decision, authorized.base, invocation.profile
    if decision.action != "allow":
        raise PolicyDenied(f"denied: {decision.reason} [{decision.rule}]", rule=decision.rule,
                           callHash=decision.call_hash)
    started = time.monotonic()

    def outcome(record: AuditRecord) -> None:
        if OPEN_CALLS.close(authorized.opened):
            write_record(log, {**base, "event": "outcome", **record}, invocation.secrets, before_action=False)

    def elapsed() -> float:
        return round((time.monotonic() - started) * 1000, 1)

    try:
        interrupts.check()  # a batch's call not yet started when the command was interrupted
        policy.acquire_rate(profile.name, call.qualified_name, profile.profile.policy, state_dir,
                            state_url(profile.profile.state.url))
    except (PolicyDenied, ConfigError) as exc:  # limit reached, or the count could not be stored: not run
        outcome({"outcome": "denied", "rule": exc.details.get("rule"), "reason": exc.message})
        raise
    try:
        raw = catalog.session(call.server).call_tool(call.tool, call.arguments, timeout=timeout, meta=meta)
        if not isinstance(raw.get("content", []), list):
            raise ProtocolError(f"{call.server}: tools/call result has no content list")
        try:  # what the outcome record hashes; the encoding fails on a lone surrogate
            body = canonical_json(raw).encode("utf-8")
        except UnicodeEncodeError:
            # JSON escapes such as "\\ud800" decode to text no UTF-8 writer accepts (the audit
            # log, stdout, a provider's API): the result cannot be passed on as it is.
            raise ProtocolError(f"{call.server}: the result of {call.tool} contains a lone surrogate "
                                "(invalid Unicode text)") from None
    except LlmcError as exc:
        kind = {TimeoutExpired: "timeout", Cancelled: "cancelled",
                InputRequired: "input_required"}.get(type(exc), "transport_error")
        outcome({"outcome": kind, "error": exc.message, "durationMs": elapsed()})
        raise
    except Exception as exc:  # a bug must not leave a decision without an outcome
        outcome({"outcome": "internal_error", "error": f"{type(exc).__name__}: {exc}", "durationMs": elapsed()})
        raise
    result = ToolResult.from_mcp(raw)
    result.duration_ms = elapsed()
    outcome_record: AuditRecord = {"outcome": "tool_error" if result.is_error else "ok",
                      "durationMs": result.duration_ms, "resultBytes": len(body),
                      "resultSha256": hashlib.sha256(body).hexdigest()}
    if profile.profile.audit_results:
        outcome_record["result"] = audit.mask_secrets(raw, invocation.secrets)
    outcome(outcome_record)
    return result


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
    return Decision("deny", decision.rule,
                    f"{decision.reason}, and there is no terminal to ask: pass --yes, or pre-approve this exact "
                    f"call: {approval_hint(invocation.profile, call, decision.call_hash)}",
                    decision.call_hash)


def approval_hint(profile: LoadedProfile, call: ToolCall, call_hash: str | None) -> str:
    """How to pre-approve exactly this call: the `llmc policy approve` command with the call's own
    arguments, shell-quoted, ready to paste; when an argument holds a secret (masked as the audit
    log masks it), the command would show it, so the callHash to list under `approved` instead."""
    import json
    import shlex

    from llmc_cli.audit import mask_secrets

    # A profile loaded by path is named by its path: `-p NAME` would not find it.
    name = profile.name if profile.path is None or profile.path.parent.name == "profiles" else str(profile.path)
    if mask_secrets(call.arguments) != call.arguments:
        return (f"an argument holds a secret, so add \"{call_hash}\" to `approved` under [policy] of profile "
                f"{name} (the hash of this exact call)")
    arguments = json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"))
    return (f"llmc -p {shlex.quote(name)} policy approve {shlex.quote(call.qualified_name)} --json "
            f"{shlex.quote(arguments)} --write ({call_hash})")
