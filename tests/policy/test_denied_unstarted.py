"""Least privilege: a server nothing may be used of is never started. A server the policy denies
as a whole (`deny = ["s.*"]`) gets no process for `tools list`, `prompts list`, a call, a batch
(with and without --validate), the gateway's warm-up, a host's listing or call; and a call the
policy refuses by its name (a deny pattern, default deny) does not start its server to find the
tool. Each is still denied with the policy's own words (exit 4) and recorded. Only `tools list
--all`, which shows denied tools, asks such a server. Real SDK servers (tests/peers/odd_names.py);
the denied one leaves a mark when it starts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from llmc_cli.config.profiles import load_profile
from llmc_cli.gateway.toolbox import Toolbox
from tests.gateway.test_name_stability import ask
from tests.guard.test_clearance_unstarted import servers
from tests.helpers import audit_trail, llmc, profile_file

WHOLE = '\n[policy]\ndeny = ["a_b.*"]\n'


def decisions(server: str = "a_b") -> list[dict]:
    trail = audit_trail(Path(os.environ["LLMC_STATE_DIR"]))
    return [r for r in trail if r.get("event") == "decision" and r.get("server") == server]


@pytest.fixture
def mark(isolated_dirs: Path) -> Path:
    return isolated_dirs / "started"


def profile(isolated_dirs: Path, mark: Path, policy: str = WHOLE) -> None:
    text = servers(mark).replace('classification = "confidential"\n', "")  # no clearance here: the policy alone
    profile_file(isolated_dirs / "config", text + policy)


def test_a_call_of_a_wholly_denied_server_is_denied_without_starting_it(isolated_dirs: Path, mark: Path) -> None:
    profile(isolated_dirs, mark)
    proc = llmc("call", "a_b.c", "message=m")
    assert proc.returncode == 4, proc.stderr
    assert "a_b.c matches deny pattern 'a_b.*'" in proc.stderr
    # a name the server may not even have: the same denial, not "unknown tool" (nothing is asked)
    assert llmc("call", "a_b.nosuch").returncode == 4
    assert [(r["decision"], r["rule"], r["tool"]) for r in decisions()] == [
        ("deny", "deny: a_b.*", "c"),
        ("deny", "deny: a_b.*", "nosuch"),
    ]
    assert not mark.exists()
    assert llmc("call", "a.b", "message=m").returncode == 0  # the other server works as before
    assert not mark.exists()


@pytest.mark.parametrize("policy", ['\n[policy]\ndeny = ["a_b.c"]\n', '\n[policy]\ndefault = "deny"\nallow = ["a.*"]\n'])
def test_a_call_denied_by_its_name_does_not_start_its_server(isolated_dirs: Path, mark: Path, policy: str) -> None:
    profile(isolated_dirs, mark, policy)
    proc = llmc("call", "a_b.c", "message=m")
    assert proc.returncode == 4, proc.stderr
    assert [r["decision"] for r in decisions()] == ["deny"]
    assert not mark.exists()


@pytest.mark.parametrize(
    "argv", [["tools", "list"], ["tools", "list", "--format", "jsonl"], ["prompts", "list"], ["tools", "lock"]]
)
def test_listings_do_not_start_a_wholly_denied_server(isolated_dirs: Path, mark: Path, argv: list[str]) -> None:
    profile(isolated_dirs, mark)
    os.chdir(isolated_dirs)  # `tools lock` writes llmc.lock here
    proc = llmc(*argv)
    assert proc.returncode == 0, proc.stderr
    assert "a_b" not in proc.stdout
    assert not mark.exists()


def test_tools_list_all_shows_the_denied_server_and_so_asks_it(isolated_dirs: Path, mark: Path) -> None:
    profile(isolated_dirs, mark)
    proc = llmc("tools", "list", "--all", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert {(t["server"], t["name"], t.get("denied", False)) for t in json.loads(proc.stdout)["tools"]} >= {
        ("a_b", "c", True),
        ("a", "b", False),
    }
    assert mark.exists()


def test_a_batch_starts_no_wholly_denied_server(isolated_dirs: Path, mark: Path) -> None:
    profile(isolated_dirs, mark)
    lines = isolated_dirs / "calls.jsonl"
    calls = [{"id": 1, "tool": "a.b", "arguments": {"message": "m"}}, {"id": 2, "tool": "a_b.c", "arguments": {"message": "m"}}]
    lines.write_text("".join(json.dumps(c) + "\n" for c in calls))
    for validate in ((), ("--validate",)):
        proc = llmc("call", "--batch", str(lines), *validate)
        assert proc.returncode == 4, proc.stderr
        results = [json.loads(line) for line in proc.stdout.splitlines()]
        assert [r.get("ok", "error" not in r) for r in results] == [True, False], results
    assert [r["rule"] for r in decisions()] == ["deny: a_b.*", "deny: a_b.*"]
    assert not mark.exists()


@pytest.mark.usefixtures("isolated_dirs")
def test_the_gateway_neither_warms_nor_lists_nor_calls_a_wholly_denied_server(tmp_path: Path) -> None:
    gw = tmp_path / "gw.toml"
    gw.write_text(servers(tmp_path / "started").replace('classification = "confidential"\n', "") + WHOLE)
    box = Toolbox(load_profile(str(gw)))
    try:
        box.warm_up()
        listed = ask(box, "internal", "tools/list", {})
        assert [t["name"] for t in listed["result"]["tools"]] == ["a.b"]
        reply = ask(box, "internal", "tools/call", {"name": "a_b.c", "arguments": {"message": "m"}})
        assert "error" in reply or reply["result"].get("isError"), reply
        assert "a_b" not in box.catalog.pool.sessions
    finally:
        box.close()
    assert not (tmp_path / "started").exists()
