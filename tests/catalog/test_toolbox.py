"""Many servers, one toolbox: every enabled server of a profile at once, a dead or silent one
reported without blocking the others, names routed by server, -s narrowing."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import llmc, llmc_process, node_tool, profile_file, sdk_server
from tests.profiles.runner import toml_str

pytestmark = pytest.mark.e2e  # the npm reference servers (everything, filesystem)

PY, SDK = sdk_server("sdk_server.py")


@pytest.fixture
def profile(isolated_dirs: Path) -> Path:
    data = isolated_dirs / "data"
    data.mkdir()
    (data / "errors.log").write_text("disk full\n")
    return profile_file(
        isolated_dirs / "config",
        f"""
[servers.sdk]
command = {toml_str(PY)}
args = [{toml_str(SDK)}]

[servers.everything]
command = {toml_str(node_tool("mcp-server-everything"))}

[servers.fs]
command = {toml_str(node_tool("mcp-server-filesystem"))}
args = [{toml_str(str(data))}]

[servers.off]
command = {toml_str(PY)}
args = [{toml_str(SDK)}]
enabled = false
""",
    )


def add_dead_and_silent(isolated_dirs: Path) -> None:
    profile_file(
        isolated_dirs / "config",
        f"""
[servers.sdk]
command = {toml_str(PY)}
args = [{toml_str(SDK)}]

[servers.dead]
command = {toml_str(str(isolated_dirs / "no-such-server"))}

[servers.silent]
command = {toml_str(sys.executable)}
args = ["-c", "import time; time.sleep(30)"]
timeout = 1
connect_timeout = 1

[servers.everything]
command = {toml_str(node_tool("mcp-server-everything"))}
""",
    )


def test_tools_list_covers_every_enabled_server(profile: Path):
    run = llmc("tools", "list")
    assert run.returncode == 0, run.stderr
    data = run.json()
    assert data["errors"] == []
    by_server: dict[str, set[str]] = {}
    for tool in data["tools"]:
        by_server.setdefault(tool["server"], set()).add(tool["name"])
    assert set(by_server) == {"sdk", "everything", "fs"}  # `off` is disabled
    assert {"echo", "add"} <= by_server["sdk"] and "get-sum" in by_server["everything"]
    assert "read_text_file" in by_server["fs"]


def test_a_dead_and_a_silent_server_do_not_block_the_live_ones(isolated_dirs: Path):
    add_dead_and_silent(isolated_dirs)
    started = time.monotonic()
    run = llmc("tools", "list")
    elapsed = time.monotonic() - started
    assert run.returncode == 5
    data = run.json()
    assert {t["server"] for t in data["tools"]} == {"sdk", "everything"}
    failed = {e["server"]: e for e in data["errors"]}
    assert set(failed) == {"dead", "silent"}
    assert failed["dead"]["exitCode"] == 5 and failed["silent"]["error"] in ("timeout", "connection")
    lines = run.stderr.splitlines()
    assert any("dead" in line for line in lines) and any("silent" in line for line in lines)
    assert lines[-1] == "llmc: 2 of 4 server(s) failed"
    assert elapsed < 15, elapsed  # the silent server costs its own timeout, not the others'


def test_jsonl_and_table_still_list_the_live_servers_tools(isolated_dirs: Path):
    add_dead_and_silent(isolated_dirs)
    run = llmc("tools", "list", "--format", "jsonl", "-s", "sdk", "-s", "dead")
    assert run.returncode == 5
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    rows, errors = [r for r in lines if "error" not in r], [r for r in lines if "error" in r]
    assert rows and {r["server"] for r in rows} == {"sdk"}
    assert [e["server"] for e in errors] == ["dead"] and lines[-1] == errors[-1]  # errors are lines too, after the rows
    table = llmc("tools", "list", "--format", "table", "-s", "sdk", "-s", "dead")
    assert table.returncode == 5 and table.stdout.splitlines()[0].split() == ["server", "tool", "description"]


def test_call_server_dot_tool_and_unambiguous_bare_names(profile: Path):
    run = llmc("call", "fs.read_text_file", f"path={profile.parent.parent.parent / 'data' / 'errors.log'}", "--text")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "disk full"
    run = llmc("call", "add", "a=1", "b=2", "--text", "--yes")  # only sdk has `add`
    assert run.returncode == 0 and run.stdout == "3\n"
    run = llmc("call", "get-sum", "a=1", "b=2", "--yes")
    assert run.returncode == 0 and run.json()["server"] == "everything"


def test_an_ambiguous_bare_name_lists_the_candidates(profile: Path):
    run = llmc("call", "echo", "message=hi")
    assert run.returncode == 2
    assert run.stderr.strip() == "llmc: tool name 'echo' is ambiguous: sdk.echo, everything.echo"
    narrowed = llmc("call", "echo", "message=hi", "-s", "everything", "--text", "--yes")
    assert narrowed.returncode == 0 and "hi" in narrowed.stdout
    missing = llmc("call", "nope")
    assert missing.returncode == 2 and "no server has a tool named 'nope'" in missing.stderr


def test_server_option_narrows_and_reaches_disabled_servers(profile: Path):
    run = llmc("tools", "list", "-s", "fs")
    assert run.returncode == 0 and {t["server"] for t in run.json()["tools"]} == {"fs"}
    run = llmc("tools", "list", "-s", "off", "-s", "sdk")
    assert {t["server"] for t in run.json()["tools"]} == {"off", "sdk"}
    run = llmc("call", "off.echo", "message=on demand", "--text", "-s", "off", "--yes")
    assert run.returncode == 0 and run.stdout == "on demand\n"
    run = llmc("call", "off.echo", "message=x")  # not enabled, not named: not contacted, and said how to reach it
    assert run.returncode == 2 and "server off is disabled in this profile" in run.stderr and "-s off" in run.stderr


def test_the_installed_llmc_in_a_subprocess(isolated_dirs: Path):
    add_dead_and_silent(isolated_dirs)
    proc = llmc_process("tools", "list", "-s", "sdk", "-s", "dead", timeout=60)
    assert proc.returncode == 5 and "Traceback" not in proc.stderr
    data = json.loads(proc.stdout)
    assert {t["server"] for t in data["tools"]} == {"sdk"} and data["errors"][0]["server"] == "dead"
    proc = llmc_process("servers", "list", "--format", "table", timeout=60)
    assert proc.returncode == 0 and "silent" in proc.stdout and "\x1b" not in proc.stdout
