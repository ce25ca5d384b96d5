"""Policy through the real CLI against real servers: server-filesystem (npm) and the SDK server."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.helpers import llmc, llmc_process, node_tool, profile_file, sdk_server

pytestmark = pytest.mark.e2e  # the npm reference server-filesystem


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    (root / "reports").mkdir(parents=True)
    (root / "secret").mkdir()
    (root / "errors.log").write_text("disk full\n")
    (root / "secret" / "keys.txt").write_text("k\n")
    return root


def profile(isolated_dirs: Path, data: Path, policy: str, name: str = "default") -> str:
    profile_file(
        isolated_dirs / "config",
        f"""
[servers.fs]
command = "{node_tool("mcp-server-filesystem")}"
args = ["{data}"]

[servers.sdk]
command = "{sys.executable}"
args = ["{sdk_server("sdk_server.py")[1]}"]

{policy}
""",
        name,
    )
    return name


def tool_names(proc: subprocess.CompletedProcess[str]) -> set[str]:
    return {f"{t['server']}.{t['name']}" for t in json.loads(proc.stdout)["tools"]}


def test_deny_wins_and_denied_tools_are_hidden(isolated_dirs, data):
    profile(isolated_dirs, data, '[policy]\nallow = ["fs.*"]\ndeny = ["fs.move_file", "sdk.*"]')
    listed = tool_names(llmc("tools", "list"))
    assert "fs.read_text_file" in listed and "fs.move_file" not in listed and not any(n.startswith("sdk.") for n in listed)
    everything = json.loads(llmc("tools", "list", "--all").stdout)["tools"]
    assert {t["name"] for t in everything if t.get("denied")} >= {"move_file", "echo"}
    proc = llmc("call", "fs.move_file", f"source={data}/errors.log", f"destination={data}/x.log", "--yes")
    assert proc.returncode == 4 and "deny pattern 'fs.move_file'" in proc.stderr
    assert (data / "errors.log").exists()


def test_default_deny_allows_only_what_is_listed(isolated_dirs, data):
    profile(isolated_dirs, data, '[policy]\ndefault = "deny"\nallow = ["sdk.echo"]')
    assert tool_names(llmc("tools", "list")) == {"sdk.echo"}
    assert llmc("call", "sdk.add", "a=1", "b=2", "--yes").returncode == 4


def test_read_only_with_hint_overrides(isolated_dirs, data):
    # sdk.echo has no annotations: not read-only per the spec, until the profile says otherwise.
    profile(
        isolated_dirs,
        data,
        '[policy]\nread_only = true\n[policy.hints."sdk.echo"]\nreadOnly = true\n'
        '[policy.hints."fs.list_allowed_directories"]\nreadOnly = false',
    )
    listed = tool_names(llmc("tools", "list"))
    assert "sdk.echo" in listed and "sdk.add" not in listed
    assert "fs.read_text_file" in listed and "fs.write_file" not in listed
    assert "fs.list_allowed_directories" not in listed  # mislabelled as read-only? the profile decides
    assert llmc("call", "sdk.echo", "message=hi", "--text").stdout == "hi\n"
    proc = llmc("call", "fs.write_file", f"path={data}/x", "content=y", "--yes")
    assert proc.returncode == 4 and "read-only" in proc.stderr


@pytest.mark.parametrize(
    "spelling",
    [
        "{data}/reports/../secret/keys.txt",  # ..
        "{data}/reports//../secret/keys.txt",  # double slash and ..
        "{data}/reports/link/keys.txt",  # a symlink inside the allowed folder
        "{data}/secret/keys.txt",  # plainly outside
    ],
)
def test_argument_rules_cannot_be_escaped(isolated_dirs, data, spelling):
    (data / "reports" / "link").symlink_to(data / "secret")
    profile(
        isolated_dirs, data, f'[policy]\nconfirm_destructive = false\n[policy.args."fs.write_file"]\npath = ["{data}/reports/**"]'
    )
    target = spelling.format(data=data)
    proc = llmc("call", "fs.write_file", f"path={target}", "content=pwned")
    assert proc.returncode == 4 and "args.fs.write_file.path" in proc.stderr
    assert (data / "secret" / "keys.txt").read_text() == "k\n"


def test_argument_rule_with_tilde(isolated_dirs, data, monkeypatch):
    monkeypatch.setenv("HOME", str(data))
    profile(isolated_dirs, data, '[policy]\nconfirm_destructive = false\n[policy.args."fs.write_file"]\npath = ["~/reports/**"]')
    assert llmc("call", "fs.write_file", f"path={data}/reports/ok.txt", "content=fine").returncode == 0
    assert llmc("call", "fs.write_file", f"path={data}/errors.log", "content=no").returncode == 4


def test_confirm_without_a_terminal_yes_and_a_preapproved_hash(isolated_dirs, data):
    name = profile(isolated_dirs, data, '[policy]\nconfirm = ["fs.write_*"]')
    args = ("fs.write_file", f"path={data}/reports/r.txt", "content=hi")
    denied = llmc("call", *args)
    assert denied.returncode == 4 and "no terminal" in denied.stderr and "hmac-sha256:" in denied.stderr
    assert not (data / "reports" / "r.txt").exists()
    assert llmc("call", *args, "--yes").returncode == 0
    check = llmc("policy", "check", *args)
    assert check.returncode == 4 and json.loads(check.stdout)["decision"] == "confirm"
    approved = json.loads(llmc("policy", "approve", *args, "--write").stdout)
    assert approved["written"] and approved["callHash"].startswith("hmac-sha256:")
    assert llmc("call", *args).returncode == 0  # the exact call, now pre-approved
    other = llmc("call", "fs.write_file", f"path={data}/reports/r.txt", "content=other")
    assert other.returncode == 4  # different arguments, different hash
    assert json.loads(llmc("policy", "check", *args).stdout)["rule"] == "approved"
    assert name == "default"


def test_confirm_patterns_apply_to_read_only_tools_too(isolated_dirs, data):
    profile(isolated_dirs, data, '[policy]\nconfirm = ["fs.read_*"]')
    assert llmc("call", "fs.read_text_file", f"path={data}/errors.log").returncode == 4
    assert llmc("call", "fs.list_allowed_directories").returncode == 0


def test_rate_limit_holds_across_parallel_processes(isolated_dirs, data):
    profile(isolated_dirs, data, '[policy]\ncalls_per_minute = 5\n[policy.hints."sdk.echo"]\nreadOnly = true')
    with ThreadPoolExecutor(8) as pool:
        # Processes: the rate window is shared between processes, which is what this checks.
        results = list(pool.map(lambda i: llmc_process("call", "sdk.echo", f"message={i}"), range(8)))
    codes = sorted(r.returncode for r in results)
    assert codes == [0] * 5 + [4] * 3, [r.stderr for r in results]
    limited = next(r for r in results if r.returncode == 4)
    assert "retry after" in limited.stderr


def test_per_tool_rate_limit(isolated_dirs, data):
    profile(
        isolated_dirs, data, '[policy]\n[policy.tool_calls_per_minute]\n"sdk.echo" = 1\n[policy.hints."sdk.*"]\nreadOnly = true'
    )
    assert llmc("call", "sdk.echo", "message=a").returncode == 0
    assert llmc("call", "sdk.echo", "message=b").returncode == 4
    assert llmc("call", "sdk.add", "a=1", "b=1").returncode == 0
