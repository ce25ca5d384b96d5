"""Use cases shared by every command. `call_tool` is the ONLY path that runs a tool."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Callable

from llmc_cli.catalog import Catalog
from llmc_cli.config.profiles import LoadedProfile, server_specs
from llmc_cli.errors import Cancelled, ConfigError, ExitCode, LlmcError, PolicyDenied, ProtocolError, TimeoutExpired, UsageError
from llmc_cli.mcp.session import ClientHooks
from llmc_cli.model import ServerSpec, Tool, ToolCall, ToolResult


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
    extra: dict[str, Any] = field(default_factory=dict)
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
    if session:
        if adhoc:
            raise UsageError(f"--session {session} uses the servers its keeper holds: drop --stdio/--url")
        from llmc_cli.keeper import lifecycle

        path, specs = lifecycle.server_specs(session, only)
        keeper = (path, session)
    else:
        specs = protect([adhoc] if adhoc else server_specs(profile, only), profile)  # type: ignore[arg-type]
    if timeout:
        specs = [replace(spec, timeout=timeout) for spec in specs]
    from llmc_cli.store import client_stores

    return Catalog(specs, hooks=hooks, builtins=builtin_servers(), on_stderr=on_stderr, keeper=keeper,
                   stores=client_stores())


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
    decision: Any  # policy.Decision
    base: dict[str, Any]

    def decision_record(self) -> dict[str, Any]:
        d = self.decision
        return {**self.base, "event": "decision", "decision": d.action, "rule": d.rule, "reason": d.reason}


def authorize(catalog: Catalog, invocation: Invocation, call: ToolCall) -> Authorization:
    """The policy's decision on a call (a confirmation asked or answered here); nothing runs."""
    from llmc_cli import audit, policy

    profile = invocation.profile
    tool = catalog.find_tool(call.server, call.tool)
    if tool is None:
        raise UsageError(f"server {call.server} has no tool named {call.tool!r}")
    decision = policy.decide(call, tool, profile.profile.policy, caller=invocation.caller,  # type: ignore[arg-type]
                             cwd=catalog.working_directory(call.server))
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
    from llmc_cli import audit, policy
    from llmc_cli.config.paths import state_dir

    log = invocation.audit or audit.AuditLog(invocation.profile.profile.audit_log)
    if authorized is None:
        authorized = authorize(catalog, invocation, call)
        log.record(authorized.decision_record(), before_action=True)
    decision, base, profile = authorized.decision, authorized.base, invocation.profile
    if decision.action != "allow":
        raise PolicyDenied(f"denied: {decision.reason} [{decision.rule}]", rule=decision.rule,
                           callHash=decision.call_hash)
    try:
        policy.acquire_rate(profile.name, call.qualified_name, profile.profile.policy, state_dir)
    except (PolicyDenied, ConfigError) as exc:  # limit reached, or the count could not be stored: not run
        log.record({**base, "event": "outcome", "outcome": "denied", "rule": exc.details.get("rule"),
                    "reason": exc.message}, before_action=False)
        raise
    started = time.monotonic()
    try:
        raw = catalog.session(call.server).call_tool(call.tool, call.arguments, timeout=timeout, meta=meta)
        if not isinstance(raw.get("content", []), list):
            raise ProtocolError(f"{call.server}: tools/call result has no content list")
    except LlmcError as exc:
        outcome = {TimeoutExpired: "timeout", Cancelled: "cancelled"}.get(type(exc), "transport_error")
        log.record({**base, "event": "outcome", "outcome": outcome, "error": exc.message,
                    "durationMs": round((time.monotonic() - started) * 1000, 1)}, before_action=False)
        raise
    result = ToolResult.from_mcp(raw)
    result.duration_ms = round((time.monotonic() - started) * 1000, 1)
    body = json.dumps(raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    outcome_record = {**base, "event": "outcome", "outcome": "tool_error" if result.is_error else "ok",
                      "durationMs": result.duration_ms, "resultBytes": len(body),
                      "resultSha256": hashlib.sha256(body).hexdigest()}
    if profile.profile.audit_results:
        outcome_record["result"] = audit.mask_secrets(raw, invocation.secrets)
    log.record(outcome_record, before_action=False)
    return result


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

    with audit.Deferred(audit.AuditLog(invocation.profile.profile.audit_log)) as trail:
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
    trail.record_before_actions([a.decision_record() for a in authorized.values()])
    stop = threading.Event()
    done = [threading.Event() for _ in items]
    by_server: dict[str, list[BatchItem]] = {}
    for item in items:
        if item.index not in authorized:
            done[item.index].set()
        else:
            by_server.setdefault(item.call.server, []).append(item)  # type: ignore[union-attr]

    def run_one(item: BatchItem) -> None:
        assert item.call is not None
        if stop.is_set():
            item.error = LlmcError("skipped: an earlier call failed (--fail-fast)")
            trail.record({**authorized[item.index].base, "event": "outcome", "outcome": "skipped",
                          "reason": item.error.message}, before_action=False)
        else:
            started = time.monotonic()
            try:
                item.result = call_tool(catalog, invocation, item.call, authorized=authorized[item.index])
            except LlmcError as exc:
                item.error = exc
            item.duration_ms = round((time.monotonic() - started) * 1000, 1)
            if fail_fast and item.exit_code:
                stop.set()
        done[item.index].set()

    def read_only(item: BatchItem) -> bool:
        assert item.call is not None
        try:
            tool = catalog.find_tool(item.call.server, item.call.tool)
        except LlmcError:
            return False
        return tool is not None and policy.is_read_only(tool, item.call.qualified_name, invocation.profile.profile.policy)

    def run_server(queue: list[BatchItem]) -> None:
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
