"""What a server or a host puts in llmc's messages stays on its one line: a newline in a tool's
error, a tool's name or a host's clientInfo is shown as \\n and control characters as escapes,
so neither can write a line llmc never said ("llmc: ...") nor act on the reader's terminal.
Real SDK servers (tests/peers/quoting_server.py, odd_names.py); the gateway as a process (its
log is what is tested)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.gateway.test_http import start, stop
from tests.helpers import PEERS, llmc, profile_file

FORGED = "x\nllmc: all calls succeeded\x1b[2J"


def test_a_tool_errors_newline_stays_on_its_line(isolated_dirs: Path) -> None:
    profile_file(
        isolated_dirs / "config",
        f"[servers.q]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(PEERS / 'quoting_server.py'))}]\n"
        'sandbox = "none"\n',
    )
    for fail_with in ("tool", "rpc"):
        proc = llmc(
            "call",
            "q.login",
            "--json",
            json.dumps({"user": "u", "password": FORGED, "fail_with": fail_with}),
        )
        assert proc.returncode in (1, 5, 6), proc.stderr
        assert [line for line in proc.stderr.splitlines() if line.startswith("llmc:")] == proc.stderr.splitlines()
        assert len(proc.stderr.splitlines()) == 1 and "\x1b" not in proc.stderr, proc.stderr


def test_a_tool_names_newline_stays_on_its_warnings_line(isolated_dirs: Path) -> None:
    args = [str(PEERS / "odd_names.py"), "line\nllmc: forged"]
    profile_file(
        isolated_dirs / "config",
        f'[servers.odd]\ncommand = {json.dumps(sys.executable)}\nargs = {json.dumps(args)}\nsandbox = "none"\n',
    )
    proc = llmc("tools", "list", "--format", "text")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("\n") == 1 and "renamed" in proc.stderr and "line\\nllmc: forged" in proc.stderr, proc.stderr


@pytest.mark.e2e
def test_a_hosts_client_info_stays_on_its_line_in_the_gateways_log(isolated_dirs: Path) -> None:
    args = [str(PEERS / "odd_names.py"), "echo"]
    profile = isolated_dirs / "gw.toml"
    profile.write_text(f'[servers.odd]\ncommand = {json.dumps(sys.executable)}\nargs = {json.dumps(args)}\nsandbox = "none"\n')
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "host\x1b]52;c;cHduZWQ=\x07", "version": "1\nllmc serve: principal admin connected"},
        },
    }
    gateway = start(profile, "-v", process=True)
    try:
        status, _headers, _body = gateway.request("POST", "/mcp", initialize)
        assert status == 200, _body
    finally:
        stderr = stop(gateway)
    opened = [line for line in stderr.splitlines() if "opened" in line or "connected" in line]
    assert opened and all("1\\nllmc serve: principal admin" in line for line in opened), stderr
    assert not any(line.startswith("llmc serve: principal admin") for line in stderr.splitlines()), stderr
    assert "\x1b" not in stderr and "\x07" not in stderr, stderr
