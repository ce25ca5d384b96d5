"""The official MCP conformance suite's authorization scenarios, run against `llmc` itself
(tests/conformance/auth_client.py: a profile, then `llmc tools list` and `llmc call`, with a
headless BROWSER). Every check must be SUCCESS or INFO: no failure, no warning; no token the
suite issued may appear in llmc's stdout or stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import NODE_BIN, conformance_suite

pytestmark = pytest.mark.e2e  # the official conformance suites: Node processes

CLIENT = Path(__file__).with_name("auth_client.py")
SCENARIOS = [
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/client-credentials-basic",
]
# The 2026-07-28 suite: the scenarios above that it keeps (against modern servers), and its own.
SCENARIOS_2026 = [s for s in SCENARIOS if "2025-03-26" not in s and s != "auth/client-credentials-basic"] + [
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
]
CASES = [("2025-11-25", s) for s in SCENARIOS] + [("2026-07-28", s) for s in SCENARIOS_2026]
# Scenarios where the right behaviour is to give up: llmc must then fail with exit 9 (auth).
REFUSALS = {"auth/resource-mismatch": "not this server", "auth/scope-retry-limit": "still insufficient scope"}


@pytest.mark.parametrize("suite, scenario", CASES)
def test_auth_scenario_passes_without_warnings(suite, scenario, tmp_path):
    env = {**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ['PATH']}"}  # Node 22 first
    proc = subprocess.run(
        [
            conformance_suite(suite),
            "client",
            "--command",
            f"{sys.executable} {CLIENT}",
            "--scenario",
            scenario,
            "--timeout",
            "90000",
            "-o",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    checks = [c for f in tmp_path.rglob("checks.json") for c in json.loads(f.read_text())]
    assert checks, f"no checks recorded:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    bad = [c for c in checks if c["status"] not in ("SUCCESS", "INFO")]
    assert not bad, json.dumps(bad, indent=1)[:4000] + proc.stderr[-3000:]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    stdout = "".join(f.read_text() for f in tmp_path.rglob("stdout.txt"))
    stderr = "".join(f.read_text() for f in tmp_path.rglob("stderr.txt"))
    for token_prefix in (
        "test-token",
        "cc-token",
        "test-auth-code",
        "test-client-secret",
        "pre-registered-secret",
        "conformance-test-secret",
    ):
        assert token_prefix not in stdout + stderr, f"{token_prefix} leaked:\n{stdout}\n{stderr}"
    if scenario in REFUSALS:
        assert "Client exited with code 9" in proc.stderr, proc.stderr[-3000:]
        assert REFUSALS[scenario] in stderr, stderr
