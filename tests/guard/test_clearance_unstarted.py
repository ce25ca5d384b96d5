"""A server above the caller's clearance "is not even started" (README, Classification and
clearance): not to find the tool a direct call names (the gateway's dotted or mapped names, a
person's `llmc call` under [policy] clearance), and not to list again for a name the gateway has
not given (a host that calls without listing first). The call is still denied and recorded with
rule `clearance`. Real SDK servers (tests/peers/odd_names.py); the confidential one leaves a
mark when it starts."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmc_cli.config.profiles import load_profile
from llmc_cli.gateway.toolbox import Toolbox
from tests.gateway.test_name_stability import ask
from tests.helpers import PEERS, audit_trail, llmc, profile_file


def servers(mark: Path) -> str:
    """a (internal) with tool b, and a_b (confidential) with tool c and prompt p, which touches `mark`."""
    odd = str(PEERS / "odd_names.py")
    started = f"touch {shlex.quote(str(mark))}; exec {shlex.quote(sys.executable)} {shlex.quote(odd)} --prompt p c"
    return (
        f'[servers.a]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(odd)}, "b"]\nsandbox = "none"\n\n'
        f'[servers.a_b]\ncommand = "sh"\nargs = ["-c", {json.dumps(started)}]\nsandbox = "none"\n'
        'classification = "confidential"\n\n[policy.hints]\n"a.*" = { readOnly = true }\n"a_b.*" = { readOnly = true }\n'
    )


@pytest.fixture(params=[".", "_"])
def toolbox(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Toolbox]:
    profile = tmp_path / "gw.toml"
    profile.write_text(servers(tmp_path / "started") + f'\n[serve]\nname_separator = "{request.param}"\n')
    box = Toolbox(load_profile(str(profile)))
    try:
        yield box
    finally:
        box.close()


def clearance_records() -> list[dict]:
    trail = audit_trail(Path(os.environ["LLMC_STATE_DIR"]))
    return [r for r in trail if r.get("event") == "decision" and r.get("server") == "a_b"]


@pytest.mark.usefixtures("isolated_dirs")
def test_a_hosts_direct_call_above_its_clearance_starts_nothing(toolbox: Toolbox, tmp_path: Path) -> None:
    reply = ask(toolbox, "internal", "tools/call", {"name": "a_b.c", "arguments": {"message": "m"}})
    # answered as a name that does not exist (a read answers "not found"): nothing says the
    # server is there, nor how it is classified; the audit trail records the clearance denial
    unknown = ask(toolbox, "internal", "tools/call", {"name": "zz.c", "arguments": {"message": "m"}})
    assert "result" not in reply and "confidential" not in json.dumps(reply), reply
    assert reply["error"]["code"] == unknown["error"]["code"]
    assert reply["error"]["message"] == unknown["error"]["message"].replace("zz.c", "a_b.c")
    toolbox.audit.flush()
    assert [r["rule"] for r in clearance_records()] == ["clearance"]
    assert not (tmp_path / "started").exists()
    assert "a_b" not in toolbox.catalog.pool.sessions


@pytest.mark.usefixtures("isolated_dirs")
def test_a_name_not_given_is_looked_for_under_the_hosts_clearance(toolbox: Toolbox, tmp_path: Path) -> None:
    for method, params in (("tools/call", {"name": "a_b_c", "arguments": {}}), ("prompts/get", {"name": "a_b_p"})):
        reply = ask(toolbox, "internal", method, params)
        assert "error" in reply or reply["result"].get("isError"), reply
    assert not (tmp_path / "started").exists()
    # the same names from a host cleared for it reach the server
    if toolbox.routes.names.dotted:
        return
    reply = ask(toolbox, "confidential", "tools/call", {"name": "a_b_c", "arguments": {"message": "m"}})
    assert reply["result"]["content"][0]["text"] == "c: m"
    assert (tmp_path / "started").exists()


def test_a_persons_call_above_policy_clearance_starts_nothing(isolated_dirs: Path) -> None:
    mark = isolated_dirs / "started"
    profile_file(isolated_dirs / "config", servers(mark) + '\n[policy]\nclearance = "internal"\n')
    proc = llmc("call", "a_b.c", "message=m")
    assert proc.returncode == 4, proc.stderr
    assert "classified confidential" in proc.stderr
    assert [r["rule"] for r in clearance_records()] == ["clearance"]
    assert [r["arguments"] for r in clearance_records()] == [{"message": "m"}]
    assert not mark.exists()
    assert llmc("call", "a.b", "message=m").returncode == 0


def test_a_batch_line_above_policy_clearance_starts_nothing(isolated_dirs: Path) -> None:
    mark = isolated_dirs / "started"
    profile_file(isolated_dirs / "config", servers(mark) + '\n[policy]\nclearance = "internal"\n')
    lines = isolated_dirs / "calls.jsonl"
    calls = [{"id": 1, "tool": "a.b", "arguments": {"message": "m"}}, {"id": 2, "tool": "a_b.c", "arguments": {"message": "m"}}]
    lines.write_text("".join(json.dumps(c) + "\n" for c in calls))
    for validate in ((), ("--validate",)):  # --validate looks each tool up first: not this one
        proc = llmc("call", "--batch", str(lines), *validate)
        assert proc.returncode == 4, proc.stderr
    assert [r["rule"] for r in clearance_records()] == ["clearance", "clearance"]
    assert not mark.exists()
