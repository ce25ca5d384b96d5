"""deploy/ for real, without docker: PostgreSQL, two gateway replicas and HAProxy started with
deploy/haproxy.cfg (its addresses from the environment). A host's calls spread over both
replicas all succeed, into one audit chain."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.audit.test_audit import write_profile
from tests.gateway.test_http import Gateway, start, stop
from tests.helpers import free_port, llmc

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


@pytest.fixture
def balancer(isolated_dirs: Path, state_url: str) -> Iterator[tuple[Gateway, list[Gateway]]]:
    haproxy = shutil.which("haproxy") or ("/usr/sbin/haproxy" if os.path.exists("/usr/sbin/haproxy") else None)
    if haproxy is None:
        pytest.skip("HAProxy is not installed (scripts/test.sh installs it with apt-get when run as root)")
    write_profile(isolated_dirs)
    profile = isolated_dirs / "config" / "profiles" / "default.toml"
    replicas = [start(profile), start(profile)]
    port = free_port()
    env = {**os.environ, "LLMC_LB_ADDR": f"127.0.0.1:{port}",
           "LLMC_GW1": f"127.0.0.1:{replicas[0].port}", "LLMC_GW2": f"127.0.0.1:{replicas[1].port}"}
    proc = subprocess.Popen([haproxy, "-db", "-f", str(DEPLOY / "haproxy.cfg")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    front = Gateway(port, proc)  # type: ignore[arg-type]
    try:
        for _ in range(240):  # up to a minute on a loaded machine
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            try:
                if front.request("GET", "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.25)
        yield front, replicas
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
        for replica in replicas:
            if replica.proc.poll() is None:
                stop(replica)


def test_a_hosts_calls_spread_over_both_replicas_all_succeed(balancer: tuple[Gateway, list[Gateway]]) -> None:
    front, replicas = balancer
    batch = "".join(json.dumps({"tool": "sdk.add", "arguments": {"a": i, "b": 1}}) + "\n" for i in range(10))
    proc = llmc("call", "--url", front.url, "--batch", "-", stdin=batch)
    assert proc.returncode == 0, proc.stderr
    results = [json.loads(line)["result"]["structuredContent"]["result"] for line in proc.stdout.splitlines()]
    assert results == [i + 1 for i in range(10)]
    # The host (llmc itself, with the same LLMC_STATE_URL) and the replicas write to one chain:
    # 10 outcomes each side; the replicas' reach the database within a second.
    for _ in range(50):
        records = [json.loads(line) for line in llmc("audit", "tail", "-n", "1000").stdout.splitlines()]
        if sum(r["event"] == "outcome" for r in records) >= 20:
            break
        time.sleep(0.1)
    pids = {g.proc.pid for g in replicas}
    gateway_records = [r for r in records if r["pid"] in pids]
    assert {r["pid"] for r in gateway_records} == pids  # both replicas ran calls
    assert [r["outcome"] for r in gateway_records if r["event"] == "outcome"] == ["ok"] * 10, gateway_records
    report = json.loads(llmc("audit", "verify").stdout)
    assert report["ok"] is True and report["records"] == len(records)
