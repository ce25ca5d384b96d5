"""The official MCP conformance suite's server scenarios, from both suites (0.1.x up to 2025-11-25
and the 2026-07-28 one), run twice: against the conformance target (tests/peers/conformance_target.py,
an `mcp` SDK server over Streamable HTTP) directly, and against `llmc serve --http` fronting the
same target over stdio. Every scenario the target passes directly must pass through the gateway,
and dns-rebinding-protection must pass (the gateway's own Origin/Host checks).

The gateway's profile presents the target's names bare (`[serve] bare_names`: the suite calls
tools by fixed names) and needs no confirmation (`confirm_destructive = false`: the suite's
client would answer the gateway's own question with its scripted elicitation answer)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway.test_http import start, stop
from tests.helpers import NODE_BIN, PEERS, conformance_suite, free_port, wait_listening

pytestmark = pytest.mark.e2e  # the official conformance suites: Node processes

# suite -> the scenarios the target must pass directly (so a broken target cannot hide a broken
# gateway behind "nothing passed either way"); the rest are listed in the README with the reason
SUITES = {
    "2025-11-25": {
        "server-initialize",
        "logging-set-level",
        "ping",
        "completion-complete",
        "tools-list",
        "tools-call-simple-text",
        "tools-call-image",
        "tools-call-audio",
        "tools-call-embedded-resource",
        "tools-call-mixed-content",
        "tools-call-with-logging",
        "tools-call-error",
        "tools-call-with-progress",
        "tools-call-sampling",
        "tools-call-elicitation",
        "json-schema-2020-12",
        "elicitation-sep1034-defaults",
        "server-sse-polling",
        "server-sse-multiple-streams",
        "elicitation-sep1330-enums",
        "resources-list",
        "resources-read-text",
        "resources-read-binary",
        "resources-templates-read",
        "resources-subscribe",
        "resources-unsubscribe",
        "prompts-list",
        "prompts-get-simple",
        "prompts-get-with-args",
        "prompts-get-embedded-resource",
        "prompts-get-with-image",
        "dns-rebinding-protection",
    },
    "2026-07-28": {
        "completion-complete",
        "tools-list",
        "tools-call-simple-text",
        "tools-call-image",
        "tools-call-audio",
        "tools-call-embedded-resource",
        "tools-call-mixed-content",
        "tools-call-error",
        "tools-call-with-progress",
        "server-sse-multiple-streams",
        "resources-list",
        "resources-read-text",
        "resources-read-binary",
        "resources-templates-read",
        "sep-2164-resource-not-found",
        "prompts-list",
        "prompts-get-simple",
        "prompts-get-with-args",
        "prompts-get-embedded-resource",
        "prompts-get-with-image",
        "dns-rebinding-protection",
        "caching",
        "http-header-validation",
        "input-required-result-missing-input-response",
        "input-required-result-unsupported-methods",
        "input-required-result-ignore-extra-params",
        "input-required-result-validate-input",
    },
}
# The 2026 package's scenarios for 2025-11-25: the 0.1.x ones and server-session-lifecycle
SUITES["2026-package/2025-11-25"] = SUITES["2025-11-25"] | {"server-session-lifecycle"}
RESULT_DIR = re.compile(r"^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$")

# The target speaks 2026-07-28 to the gateway, where subscriptions are subscriptions/listen, which
# llmc's client does not speak upstream yet (resources/subscribe and a host's subscriptions/listen
# are relayed to initialize-era upstreams: tests/gateway/test_passthrough.py)
NOT_YET_THROUGH_GATEWAY = {"resources-subscribe", "resources-unsubscribe"}

PROFILE = """\
[servers.target]
command = {python}
args = [{target}]

[serve]
bare_names = true

[policy]
confirm_destructive = false
"""


def run_suite(suite: str, url: str, out: Path) -> dict[str, list[dict[str, object]]]:
    """Every server scenario of a suite: scenario -> its checks. `suite` is a spec version, run by
    the package for it, or "2026-package/VERSION": the 2026 package testing an older version."""
    env = {**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ['PATH']}"}  # Node 22 first
    package, _, spec = suite.rpartition("/")
    entry = conformance_suite("2026-07-28" if package else spec)
    proc = subprocess.run(
        [entry, "server", "--url", url, "--suite", "all", "--spec-version", spec, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    results = {}
    for checks in out.glob("*/checks.json"):
        match = RESULT_DIR.match(checks.parent.name)
        assert match, checks.parent.name
        results[match.group(1)] = json.loads(checks.read_text())
    assert results, f"no scenario ran:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}"
    return results


def passed(checks: list[dict[str, object]]) -> bool:
    return bool(checks) and not any(c["status"] == "FAILURE" for c in checks)


@pytest.fixture(scope="module")
def target() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(PEERS / "conformance_target.py"), "streamable-http", "--port", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    wait_listening(proc, port, "the conformance target")
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("gateway")
    profile = base / "conformance.toml"
    profile.write_text(PROFILE.format(python=json.dumps(sys.executable), target=json.dumps(str(PEERS / "conformance_target.py"))))
    running = start(profile, env={"LLMC_STATE_DIR": str(base / "state"), "LLMC_CONFIG_DIR": str(base / "config")})
    yield running.url
    stop(running)


@pytest.mark.parametrize("spec", sorted(SUITES))  # the suite: a spec version, or "2026-package/VERSION"
def test_every_scenario_the_target_passes_passes_through_the_gateway(
    spec: str, target: str, gateway: str, tmp_path: Path
) -> None:
    direct = run_suite(spec, target, tmp_path / "direct")
    through = run_suite(spec, gateway, tmp_path / "gateway")
    direct_passes = {name for name, checks in direct.items() if passed(checks)}
    assert SUITES[spec] <= direct_passes, f"the target fails {sorted(SUITES[spec] - direct_passes)}"
    lost = {
        name: [c for c in through.get(name, []) if c["status"] == "FAILURE"]
        for name in sorted(direct_passes - NOT_YET_THROUGH_GATEWAY)
        if not passed(through.get(name, []))
    }
    assert not lost, json.dumps(lost, indent=1)[:6000]
    assert passed(through["dns-rebinding-protection"])
    if spec.endswith("2025-11-25"):  # resumable session streams: a priming event with an id and a retry field
        assert all(c["status"] in ("SUCCESS", "INFO") for c in through["server-sse-polling"]), through["server-sse-polling"]
