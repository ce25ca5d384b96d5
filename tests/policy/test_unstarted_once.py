"""The denials that need nothing of a server (calls.unstarted_denial: above the caller's
clearance, or denied by the policy by name) are asked once a call, not at every stage: the
pipeline's entry clears a route, and authorize is told so (`cleared`); a batch clears each
(server, tool) once, the gateway a host's route before it looks the tool up. Whichever entry a
call comes through on its own, the denial is still caught there: denied with the policy's rule,
recorded, the server never started (a denial by name: its tool is not looked up either).

Real SDK servers (tests/peers/odd_names.py): `a` (internal) with tools b and x (x denied by
name), `a_b` (confidential, above the callers' clearance "internal") with tool c, which leaves a
mark when it starts."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from llmc_cli import services
from llmc_cli.catalog import routing
from llmc_cli.config.profiles import load_profile
from llmc_cli.errors import PolicyDenied
from llmc_cli.gateway.toolbox import Toolbox
from llmc_cli.model import ToolCall
from tests.gateway.test_name_stability import ask
from tests.helpers import PEERS, audit_trail

DENIED = [("a", "x", "deny: a.x"), ("a_b", "c", "clearance")]  # (server, tool, the decision's rule)


def profile_text(mark: Path) -> str:
    odd = str(PEERS / "odd_names.py")
    started = f"touch {shlex.quote(str(mark))}; exec {shlex.quote(sys.executable)} {shlex.quote(odd)} c"
    return (
        f'[servers.a]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(odd)}, "b", "x"]\nsandbox = "none"\n\n'
        f'[servers.a_b]\ncommand = "sh"\nargs = ["-c", {json.dumps(started)}]\nsandbox = "none"\n'
        'classification = "confidential"\n\n[policy]\ndeny = ["a.x"]\n\n'
        '[policy.hints]\n"a.*" = { readOnly = true }\n"a_b.*" = { readOnly = true }\n'
    )


@pytest.fixture
def looked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every tool the catalog looks up (a denied name's must not be)."""
    seen: list[tuple[str, str]] = []
    real = routing.find_tool

    def counting(catalog: Any, server: str, tool: str) -> Any:
        seen.append((server, tool))
        return real(catalog, server, tool)

    monkeypatch.setattr(routing, "find_tool", counting)
    return seen


@pytest.fixture
def pipeline(isolated_dirs: Path) -> Iterator[services.Pipeline]:
    path = isolated_dirs / "p.toml"
    path.write_text(profile_text(isolated_dirs / "started"))
    profile = load_profile(str(path))
    catalog = services.open_catalog(profile)
    with catalog:
        calls = services.open_calls(catalog, profile, command="call", caller="model", clearance="internal", assume_yes=True)
        try:
            yield calls
        finally:
            calls.close()


def decisions() -> list[tuple[str, str, str, str]]:
    trail = audit_trail(Path(os.environ["LLMC_STATE_DIR"]))
    return [(r["server"], r["tool"], r["decision"], r["rule"]) for r in trail if r.get("event") == "decision"]


def run_alone(pipeline: services.Pipeline, server: str, tool: str) -> str:
    """Pipeline.run of a bare SERVER.TOOL name (`llmc call`)."""
    try:
        pipeline.run(services.ToolRequest(f"{server}.{tool}", {"message": "m"}))
    except PolicyDenied as exc:
        return str(exc.details["rule"])
    return "ran"


def run_routed(pipeline: services.Pipeline, server: str, tool: str) -> str:
    """Pipeline.run of a routed call (`ask`'s model calls: ToolRequest.of)."""
    try:
        pipeline.run(services.ToolRequest.of(ToolCall(server, tool, {"message": "m"})))
    except PolicyDenied as exc:
        return str(exc.details["rule"])
    return "ran"


def authorize_alone(pipeline: services.Pipeline, server: str, tool: str) -> str:
    """Pipeline.authorize with nothing asked before it (its `cleared` left False)."""
    return pipeline.authorize(ToolCall(server, tool, {"message": "m"})).decision.rule


def batch(validate: bool) -> Callable[[services.Pipeline, str, str], str]:
    def run(pipeline: services.Pipeline, server: str, tool: str) -> str:
        items = [
            services.BatchItem(0, 1, "a.b", {"message": "m"}),
            services.BatchItem(1, 2, f"{server}.{tool}", {"message": "m"}),
        ]
        services.run_batch(pipeline, items, validate=validate)
        assert items[0].error is None and items[0].result is not None, items[0].error
        error = items[1].error
        return str(error.details["rule"]) if isinstance(error, PolicyDenied) else "ran"

    return run


ENTRIES = {
    "run": run_alone,
    "run-routed": run_routed,
    "authorize": authorize_alone,
    "batch": batch(True),
    "batch-no-validate": batch(False),
}


@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize(("server", "tool", "rule"), DENIED)
def test_a_denial_needing_no_server_is_caught_at_each_entry(
    pipeline: services.Pipeline,
    looked: list[tuple[str, str]],
    isolated_dirs: Path,
    entry: str,
    server: str,
    tool: str,
    rule: str,
) -> None:
    assert ENTRIES[entry](pipeline, server, tool) == rule
    if entry != "authorize":  # (authorize writes nothing: the pipeline's decide does)
        assert (server, tool, "deny", rule) in decisions()
    assert (server, tool) not in looked
    assert not (isolated_dirs / "started").exists()
    assert "a_b" not in pipeline.catalog.pool.sessions


def test_an_allowed_call_still_runs_once_cleared(pipeline: services.Pipeline, looked: list[tuple[str, str]]) -> None:
    outcome = pipeline.run(services.ToolRequest("a.b", {"message": "m"}))
    assert outcome.tool_result.to_json()["content"][0]["text"] == "b: m"
    assert [r[:3] for r in decisions()] == [("a", "b", "allow")]


@pytest.mark.parametrize(("server", "tool", "rule"), DENIED)
def test_the_gateways_call_is_still_denied(isolated_dirs: Path, server: str, tool: str, rule: str) -> None:
    path = isolated_dirs / "gw.toml"
    path.write_text(profile_text(isolated_dirs / "started"))
    box = Toolbox(load_profile(str(path)))
    try:
        reply = ask(box, "internal", "tools/call", {"name": f"{server}.{tool}", "arguments": {"message": "m"}})
        assert "error" in reply or reply["result"].get("isError"), reply
        assert "a_b" not in box.catalog.pool.sessions
        allowed = ask(box, "internal", "tools/call", {"name": "a.b", "arguments": {"message": "m"}})
        assert allowed["result"]["content"][0]["text"] == "b: m", allowed  # cleared once, run
    finally:
        box.close()
    assert not (isolated_dirs / "started").exists()
    assert [r[:3] for r in decisions()] == [(server, tool, "deny"), ("a", "b", "allow")]
    assert decisions()[0][3] == rule
