"""One server's problem is that server's problem. A server that cannot be configured (an unset
${VAR} in a header, an imported server whose token was never set) is an entry in `errors` with
its own exit code while the others work; a command about that server alone fails with it. A
server that does not offer resources or prompts is skipped (said so at -v), not failed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers import PEERS, llmc, profile_file, sdk_server

UNSET = "LLMC_TEST_TOKEN_NEVER_SET"
MISBEHAVING = str(PEERS / "misbehaving_stdio.py")


def write_profile(isolated_dirs: Path, other: str) -> None:
    profile_file(
        isolated_dirs / "config",
        f'[servers.sdk]\ncommand = "{sys.executable}"\nargs = ["{sdk_server("sdk_server.py")[1]}"]\n\n{other}\n',
    )


BROKEN_HEADER = f'[servers.remote]\nurl = "http://127.0.0.1:9/mcp"\nheaders = {{ Authorization = "Bearer ${{{UNSET}}}" }}\n'
BROKEN_ENV = (
    f'[servers.tokened]\ncommand = "{sys.executable}"\nargs = ["{MISBEHAVING}", "good"]\nenv = {{ API_TOKEN = "${{{UNSET}}}" }}\n'
)
NO_RESOURCES = f'[servers.plain]\ncommand = "{sys.executable}"\nargs = ["{MISBEHAVING}", "good"]\n'  # tools only


@pytest.mark.parametrize(
    "other, argv, code, key, rows, failed",
    [
        # an unset variable: that server is an error entry (exit 3 inside), the others' results stand (exit 5)
        (BROKEN_HEADER, ["tools", "list"], 5, "tools", {"sdk"}, {"remote": 3}),
        (BROKEN_HEADER, ["resources", "list"], 5, "resources", {"sdk"}, {"remote": 3}),
        (BROKEN_HEADER, ["prompts", "list"], 5, "prompts", {"sdk"}, {"remote": 3}),
        (BROKEN_HEADER, ["ping"], 5, "servers", {"sdk"}, {"remote": 3}),
        (BROKEN_ENV, ["tools", "list"], 5, "tools", {"sdk"}, {"tokened": 3}),
        (BROKEN_HEADER, ["tools", "list", "-s", "remote"], 3, "tools", set(), {"remote": 3}),  # only it: its code
        (BROKEN_HEADER, ["call", "sdk.echo", "message=hi"], 0, None, None, None),
        (BROKEN_HEADER, ["call", "remote.anything"], 3, None, None, None),
        # no resources/prompts capability: skipped, not failed
        (NO_RESOURCES, ["resources", "list"], 0, "resources", {"sdk"}, {}),
        (NO_RESOURCES, ["resources", "templates"], 0, "resourceTemplates", set(), {}),
        (NO_RESOURCES, ["prompts", "list"], 0, "prompts", {"sdk"}, {}),
        (NO_RESOURCES, ["tools", "list"], 0, "tools", {"sdk", "plain"}, {}),
    ],
)
def test_one_servers_problem(isolated_dirs, monkeypatch, other, argv, code, key, rows, failed):
    monkeypatch.delenv(UNSET, raising=False)
    write_profile(isolated_dirs, other)
    proc = llmc(*argv)
    assert proc.returncode == code, proc.stdout + proc.stderr
    if key is None:
        assert (UNSET in proc.stderr) == (code == 3)
        return
    out = json.loads(proc.stdout)
    assert {row["server"] for row in out[key]} == rows
    assert {e["server"]: e["exitCode"] for e in out["errors"]} == failed
    for error in out["errors"]:
        assert UNSET in error["message"] and error["error"] == "config"


def test_a_server_without_a_capability_is_skipped_and_said_so_at_v(isolated_dirs):
    write_profile(isolated_dirs, NO_RESOURCES)
    quiet, verbose = llmc("resources", "list"), llmc("-v", "resources", "list")
    assert quiet.returncode == verbose.returncode == 0
    assert "skipped" not in quiet.stderr
    assert "plain offers no resources: skipped" in verbose.stderr


@pytest.mark.parametrize("argv", [["resources", "list"], ["resources", "templates"], ["prompts", "list"]])
def test_the_built_in_default_profile_lists_nothing_and_exits_0(isolated_dirs, argv):
    for _ in range(2):  # the first run probes the built-in server, the second uses the era cache
        proc = llmc(*argv)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["errors"] == []


def test_an_imported_server_with_a_missing_token_does_not_block_the_others(isolated_dirs, tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    source = tmp_path / "claude_desktop_config.json"
    source.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "sdk": {"command": sys.executable, "args": [sdk_server("sdk_server.py")[1]]},
                    "github": {
                        "command": sys.executable,
                        "args": [MISBEHAVING, "good"],
                        "env": {"GITHUB_TOKEN": "ghp_literal0123"},
                    },
                }
            }
        )
    )
    assert llmc("servers", "import", str(source)).returncode == 0
    listed = llmc("tools", "list")
    assert listed.returncode == 5, listed.stderr
    out = json.loads(listed.stdout)
    assert {t["server"] for t in out["tools"]} >= {"sdk", "workspace"}
    assert [(e["server"], e["exitCode"]) for e in out["errors"]] == [("github", 3)]
    assert "GITHUB_TOKEN" in out["errors"][0]["message"] and "ghp_" not in listed.stdout + listed.stderr
    assert llmc("call", "sdk.add", "a=40", "b=2", "--text").stdout == "42\n"


def test_a_session_keeps_the_servers_that_can_be_configured(isolated_dirs, monkeypatch):
    monkeypatch.delenv(UNSET, raising=False)
    write_profile(isolated_dirs, BROKEN_HEADER)
    started = llmc("session", "start", "work")
    try:
        assert started.returncode == 5, started.stderr
        states = {s["name"]: s["state"] for s in json.loads(started.stdout)["servers"]}
        assert states == {"sdk": "running", "remote": "unusable"}
        assert UNSET in started.stderr
        called = llmc("call", "sdk.echo", "message=kept", "--text", "--session", "work")
        assert called.returncode == 0 and called.stdout == "kept\n", called.stderr
    finally:
        assert llmc("session", "stop", "work").returncode == 0
