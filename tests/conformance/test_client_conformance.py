"""The official MCP conformance suite's client scenarios that need no authorization, run
against `llmc` itself (tests/conformance/client.py), from both suites: 0.1.x (up to 2025-11-25)
and the 2026-07-28 one. Every check must be SUCCESS (or INFO, or SKIPPED for a capability llmc
rightly does not declare): no failure, no warning. No call passes --yes: a typed call is the
person's own decision."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import NODE_BIN, conformance_suite

CLIENT = Path(__file__).with_name("client.py")
LEGACY = ["initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"]
# request-metadata: _meta and MCP-Protocol-Version on every request, and one retry with a
# version the server lists after it refused the first (UnsupportedProtocolVersion, -32022)
MODERN = ["tools_call", "request-metadata", "sep-2322-client-request-state", "http-standard-headers",
          "http-custom-headers", "http-invalid-tool-headers", "json-schema-ref-no-deref"]
CASES = [("2025-11-25", s) for s in LEGACY] + [("2026-07-28", s) for s in MODERN]


@pytest.mark.parametrize("suite, scenario", CASES)
def test_scenario_passes_without_warnings(suite, scenario, tmp_path):
    env = {**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ['PATH']}"}  # Node 22 first
    proc = subprocess.run(
        [conformance_suite(suite), "client", "--command", f"{sys.executable} {CLIENT}",
         "--scenario", scenario, "--spec-version", suite, "--timeout", "60000", "-o", str(tmp_path)],
        capture_output=True, text=True, timeout=180, env=env)
    checks = [c for f in tmp_path.rglob("checks.json") for c in json.loads(f.read_text())]
    assert checks, f"no checks recorded:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}"
    bad = [c for c in checks if c["status"] not in ("SUCCESS", "INFO", "SKIPPED")]
    assert not bad, json.dumps(bad, indent=1)[:4000]
    assert proc.returncode == 0, proc.stdout[-3000:]
