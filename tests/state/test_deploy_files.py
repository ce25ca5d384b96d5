"""deploy/ says what the replica tests run: the compose file and the systemd unit start the
gateway, migrate and HAProxy with the same commands, the same haproxy.cfg and the same address
variables as tests/state/test_replicas.py; the unit passes `systemd-analyze verify`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import llmc_executable

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
PROFILE = "/etc/llmc/gateway.toml"
ADDRESS_VARS = {"LLMC_LB_ADDR", "LLMC_GW1", "LLMC_GW2"}  # what test_replicas.deployment() sets


def _compose_commands() -> dict[str, list[str]]:
    """service -> its command (written as JSON arrays in compose.yaml)."""
    commands, service = {}, None
    for line in (DEPLOY / "compose.yaml").read_text().splitlines():
        if re.match(r"^  [a-z0-9]+:", line):
            service = line.strip().split(":")[0]
        elif line.strip().startswith("command:"):
            commands[str(service)] = json.loads(line.split(":", 1)[1])
    return commands


def test_haproxy_cfg_takes_the_addresses_the_tests_and_compose_give_it() -> None:
    used = set(re.findall(r"\$\{(\w+)\}", (DEPLOY / "haproxy.cfg").read_text()))
    assert used == ADDRESS_VARS
    compose = (DEPLOY / "compose.yaml").read_text()
    assert all(f"      {name}: " in compose for name in ADDRESS_VARS)
    assert '"./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro"' in compose  # this very file


def test_compose_runs_the_commands_the_tests_run() -> None:
    commands = _compose_commands()
    assert commands["migrate"] == ["llmc", "-p", PROFILE, "state", "migrate"]
    compose = (DEPLOY / "compose.yaml").read_text()
    for n in (1, 2):  # `llmc serve -p PROFILE --http ADDR`, as tests/gateway/test_http.py start() runs it
        argv = commands[f"gw{n}"]
        assert argv[:5] == ["llmc", "serve", "-p", PROFILE, "--http"] and len(argv) == 6
        port = argv[5].rsplit(":", 1)[1]
        assert f"      LLMC_GW{n}: gw{n}:{port}\n" in compose  # HAProxy sends replica n to its port


def test_the_systemd_unit_runs_the_same_commands_and_verifies(tmp_path: Path) -> None:
    unit = (DEPLOY / "llmc-gateway@.service").read_text()
    assert f"ExecStartPre=/usr/local/bin/llmc -p {PROFILE} state migrate\n" in unit
    assert f"""ExecStart=/bin/sh -c 'exec /usr/local/bin/llmc serve -p {PROFILE} --http "$$LLMC_GW%i"'\n""" in unit
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    # verify checks that executables exist: point the unit at the llmc under test.
    local = tmp_path / "llmc-gateway@.service"
    local.write_text(unit.replace("/usr/local/bin/llmc", llmc_executable()))
    proc = subprocess.run(
        [analyze, "verify", str(tmp_path / "llmc-gateway@1.service")], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and proc.stdout + proc.stderr == "", proc.stdout + proc.stderr


def test_balancers_check_readiness_and_supervisors_liveness() -> None:
    """HAProxy and Kubernetes take a replica out on /readyz (503 without its database: see
    test_replica_lifecycle), Kubernetes restarts one on /healthz; every probe names localhost,
    the only Host the gateway answers without allowed_hosts."""
    cfg = (DEPLOY / "haproxy.cfg").read_text()
    assert "http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host localhost\n" in cfg and "/healthz" not in "".join(
        line for line in cfg.splitlines() if not line.lstrip().startswith("#")
    )
    k8s = (DEPLOY / "k8s.yaml").read_text()
    probes = re.findall(
        r"(\w+Probe):\n\s+httpGet: \{path: (/\w+), port: mcp, httpHeaders: "
        r"\[\{name: Host, value: localhost\}\]\}",
        k8s,
    )
    assert probes == [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")]
    commands = [json.loads(line.split(":", 1)[1]) for line in k8s.splitlines() if line.strip().startswith("command:")]
    assert commands == [["llmc", "-p", PROFILE, "state", "migrate"], ["llmc", "serve", "-p", PROFILE, "--http", "0.0.0.0:8801"]]
    assert "containerPort: 8801, name: mcp" in k8s
