"""The official MCP conformance suite's client scenarios that need no authorization, run
against `llmc` itself (tests/conformance/client.py). Every check must be SUCCESS: no failure,
no warning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import NODE_BIN, node_tool

CLIENT = Path(__file__).with_name("client.py")
SCENARIOS = ["initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario_passes_without_warnings(scenario, tmp_path):
    env = {**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ['PATH']}"}  # Node 22 first
    proc = subprocess.run(
        [node_tool("conformance"), "client", "--command", f"{sys.executable} {CLIENT}",
         "--scenario", scenario, "--timeout", "60000", "-o", str(tmp_path)],
        capture_output=True, text=True, timeout=180, env=env)
    checks = [c for f in tmp_path.rglob("checks.json") for c in json.loads(f.read_text())]
    assert checks, f"no checks recorded:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}"
    bad = [c for c in checks if c["status"] not in ("SUCCESS", "INFO")]
    assert not bad, json.dumps(bad, indent=1)[:4000]
    assert proc.returncode == 0, proc.stdout[-3000:]
