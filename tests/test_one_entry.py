"""One call pipeline: every tool call and every read goes through services.Pipeline.run (issue 34).
The front ends (llmc_cli/cli, gateway, agent, keeper) hand it requests and render what comes back;
read from their source (AST), none of them:

- builds the caller's context or a decision itself: no call of `Invocation`, `Authorization` or
  `Pipeline` (services.open_calls / services.host_calls make the pipeline and its context);
- runs a stage of the pipeline itself: no call of `authorize`, `authorize_read`,
  `record_decisions`, `run_recorded`, `record_success`, `close_call`, `write_record`, `cache_for`,
  `masked_error`, nor of the old entries `call_tool` on `services` and `read` on `services`;
- asks the policy about a call itself: no `acquire_rate`, `decide` or `decide_read` (except the
  commands that explain the policy without making a call: `policy check|approve` and `tools info`);
- writes to the audit trail itself: no `record`, `record_before_actions` or `identity` call
  (audit.identity is the who of every record);
- reads or writes the result cache itself: no `ResultCache(...)`, `caching.key`,
  `caching.forget_changed`, `caching.storable`, and no `.results.get(...)` or `.results.put(...)`;
- opens the state except where a command manages it (`state`, `policy`, `cache`, `audit`) or the
  gateway keeps it per served profile (gateway/toolbox.py): no other `open_state` call.

And services/ speaks in outcomes, not CLI syntax: no module under llmc_cli/services renders the
approval hint (`hint`, `with_hint` of policy/approval.py) or writes "llmc -p"/"policy approve".
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "llmc_cli"
FRONT_ENDS = ("cli", "gateway", "agent", "keeper")

CONTEXT = {"Invocation", "Authorization", "Pipeline"}
STAGES = {
    "authorize",
    "authorize_read",
    "record_decisions",
    "run_recorded",
    "record_success",
    "close_call",
    "write_record",
    "cache_for",
    "masked_error",
}
OLD_ENTRIES = {("services", "call_tool"), ("services", "read")}  # (receiver, name)
POLICY = {"acquire_rate", "decide", "decide_read"}
AUDIT = {"record", "record_before_actions", "identity"}
CACHE_CALLS = {("caching", "key"), ("caching", "forget_changed"), ("caching", "storable")}
CACHE_NAMES = {"ResultCache"}

# Commands that explain the policy without making a call (a dry run of its decision).
EXPLAINS_POLICY = {"llmc_cli.cli.policy", "llmc_cli.cli.tool_views"}
# Where the state is opened other than by the pipeline's factory: commands that manage it, and the
# gateway's one state per served profile.
OPENS_STATE = {
    "llmc_cli.cli.state",
    "llmc_cli.cli.policy",
    "llmc_cli.cli.cache",
    "llmc_cli.cli.audit",
    "llmc_cli.gateway.toolbox",
}


def modules(*packages: str) -> dict[str, Path]:
    found = {}
    for package in packages:
        for path in sorted((PACKAGE / package).rglob("*.py")):
            parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
            found[".".join(p for p in parts if p != "__init__")] = path
    return found


def called(tree: ast.AST) -> list[tuple[int, str | None, str]]:
    """Every call in a module as (line, receiver, name): `a.b.f()` is ("b", "f"), `f()` (None, "f")."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name):
            out.append((node.lineno, None, func.id))
        elif isinstance(func, ast.Attribute):
            value = func.value
            receiver = value.id if isinstance(value, ast.Name) else value.attr if isinstance(value, ast.Attribute) else None
            out.append((node.lineno, receiver, func.attr))
    return out


def violations(module: str, path: Path) -> list[str]:
    wrong = []
    for line, receiver, name in called(ast.parse(path.read_text(encoding="utf-8"))):
        where = f"{module}:{line} {receiver + '.' if receiver else ''}{name}()"
        if name in CONTEXT:
            wrong.append(f"{where}: builds the caller's context or a decision (services.open_calls/host_calls do)")
        elif name in STAGES or (receiver, name) in OLD_ENTRIES:
            wrong.append(f"{where}: runs a stage of the pipeline itself (hand a request to Pipeline.run)")
        elif name in POLICY and module not in EXPLAINS_POLICY:
            wrong.append(f"{where}: asks the policy about a call (the pipeline's authorize and limit stages do)")
        elif name in AUDIT:
            wrong.append(f"{where}: writes to the audit trail (the pipeline's record stage does)")
        elif name in CACHE_NAMES or (receiver, name) in CACHE_CALLS or (receiver == "results" and name in ("get", "put")):
            wrong.append(f"{where}: uses the result cache (the pipeline's lookup stage does)")
        elif name == "open_state" and module not in OPENS_STATE:
            wrong.append(f"{where}: opens the state (services.open_calls does, once per command)")
    return wrong


@pytest.mark.parametrize("package", FRONT_ENDS)
def test_front_ends_hand_requests_to_the_one_entry(package: str) -> None:
    wrong = [v for module, path in modules(package).items() for v in violations(module, path)]
    assert wrong == [], "\n".join(wrong)


def test_the_check_sees_what_it_forbids() -> None:
    """Guards the test itself: services, where the stages live, trips every rule above."""
    found = "\n".join(v for module, path in modules("services").items() for v in violations(module, path))
    for what in ("builds the caller's context", "runs a stage", "asks the policy", "writes to the audit", "result cache"):
        assert what in found, what
    assert "opens the state" in found  # services.state's own use counts as one here


def test_front_ends_run_calls_and_reads_through_the_pipeline() -> None:
    """The callers the issue names do reach the entry: each calls `.run(` on a pipeline made by
    services.open_calls or host_calls (through cli/common.command_calls for the commands)."""
    sources = {m: p.read_text(encoding="utf-8") for m, p in modules(*FRONT_ENDS).items()}
    for module in ("llmc_cli.cli.call", "llmc_cli.cli.resources"):
        assert "command_calls(" in sources[module] and ".run(" in sources[module], module
    assert "command_calls(" in sources["llmc_cli.cli.batch"] and "run_batch(" in sources["llmc_cli.cli.batch"]
    assert "command_calls(" in sources["llmc_cli.cli.ask"] and "calls.run(" in sources["llmc_cli.agent.runs"]
    assert "services.host_calls(" in sources["llmc_cli.gateway.served"]  # the pipeline of a host's request
    for module in ("llmc_cli.gateway.tool_calls", "llmc_cli.gateway.host_reads"):  # a call, a read
        assert "pipeline(" in sources[module] and "calls.run(" in sources[module], module
    assert "services.open_calls(" in sources["llmc_cli.cli.common"]


def test_services_return_outcomes_not_cli_syntax() -> None:
    wrong = []
    for module, path in modules("services").items():
        text = path.read_text(encoding="utf-8")
        for line, _receiver, name in called(ast.parse(text)):
            if name in ("hint", "with_hint"):
                wrong.append(f"{module}:{line} renders the approval hint")
        for phrase in ("llmc -p", "policy approve"):
            if phrase in text:
                wrong.append(f"{module}: writes {phrase!r}")
    assert wrong == [], "\n".join(wrong)
