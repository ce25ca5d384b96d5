"""`tools list` starts its stdio server before its listing's machinery loads (cli/tools.py list_:
cli/starting.py start_servers, then cli/tool_listing.py), and that order changes nothing else:
an error found before the spawn still starts no server and is one line; an error after it stops
the server and is one line; the listing is the same. Real SDK server (tests/peers/sdk_server.py)
behind a wrapper that leaves a mark when it starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import PEERS, llmc, profile_file

# The command's modules when its server's process is made (an audit hook on subprocess.Popen).
AT_SPAWN = """
import sys
seen = []
def hook(event, args):
    if event == "subprocess.Popen" and not seen:
        seen.append(sorted(m for m in sys.modules if m.startswith("llmc_cli.")))
sys.addaudithook(hook)
out = sys.argv.pop(1)
sys.argv[0] = "llmc"
import atexit
atexit.register(lambda: open(out, "w").write("\\n".join(seen[0] if seen else [])))
from llmc_cli.cli.main import main
main()
"""


def marked_server(tmp_path: Path) -> tuple[str, Path]:
    """A stdio command that writes a mark when it starts, then runs the SDK server."""
    mark = tmp_path / "started"
    script = tmp_path / "server.sh"
    script.write_text(f'#!/bin/sh\necho started >> "{mark}"\nexec "{sys.executable}" "{PEERS / "sdk_server.py"}"\n')
    script.chmod(0o755)
    return str(script), mark


def test_the_server_is_spawned_before_the_listing_s_modules_load(tmp_path: Path) -> None:
    server, mark = marked_server(tmp_path)
    out = tmp_path / "modules.txt"
    env = {**os.environ, "LLMC_CONFIG_DIR": str(tmp_path / "config"), "LLMC_STATE_DIR": str(tmp_path / "state")}
    env.pop("LLMC_PROFILE", None)
    proc = subprocess.run(
        [sys.executable, "-c", AT_SPAWN, str(out), "tools", "list", "--stdio", server, "--format", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert '"echo"' in proc.stdout and mark.read_text() == "started\n"
    at_spawn = set(out.read_text().split())
    assert "llmc_cli.mcp.transports.stdio" in at_spawn  # (the hook saw the server's spawn)
    later = {"llmc_cli.cli.tool_listing", "llmc_cli.cli.common", "llmc_cli.mcp.hooks", "llmc_cli.catalog", "llmc_cli.mcp.session"}
    assert at_spawn & later == set()


def test_an_error_before_the_spawn_starts_no_server(isolated_dirs: Path, tmp_path: Path) -> None:
    server, mark = marked_server(tmp_path)
    wrong = llmc("tools", "list", "--defer-loading", "--stdio", server)
    assert wrong.returncode == 2 and wrong.stdout == ""
    assert wrong.stderr == "llmc: --defer-loading is Anthropic's tool search: use it with --format anthropic\n"
    both = llmc("tools", "list", "--stdio", server, "--url", "http://127.0.0.1:9/mcp")
    assert both.returncode == 2 and both.stderr == "llmc: give either --stdio or --url, not both\n"
    assert not mark.exists()


def test_a_profile_that_does_not_load_stops_the_started_server(isolated_dirs: Path, tmp_path: Path) -> None:
    """An ad-hoc server starts before the profile loads (as before): a broken profile is one line,
    exit 3, and the server is stopped (the command waits for it)."""
    server, mark = marked_server(tmp_path)
    broken = tmp_path / "broken.toml"
    broken.write_text("[servers\n")
    result = llmc("tools", "list", "-p", str(broken), "--stdio", server)
    assert result.returncode == 3 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and "broken.toml" in result.stderr, result.stderr
    assert mark.read_text() == "started\n"


def test_the_ad_hoc_and_the_profile_s_server_list_the_same_tools(isolated_dirs: Path, tmp_path: Path) -> None:
    """Both ways into start_servers (an ad-hoc server, and a profile's, whose profile loads
    first) list the server's tools as it sent them; a translation too."""
    server, mark = marked_server(tmp_path)
    profile_file(isolated_dirs / "config", f'[servers.s]\ncommand = "{server}"\nsandbox = "none"\n')
    adhoc = llmc("tools", "list", "--stdio", server, "--format", "json")
    profiled = llmc("tools", "list", "--format", "json")
    assert adhoc.returncode == 0 and profiled.returncode == 0, adhoc.stderr + profiled.stderr
    assert adhoc.json()["tools"] and adhoc.json()["errors"] == [] == profiled.json()["errors"]
    assert [{**t, "server": "s"} for t in adhoc.json()["tools"]] == profiled.json()["tools"]
    translated = llmc("tools", "list", "--stdio", server, "--format", "openai")
    assert translated.returncode == 0 and len(translated.json()) == len(adhoc.json()["tools"])
    assert mark.read_text() == "started\n" * 3


def modules_at_spawn(tmp_path: Path, *arguments: str) -> set[str]:
    """llmc's modules loaded when `llmc ARGUMENTS` made its first process, run in a fresh interpreter."""
    out = tmp_path / "modules.txt"
    env = {**os.environ, "LLMC_CONFIG_DIR": str(tmp_path / "config"), "LLMC_STATE_DIR": str(tmp_path / "state")}
    env.pop("LLMC_PROFILE", None)
    proc = subprocess.run(
        [sys.executable, "-c", AT_SPAWN, str(out), *arguments], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    at_spawn = set(out.read_text().split())
    assert "llmc_cli.mcp.transports.stdio" in at_spawn  # (the hook saw the server's spawn)
    return at_spawn


# What a call loads once its server started (cli/__init__.py's interface: cli/common.py, with the
# client hooks, prompts and secrets), and the profile's machinery, which an ad-hoc server's
# command loads after the spawn (config/__init__.py's interface).
AFTER_A_CALL_S_SPAWN = {"llmc_cli.cli.common", "llmc_cli.cli.prompt", "llmc_cli.config.secrets", "llmc_cli.mcp.hooks"}
PROFILE_MACHINERY = {"llmc_cli.config.profiles", "llmc_cli.config.schema", "llmc_cli.config.profile_cache"}


def test_a_call_and_a_batch_spawn_their_server_before_the_rest_loads(tmp_path: Path) -> None:
    """`call` and `call --batch` start their server (an ad-hoc one: before even the profile's
    modules load) as `tools list` does; the call's answer is the same."""
    server, mark = marked_server(tmp_path)
    batch = tmp_path / "calls.jsonl"
    batch.write_text('{"id": 1, "tool": "echo", "arguments": {"message": "a"}}\n')
    for command in (["call", "echo", "message=hi"], ["call", "--batch", str(batch)]):
        at_spawn = modules_at_spawn(tmp_path, *command, "--stdio", server)
        assert at_spawn & (AFTER_A_CALL_S_SPAWN | PROFILE_MACHINERY) == set(), command
    profile_file(tmp_path / "config", f'[servers.s]\ncommand = "{server}"\nsandbox = "none"\n')
    batch.write_text('{"id": 1, "tool": "s.echo", "arguments": {"message": "a"}}\n')  # its server: the one named first
    for command in (["call", "s.echo", "message=hi"], ["call", "--batch", str(batch)]):
        at_spawn = modules_at_spawn(tmp_path, *command)
        assert "llmc_cli.config.profiles" in at_spawn  # the profile says which server to start
        assert at_spawn & AFTER_A_CALL_S_SPAWN == set(), command
    assert mark.read_text() == "started\n" * 4
