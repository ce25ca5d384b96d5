"""Use cases shared by every command. `call_tool` is the ONLY path that runs a tool."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable

from llmc_cli.catalog import Catalog
from llmc_cli.config.profiles import LoadedProfile, usable_specs
from llmc_cli.errors import Cancelled, ConfigError, ExitCode, LlmcError, PolicyDenied, ProtocolError, TimeoutExpired, UsageError
from llmc_cli.mcp.jsonrpc import has_lone_surrogate
from llmc_cli.mcp.hooks import ClientHooks
from llmc_cli.model import ServerSpec, Tool, ToolCall, ToolResult, canonical_json

if TYPE_CHECKING:
    from llmc_cli.policy import Decision


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
    audit: Any = None  # where call_tool writes: None = the profile's audit log; a batch's audit.Deferred
    # Who asked, when that is not this process's user: an MCP host through the gateway (its
    # clientInfo and, over HTTP, the authenticated principal). Recorded in every audit record.
    client: dict[str, Any] | None = None

    @cached_property
    def secrets(self) -> set[str]:
        """Values of secret-looking environment variables, masked in audit records; read once
        per invocation (a batch would otherwise scan the environment twice per call)."""
        from llmc_cli.audit import secret_values

        return secret_values()


def builtin_servers() -> dict[str, Callable[[ServerSpec], Any]]:
    def workspace(spec: ServerSpec) -> Any:
        from llmc_cli.server.workspace import make_workspace_server

        options = dict(spec.options)
        return make_workspace_server(**options)

    return {"workspace": workspace}


def protected_paths(profile: LoadedProfile | None) -> list[str]:
    """llmc's own files, which no tool of its workspace server may touch: the config and state
    directories, the profile file, its audit log and its manifest lock, wherever they are."""
    import os

    from llmc_cli.audit import AuditLog
    from llmc_cli.config.paths import PROTECTED_PATHS_VAR, config_dir, state_dir

    paths = [f"{config_dir()}/", f"{state_dir()}/"]  # "/": a directory, protected as one before it exists
    if profile is not None:
        if profile.path is not None:
            paths.append(str(profile.path))
        paths.append(str(AuditLog(profile.profile.audit_log).path))
        if profile.profile.lock:
            paths.append(lock_path(profile))
    else:
        paths.append(str(AuditLog().path))
    inherited = os.environ.get(PROTECTED_PATHS_VAR)  # this llmc is itself a server of another llmc
    if inherited:
        try:
            paths += [p for p in json.loads(inherited) if isinstance(p, str) and p]
        except (ValueError, TypeError):
            pass  # the workspace server refuses a malformed list; here it only adds
    return list(dict.fromkeys(os.path.abspath(os.path.expanduser(p)) + ("/" if p.endswith("/") else "")
                              for p in paths))


def protect(specs: list[ServerSpec], profile: LoadedProfile | None) -> list[ServerSpec]:
    """Tell each server where llmc's own files are: the built-in workspace server through its
    options, a spawned one (`llmc serve workspace` as a stdio child, whose environment is
    allow-listed) through PROTECTED_PATHS_VAR, set after the profile's env so it cannot be replaced.
    Both only ever add paths to what the server protects."""
    from llmc_cli.config.paths import PROTECTED_PATHS_VAR

    paths = protected_paths(profile)
    out = []
    for spec in specs:
        if spec.builtin == "workspace" and isinstance(spec.options.get("protect", []), list):
            extra = [p for p in spec.options.get("protect", []) if p not in paths]
            spec = replace(spec, options={**spec.options, "protect": [*extra, *paths]})
        elif spec.command:
            spec = replace(spec, env={**spec.env, PROTECTED_PATHS_VAR: json.dumps(paths)})
        out.append(spec)
    return out


def open_catalog(profile: LoadedProfile | None, only: tuple[str, ...] = (), adhoc: ServerSpec | None = None,
                 hooks: ClientHooks | None = None, on_stderr: Callable[[str, str], None] | None = None,
                 timeout: float | None = None, session: str | None = None) -> Catalog:
    """The servers a command talks to: an ad-hoc one, the profile's, or those a session keeper
    holds (`session`: its name; the servers then run in the keeper, policy and audit still here)."""
    if adhoc is None and profile is None:
        raise ValueError("open_catalog needs a profile or an ad-hoc server")
    keeper = None
    unusable: dict[str, Any] = {}  # servers of the profile that cannot be configured
    if session:
        if adhoc:
            raise UsageError(f"--session {session} uses the servers its keeper holds: drop --stdio/--url")
        from llmc_cli.keeper import lifecycle

        path, specs = lifecycle.server_specs(session, only)
        keeper = (path, session)
    else:
        specs, unusable = ([adhoc], {}) if adhoc else usable_specs(profile, only)  # type: ignore[arg-type]
        specs = protect(specs, profile)
    if timeout:
        specs = [replace(spec, timeout=timeout) for spec in specs]
    from llmc_cli.store import client_stores

    return Catalog(specs, hooks=hooks, builtins=builtin_servers(), on_stderr=on_stderr, keeper=keeper,
                   stores=client_stores(), unusable=unusable)


def visible_tools(catalog: Catalog, profile: LoadedProfile, servers: list[str] | None = None
                  ) -> tuple[list[Tool], list[Tool], list[Any]]:
    """(allowed, denied, failures): the model and listings see only the allowed ones."""
    from llmc_cli import policy

    tools, failures = catalog.list_tools(servers)
    config = profile.profile.policy
    allowed = [t for t in tools if policy.visible(t, config).action == "allow"]
    return allowed, [t for t in tools if t not in allowed], failures


@dataclass
class Authorization:
    """A call the policy has decided on, with the fields every audit record of it carries."""

    call: ToolCall
    decision: Decision
    base: dict[str, Any]
    opened: int | None = None  # its entry in OPEN_CALLS once an allow decision is on disk

    def decision_record(self) -> dict[str, Any]:
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
        self._calls: dict[int, tuple[Any, dict[str, Any], set[str]]] = {}
        self._next = 0

    def open(self, log: Any, base: dict[str, Any], secrets: set[str]) -> int:
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
        logs: list[Any] = []
        for log, base, secrets in calls:
            _write(log, {**base, "event": "outcome", "outcome": outcome, "reason": reason}, secrets,
                   before_action=False)
            if log not in logs:
                logs.append(log)
        for log in logs:
            if hasattr(log, "flush"):  # a batch's trail keeps outcome records in memory
                log.flush()


OPEN_CALLS = OpenCalls()

# Record fields that are not free text (hashes) or are masked where they are built.
_NOT_FREE_TEXT = frozenset({"arguments", "result", "callHash", "resultSha256"})


def _write(log: Any, record: dict[str, Any], secrets: set[str], *, before_action: bool) -> None:
    """Every record goes out through here: secret values masked in every free-text field (a
    reason or an error message may quote an argument or the environment)."""
    from llmc_cli.audit import mask_secrets

    log.record({k: v if k in _NOT_FREE_TEXT else mask_secrets(v, secrets) for k, v in record.items()},
               before_action=before_action)


def record_decisions(log: Any, invocation: Invocation, authorizations: list[Authorization]) -> None:
    """The decision records of calls about to run, on disk in one write; each allowed call is
    then open until its outcome is recorded. An interruption waits until both are done, so no
    decision is ever on disk without being open."""
    from llmc_cli import audit, interrupts

    with interrupts.deferred():
        records = [{k: v if k in _NOT_FREE_TEXT else audit.mask_secrets(v, invocation.secrets)
                    for k, v in a.decision_record().items()} for a in authorizations]
        if hasattr(log, "record_before_actions"):
            log.record_before_actions(records)
        else:
            for record in records:
                log.record(record, before_action=True)
        for a in authorizations:
            if a.decision.action == "allow":
                a.opened = OPEN_CALLS.open(log, a.base, invocation.secrets)


def authorize(catalog: Catalog, invocation: Invocation, call: ToolCall) -> Authorization:
    """The policy's decision on a call (a confirmation asked or answered here); nothing runs."""
    from llmc_cli import audit, policy

    profile = invocation.profile
    tool = catalog.find_tool(call.server, call.tool)
    if tool is None:
        raise UsageError(f"server {call.server} has no tool named {call.tool!r}")
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
    base = {**audit.identity(), "profile": profile.name, "command": invocation.command,
            "conversation": invocation.conversation_id, "client": invocation.client, "server": call.server, "tool": call.tool,
            "arguments": audit.mask_secrets(call.arguments, invocation.secrets), "callHash": decision.call_hash}
    return Authorization(call, decision, {k: v for k, v in base.items() if v is not None})


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

    def outcome(record: dict[str, Any]) -> None:
        if OPEN_CALLS.close(authorized.opened):
            _write(log, {**base, "event": "outcome", **record}, invocation.secrets, before_action=False)

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
        if has_lone_surrogate(raw):
            # JSON escapes such as "\\ud800" decode to text no UTF-8 writer accepts (the audit
            # log, stdout, a provider's API): the result cannot be passed on as it is.
            raise ProtocolError(f"{call.server}: the result of {call.tool} contains a lone surrogate "
                                "(invalid Unicode text)")
    except LlmcError as exc:
        kind = {TimeoutExpired: "timeout", Cancelled: "cancelled"}.get(type(exc), "transport_error")
        outcome({"outcome": kind, "error": exc.message, "durationMs": elapsed()})
        raise
    except Exception as exc:  # a bug must not leave a decision without an outcome
        outcome({"outcome": "internal_error", "error": f"{type(exc).__name__}: {exc}", "durationMs": elapsed()})
        raise
    result = ToolResult.from_mcp(raw)
    result.duration_ms = elapsed()
    body = canonical_json(raw).encode("utf-8")
    outcome_record = {"outcome": "tool_error" if result.is_error else "ok",
                      "durationMs": result.duration_ms, "resultBytes": len(body),
                      "resultSha256": hashlib.sha256(body).hexdigest()}
    if profile.profile.audit_results:
        outcome_record["result"] = audit.mask_secrets(raw, invocation.secrets)
    outcome(outcome_record)
    return result


def host_sessions(profile: LoadedProfile, idle_seconds: float) -> Any:
    """Where the gateway shares its initialize-era host sessions between replicas: the state
    database's (store/postgres.py PostgresHostSessions) when `[state] url` is set, else None
    (a session lives in the replica that opened it)."""
    from llmc_cli.store.postgres import PostgresHostSessions, state_url

    url = state_url(profile.profile.state.url)
    return PostgresHostSessions(url, idle_seconds) if url else None


def lock_path(profile: LoadedProfile) -> str:
    """The profile's lock file; a relative path is relative to the profile file that names it."""
    from pathlib import Path

    path = Path(profile.profile.lock or "").expanduser()
    return str(path if path.is_absolute() or profile.path is None else profile.path.parent / path)


def _confirm(invocation: Invocation, call: ToolCall, tool: Tool, decision: Any) -> Any:
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
                    f"call with `llmc policy approve {call.qualified_name} ... --write` ({decision.call_hash})",
                    decision.call_hash)


@dataclass
class BatchItem:
    """One line of a batch: its id, the call (None when the line could not be read) or the error."""

    index: int
    id: Any
    call: ToolCall | None = None
    error: LlmcError | None = None
    result: ToolResult | None = None
    duration_ms: float | None = None

    @property
    def exit_code(self) -> int:
        if self.error is not None:
            return self.error.exit_code
        return ExitCode.TOOL_ERROR if self.result is not None and self.result.is_error else ExitCode.OK

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id}
        if self.call is not None:
            out.update(server=self.call.server, tool=self.call.tool)
        if self.error is not None:
            out["error"] = self.error.to_json()
        elif self.result is not None:
            out["result"] = self.result.to_json()
        out["durationMs"] = self.duration_ms
        return out


def run_batch(catalog: Catalog, invocation: Invocation, items: list[BatchItem], *, parallel: int = 1,
              fail_fast: bool = False, on_done: Callable[[BatchItem], None] | None = None) -> None:
    """Run many calls over one connection per server: servers concurrently; within a server in
    input order, except that up to `parallel` consecutive read-only calls run at once. `on_done`
    gets the items in input order as soon as every earlier one is done, so results stream. With
    `fail_fast`, calls not yet started after a failure are skipped (an error result saying so).

    Every call is decided first and all decision records go to disk in one write, before any
    call runs; then each runs through call_tool, whose outcome records are written in groups
    (audit.Deferred). A batch costs a few fsyncs, not two per call."""
    from llmc_cli import audit

    with audit.Deferred(audit.open_log(invocation.profile.profile)) as trail:
        _run_batch(catalog, replace(invocation, audit=trail), items, parallel, fail_fast, on_done)


def _run_batch(catalog: Catalog, invocation: Invocation, items: list[BatchItem], parallel: int,
               fail_fast: bool, on_done: Callable[[BatchItem], None] | None) -> None:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from llmc_cli import policy

    trail = invocation.audit
    authorized: dict[int, Authorization] = {}
    for item in items:
        if item.call is not None:
            try:
                authorized[item.index] = authorize(catalog, invocation, item.call)
            except LlmcError as exc:
                item.error = exc
    record_decisions(trail, invocation, list(authorized.values()))
    stop = threading.Event()
    done = [threading.Event() for _ in items]
    by_server: dict[str, list[BatchItem]] = {}
    for item in items:
        if item.index not in authorized:
            done[item.index].set()
        else:
            by_server.setdefault(item.call.server, []).append(item)  # type: ignore[union-attr]

    def give_up(item: BatchItem, error: LlmcError, outcome: str) -> None:
        """A call that will not run (or whose run broke): its error result and outcome record."""
        item.error = error
        if OPEN_CALLS.close(authorized[item.index].opened):
            _write(trail, {**authorized[item.index].base, "event": "outcome", "outcome": outcome,
                           "reason": error.message}, invocation.secrets, before_action=False)

    def run_one(item: BatchItem) -> None:
        # Never raises: every item gets a result and is marked done, or the batch would wait forever.
        assert item.call is not None
        started = time.monotonic()
        try:
            if stop.is_set():
                give_up(item, LlmcError("skipped: an earlier call failed (--fail-fast)"), "skipped")
            else:
                try:
                    item.result = call_tool(catalog, invocation, item.call, authorized=authorized[item.index])
                except LlmcError as exc:
                    item.error = exc
                item.duration_ms = round((time.monotonic() - started) * 1000, 1)
                if fail_fast and item.exit_code:
                    stop.set()
        except BaseException as exc:  # noqa: BLE001 - an interruption or a bug: this item's result says so
            try:
                give_up(item, LlmcError(f"the call did not complete: {type(exc).__name__}: {exc}"), "internal_error")
            except BaseException as error:  # noqa: BLE001 - e.g. the audit log is unwritable
                item.error = error if isinstance(error, LlmcError) else LlmcError(str(error))
        finally:
            done[item.index].set()

    def read_only(item: BatchItem) -> bool:
        assert item.call is not None
        try:
            tool = catalog.find_tool(item.call.server, item.call.tool)
        except LlmcError:
            return False
        return tool is not None and policy.is_read_only(tool, item.call.qualified_name, invocation.profile.profile.policy)

    def run_server(queue: list[BatchItem]) -> None:
        try:
            with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
                i = 0
                while i < len(queue):
                    group = [queue[i]]
                    if parallel > 1 and read_only(queue[i]):
                        while len(group) < parallel and i + len(group) < len(queue) and read_only(queue[i + len(group)]):
                            group.append(queue[i + len(group)])
                    if len(group) == 1:
                        run_one(group[0])  # no hand-over to a pool thread for a sequential call
                    else:
                        list(pool.map(run_one, group))
                    i += len(group)
        finally:  # whatever broke this thread, no item is left waiting
            for item in queue:
                if not done[item.index].is_set():
                    run_one_failed(item)

    def run_one_failed(item: BatchItem) -> None:
        try:
            give_up(item, LlmcError("the call did not run: the batch worker of its server failed"), "internal_error")
        except BaseException as error:  # noqa: BLE001 - the next items must still be marked done
            item.error = error if isinstance(error, LlmcError) else LlmcError(str(error))
        finally:
            done[item.index].set()

    workers = [threading.Thread(target=run_server, args=(queue,), daemon=True, name=f"llmc-batch-{server}")
               for server, queue in by_server.items()]
    for worker in workers:
        worker.start()
    for item in items:  # in input order, each as soon as it and every earlier one are done
        done[item.index].wait()
        if on_done:
            on_done(item)
    for worker in workers:
        worker.join()
