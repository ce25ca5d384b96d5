"""Real third-party MCP hosts in front of `llmc serve`, over stdio and over Streamable HTTP
(`--http`): the MCP Inspector CLI and mcporter (both from tests/node) list the gateway's namespaced
tools and call one through its policy."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.gateway.test_http import start, stop
from tests.helpers import llmc_executable

pytestmark = pytest.mark.e2e  # mcporter and the MCP Inspector as hosts: Node processes

BIN = Path(__file__).resolve().parents[1] / "node" / "node_modules" / ".bin"


def inspector(serve: list[str], *method: str) -> list[str]:
    transport = ["--transport", "http"] if serve[0].startswith("http://") else []
    return [str(BIN / "mcp-inspector"), "--cli", *serve, *transport, *method]


def mcporter(serve: list[str], verb: str, *rest: str) -> list[str]:
    if serve[0].startswith("http://"):  # the gateway's URL
        return [str(BIN / "mcporter"), verb, "--http-url", serve[0], "--allow-http", *rest]
    stdio = [str(BIN / "mcporter"), verb, "--stdio", serve[0]]
    for arg in serve[1:]:
        stdio += ["--stdio-arg", arg]
    return [*stdio, *rest]


# host -> (list command, call command for sdk.add a=2 b=3); adding a host = one line
HOSTS = {
    "inspector": (
        lambda s: inspector(s, "--method", "tools/list"),
        lambda s: inspector(s, "--method", "tools/call", "--tool-name", "sdk.add", "--tool-arg", "a=2", "--tool-arg", "b=3"),
    ),
    # --tool: a dotted name is the tool's whole name, not mcporter's `server.tool`
    "mcporter": (
        lambda s: mcporter(s, "list", "--json"),
        lambda s: mcporter(s, "call", "--tool", "sdk.add", "--args", '{"a": 2, "b": 3}'),
    ),
}


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("host", sorted(HOSTS))
def test_real_hosts_list_and_call_through_the_gateway(gateway_profile: Path, tmp_path: Path, host: str, transport: str) -> None:
    if not (BIN / "mcporter").exists() or not (BIN / "mcp-inspector").exists():
        pytest.fail("tests/node is not installed: run scripts/test.sh once")
    running = start(gateway_profile) if transport == "http" else None
    serve = [running.url] if running else [llmc_executable(), "serve", "-p", str(gateway_profile)]
    try:
        list_cmd, call_cmd = HOSTS[host]
        listed = subprocess.run(list_cmd(serve), capture_output=True, text=True, timeout=180, cwd=tmp_path)
        assert listed.returncode == 0, listed.stderr
        names = {tool["name"] for tool in json.loads(listed.stdout[listed.stdout.index("{") :])["tools"]}
        assert {"sdk.add", "ws.read_file"} <= names
        assert "sdk.crash" not in names  # denied by the profile's policy: hidden from every host
        called = subprocess.run(call_cmd(serve), capture_output=True, text=True, timeout=180, cwd=tmp_path)
        assert called.returncode == 0, called.stderr
        assert "5" in called.stdout and 'isError": true' not in called.stdout, called.stdout
    finally:
        if running:
            stop(running)
