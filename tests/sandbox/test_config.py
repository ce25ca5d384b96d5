"""The sandbox as configured: profile keys and their errors, what `servers add|import|show` and
`tools list -v` write and say, `auto` without a usable bubblewrap, the gateway's refusal, and
who is handed LLMC_PROTECTED_PATHS."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.helpers import PEERS, free_port, llmc, llmc_executable
from tests.sandbox.conftest import BWRAP

PROBER = f"command = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(PEERS / 'sandbox_prober.py'))}]\n"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "table, message",
    [
        ('sandbox = "box"\n', "servers.p.sandbox"),
        ('sandbox = "bwrap"\nnetwork = "maybe"\n', "servers.p.network"),
        ('sandbox = "bwrap"\nread_paths = ["relative/dir"]\n', "must be absolute paths"),
        ('sandbox = "bwrap"\nwrite_paths = ["/"]\n', "whole file system"),
        ('sandbox = "none"\nwrite_paths = ["/srv"]\n', "need sandbox"),
        ('read_paths = ["/srv"]\n', "need sandbox"),
        ('sandbox = "bwrap"\nread_path = ["/srv"]\n', "unknown key"),
    ],
)
def test_bad_sandbox_keys_are_one_line_and_exit_3(tmp_path: Path, table: str, message: str) -> None:
    profile = write(tmp_path / "p.toml", "[servers.p]\n" + PROBER + table)
    result = llmc("-p", str(profile), "tools", "list")
    assert result.returncode == 3 and message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stdout == ""


def test_sandbox_keys_on_a_remote_server_are_an_error(tmp_path: Path) -> None:
    profile = write(tmp_path / "p.toml", '[servers.r]\nurl = "http://127.0.0.1:9/mcp"\nsandbox = "auto"\n')
    result = llmc("-p", str(profile), "servers", "list")
    assert result.returncode == 3 and "stdio servers ('command') only" in result.stderr


def test_a_declared_path_that_does_not_exist_makes_that_server_unusable(tmp_path: Path) -> None:
    if BWRAP is None:
        pytest.skip("bubblewrap is not installed")
    profile = write(tmp_path / "p.toml", "[servers.p]\n" + PROBER + f'sandbox = "bwrap"\nread_paths = ["{tmp_path}/gone"]\n')
    result = llmc("-p", str(profile), "call", "p.env")
    assert result.returncode == 3 and f"{tmp_path}/gone" in result.stderr and "does not exist" in result.stderr


def test_servers_add_boxes_new_stdio_servers(tmp_path: Path) -> None:
    added = llmc("servers", "add", "fs", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem")
    assert added.returncode == 0, added.stderr
    assert added.json()["server"] == {
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-filesystem"],
        "sandbox": "auto",
        "network": True,
    }
    data = tmp_path / "data"
    custom = llmc(
        "servers",
        "add",
        "local",
        "--sandbox",
        "bwrap",
        "--no-network",
        "--read-path",
        "/usr/share",
        "--write-path",
        str(data),
        "--write-path",
        "~/notes",
        "--",
        "python3",
        "-m",
        "srv",
    )
    assert custom.returncode == 0, custom.stderr
    assert custom.json()["server"] == {
        "command": "python3",
        "args": ["-m", "srv"],
        "sandbox": "bwrap",
        "network": False,
        "read_paths": ["/usr/share"],
        "write_paths": [str(data), "~/notes"],
    }
    bare = llmc("servers", "add", "trusted", "--sandbox", "none", "--", "trusted-server")
    assert bare.json()["server"] == {"command": "trusted-server", "sandbox": "none"}
    for bad in (["--sandbox", "none", "--read-path", "/srv"], ["--url", "http://127.0.0.1:9/mcp", "--no-network"]):
        refused = llmc("servers", "add", "x", *bad, *([] if "--url" in bad else ["--", "srv"]))
        assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    remote = llmc("servers", "add", "r", "--url", "http://127.0.0.1:9/mcp")
    assert "sandbox" not in remote.json()["server"]


def test_servers_import_boxes_stdio_servers(tmp_path: Path) -> None:
    config = write(
        tmp_path / "claude.json",
        json.dumps(
            {
                "mcpServers": {
                    "mem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},
                    "remote": {"url": "http://127.0.0.1:9/mcp"},
                }
            }
        ),
    )
    imported = llmc("servers", "import", str(config))
    assert imported.returncode == 0, imported.stderr
    servers = imported.json()["servers"]
    assert servers["mem"]["sandbox"] == "auto" and servers["mem"]["network"] is True
    assert "sandbox" not in servers["remote"]
    again = llmc("servers", "import", "--replace", "--no-network", "--write-path", str(tmp_path), str(config))
    mem = again.json()["servers"]["mem"]
    assert (mem["sandbox"], mem["network"], mem["write_paths"]) == ("auto", False, [str(tmp_path)])


def test_servers_show_and_tools_list_say_how_a_server_runs(tmp_path: Path) -> None:
    profile = write(
        tmp_path / "p.toml",
        "[servers.old]\n" + PROBER + "\n[servers.boxed]\n" + PROBER + f'sandbox = "bwrap"\nread_paths = ["{tmp_path}"]\n',
    )
    old = llmc("-p", str(profile), "servers", "show", "old")
    assert old.json()["runs"] == "not sandboxed"
    boxed = llmc("-p", str(profile), "servers", "show", "boxed").json()
    assert boxed["sandbox"] == "bwrap" and boxed["read_paths"] == [str(tmp_path)]
    if BWRAP is None:
        pytest.skip("bubblewrap is not installed")
    assert boxed["runs"] == f"in bwrap (no network; read: {tmp_path})"
    listed = llmc("-v", "-p", str(profile), "tools", "list")
    assert listed.returncode == 0, listed.stderr
    assert "llmc: old runs not sandboxed" in listed.stderr
    assert f"llmc: boxed runs in bwrap (no network; read: {tmp_path})" in listed.stderr


def test_auto_without_bubblewrap_says_so_once_and_runs(tmp_path: Path) -> None:
    """No bwrap on PATH (a host without bubblewrap): sandbox = "auto" runs the servers as they
    are, after one line that names them; sandbox = "bwrap" is that server's error (exit 3)."""
    profile = write(
        tmp_path / "p.toml",
        "[servers.a]\n"
        + PROBER
        + 'sandbox = "auto"\n\n[servers.b]\n'
        + PROBER
        + 'sandbox = "auto"\n\n[servers.c]\n'
        + PROBER
        + 'sandbox = "bwrap"\n',
    )
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {"PATH": str(empty)}
    listed = llmc("-p", str(profile), "tools", "list", "-s", "a", "-s", "b", env=env)
    assert listed.returncode == 0, listed.stderr
    warnings = [line for line in listed.stderr.splitlines() if "WITHOUT a sandbox" in line]
    assert warnings == [
        'llmc: bubblewrap is not usable here: server(s) a, b run WITHOUT a sandbox (sandbox = "auto"; '
        'install bubblewrap, or say sandbox = "none")'
    ]
    home = json.loads(llmc("-p", str(profile), "call", "a.whoami", env=env).json()["structuredContent"]["result"])
    assert home["home"] == os.environ.get("HOME")  # not the private one: really unsandboxed
    refused = llmc("-p", str(profile), "call", "c.whoami", env=env)
    assert refused.returncode == 3 and "bubblewrap (bwrap) is not usable" in refused.stderr


def test_gateway_with_principals_refuses_an_unsandboxed_stdio_server(tmp_path: Path) -> None:
    served = write(tmp_path / "gw.toml", "[servers.p]\n" + PROBER + '\n[serve.principals.ci]\ntoken_env = "GW_T"\n')
    result = llmc("serve", "-p", str(served), "--http", f"127.0.0.1:{free_port()}", env={"GW_T": "t" * 32}, timeout=60)
    assert result.returncode == 3, result.stderr
    assert "server p:" in result.stderr and 'sandbox = "none"' in result.stderr
    boxed = write(tmp_path / "auto.toml", served.read_text().replace(PROBER, PROBER + 'sandbox = "auto"\n'))
    empty = tmp_path / "bin"
    empty.mkdir()
    fallback = llmc(
        "serve", "-p", str(boxed), "--http", f"127.0.0.1:{free_port()}", env={"GW_T": "t" * 32, "PATH": str(empty)}, timeout=60
    )  # no bubblewrap: "auto" would run it unsandboxed
    assert fallback.returncode == 3 and "server p:" in fallback.stderr, fallback.stderr
    from llmc_cli.config.profiles import load_profile
    from llmc_cli.gateway.toolbox import Toolbox

    write(served, served.read_text().replace(PROBER, PROBER + 'sandbox = "none"\n'))  # accepted when the profile says so
    Toolbox(load_profile(str(served))).close()
    no_principals = write(tmp_path / "open.toml", "[servers.p]\n" + PROBER)
    Toolbox(load_profile(str(no_principals))).close()  # a gateway for one local host: as before


def test_protected_paths_go_to_llmc_only(tmp_path: Path) -> None:
    """LLMC_PROTECTED_PATHS, the list of llmc's own files, is for llmc run as a stdio server
    (`llmc serve workspace`), which must protect them; a third-party server is not handed it."""
    from llmc_cli import services
    from llmc_cli.config.profiles import load_profile

    profile = write(
        tmp_path / "p.toml",
        "[servers.p]\n" + PROBER + f"\n[servers.ws]\ncommand = {json.dumps(llmc_executable())}\n"
        f'args = ["serve", "workspace", "--root", {json.dumps(str(tmp_path))}]\n',
    )
    specs, _ = services.launch_specs(load_profile(str(profile)))
    env = {spec.name: spec.env for spec in specs}
    assert "LLMC_PROTECTED_PATHS" not in env["p"]
    assert str(profile) in json.loads(env["ws"]["LLMC_PROTECTED_PATHS"])
