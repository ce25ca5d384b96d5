"""The official MCP conformance suite's client scenarios that need no authorization, run
against `llmc` itself (tests/conformance/client.py), from both suites: 0.1.x (up to 2025-11-25)
and the 2026-07-28 one. Every check must be SUCCESS (or INFO, or SKIPPED for a capability llmc
rightly does not declare): no failure, no warning. No call passes --yes: a typed call is the
person's own decision."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import NODE_BIN, conformance_suite

pytestmark = pytest.mark.e2e  # the official conformance suites: Node processes

CLIENT = Path(__file__).with_name("client.py")
LEGACY = ["initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"]
# request-metadata: _meta and MCP-Protocol-Version on every request, and one retry with a
# version the server lists after it refused the first (UnsupportedProtocolVersion, -32022)
MODERN = [
    "tools_call",
    "request-metadata",
    "sep-2322-client-request-state",
    "http-standard-headers",
    "http-custom-headers",
    "http-invalid-tool-headers",
    "json-schema-ref-no-deref",
    "json-schema-2020-12-preservation",
]
# The 2026 package's scenarios for 2025-11-25 the 0.1.x package does not have yet
LEGACY_IN_2026 = ["json-schema-2020-12-preservation"]
CASES = (
    [("2025-11-25", s) for s in LEGACY]
    + [("2026-07-28", s) for s in MODERN]
    + [("2026-package/2025-11-25", s) for s in LEGACY_IN_2026]
)


@pytest.mark.parametrize("suite, scenario", CASES)
def test_scenario_passes_without_warnings(suite, scenario, tmp_path):
    env = {**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ['PATH']}"}  # Node 22 first
    package, _, version = suite.rpartition("/")  # "2026-package/V": the 2026 suite testing version V
    proc = subprocess.run(
        [
            conformance_suite("2026-07-28" if package else suite),
            "client",
            "--command",
            f"{sys.executable} {CLIENT}",
            "--scenario",
            scenario,
            "--spec-version",
            version,
            "--timeout",
            "60000",
            "-o",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    checks = [c for f in tmp_path.rglob("checks.json") for c in json.loads(f.read_text())]
    assert checks, f"no checks recorded:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}"
    bad = [c for c in checks if c["status"] not in ("SUCCESS", "INFO", "SKIPPED")]
    assert not bad, json.dumps(bad, indent=1)[:4000]
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_every_client_scenario_without_authorization_is_run():
    """A scenario a new suite release adds shows up here, not as silently untested. Auth
    scenarios are test_auth_conformance's; [extension]-only ones are optional features."""
    env = {**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ['PATH']}"}
    run = {suite: {s for v, s in CASES if v.endswith(suite)} for suite in ("2025-11-25", "2026-07-28")}
    for suite in ("2025-11-25", "2026-07-28"):
        listing = subprocess.run([conformance_suite(suite), "list"], capture_output=True, text=True, timeout=60, env=env)
        assert listing.returncode == 0, listing.stderr
        client = listing.stdout.split("Client scenarios")[1].split("\n\n")[0]
        for name, versions in re.findall(r"^  - (\S+) \[([^\]]*)\]", client, re.M):
            if name.startswith("auth/") or versions == "extension":
                continue
            wanted = [v for v in ("2025-11-25", "2026-07-28") if v in versions.split(",")]
            for version in wanted:
                assert name in run[version], f"{name} [{versions}] of the {suite} package is not run for {version}"
