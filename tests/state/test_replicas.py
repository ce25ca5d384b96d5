"""deploy/ for real, without docker: PostgreSQL, two gateway replicas and HAProxy started with
deploy/haproxy.cfg (its addresses from the environment). A host's calls spread over both
replicas all succeed, into one audit chain; an initialize-era host whose replica is killed goes
on with its session on the other (resumed from the database), or, without the database, is told
its session is gone."""

from __future__ import annotations

import bisect
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import psycopg
import pytest

from tests.audit.test_audit import write_profile
from tests.gateway.test_http import INIT, Gateway, sdk_host, start, stop
from tests.gateway.test_stdio import run
from tests.helpers import free_port, llmc, llmc_executable, llmc_process
from tests.schemas import check_output

pytestmark = pytest.mark.e2e  # a real PostgreSQL (and HAProxy)

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


@contextmanager
def deployment(profile: Path) -> Iterator[tuple[Gateway, list[Gateway]]]:
    """Two replicas of `llmc serve -p PROFILE --http` and HAProxy with deploy/haproxy.cfg in front;
    the replicas share state when LLMC_STATE_URL is set."""
    haproxy = shutil.which("haproxy") or ("/usr/sbin/haproxy" if os.path.exists("/usr/sbin/haproxy") else None)
    if haproxy is None:
        pytest.skip("HAProxy is not installed (scripts/test.sh installs it with apt-get when run as root)")
    replicas = [start(profile, process=True), start(profile, process=True)]
    port = free_port()
    env = {
        **os.environ,
        "LLMC_LB_ADDR": f"127.0.0.1:{port}",
        "LLMC_GW1": f"127.0.0.1:{replicas[0].port}",
        "LLMC_GW2": f"127.0.0.1:{replicas[1].port}",
    }
    proc = subprocess.Popen(
        [haproxy, "-db", "-f", str(DEPLOY / "haproxy.cfg")], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
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


@pytest.fixture
def balancer(isolated_dirs: Path, state_url: str) -> Iterator[tuple[Gateway, list[Gateway]]]:
    write_profile(isolated_dirs)
    with deployment(isolated_dirs / "config" / "profiles" / "default.toml") as running:
        yield running


def test_a_hosts_calls_spread_over_both_replicas_all_succeed(balancer: tuple[Gateway, list[Gateway]]) -> None:
    front, replicas = balancer
    batch = "".join(json.dumps({"tool": "sdk.add", "arguments": {"a": i, "b": 1}}) + "\n" for i in range(10))
    proc = llmc("call", "--url", front.url, "--batch", "-", stdin=batch)
    assert proc.returncode == 0, proc.stderr
    results = [json.loads(line)["structuredContent"]["result"] for line in proc.stdout.splitlines()]
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


def _sessions(replica: Gateway) -> int:
    return int(json.loads(replica.request("GET", "/status")[2])["sessions"])


@pytest.mark.parametrize(
    "shared", [pytest.param(True, id="resumed from the database"), pytest.param(False, id="pinned only: state lost")]
)
def test_an_initialize_era_host_whose_replica_is_killed(
    isolated_dirs: Path, state_url: str, monkeypatch: pytest.MonkeyPatch, shared: bool
) -> None:
    from mcp.shared.exceptions import MCPError

    if not shared:
        monkeypatch.delenv("LLMC_STATE_URL")
    write_profile(isolated_dirs)
    with deployment(isolated_dirs / "config" / "profiles" / "default.toml") as (front, replicas):

        async def work() -> None:
            async with sdk_host(front.url, "legacy") as client:
                assert client.session.protocol_version == "2025-11-25"
                for i in range(4):  # pinned: every request of the session reaches one replica
                    added = await client.call_tool("sdk.add", {"a": i, "b": 1})
                    assert added.structured_content == {"result": i + 1}
                holders = [r for r in replicas if _sessions(r) == 1]
                assert len(holders) == 1 and sum(_sessions(r) for r in replicas) == 1
                holders[0].proc.kill()
                holders[0].proc.wait(timeout=30)
                survivor = next(r for r in replicas if r is not holders[0])
                if shared:
                    added = await client.call_tool("sdk.add", {"a": 41, "b": 1})
                    assert added.structured_content == {"result": 42}
                    assert _sessions(survivor) == 1  # the same session, resumed there
                else:
                    with pytest.raises(MCPError, match="server state was lost"):  # the host is told why
                        await client.call_tool("sdk.add", {"a": 41, "b": 1})

        run(work)
        # What the host hears at the HTTP level, without an SDK in between: 404 and why.
        status, _, body = front.request(
            "POST",
            "/mcp",
            {"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
            {"Mcp-Session-Id": "a-session-no-replica-knows-" + "x" * 20},
        )
        assert status == 404 and "server state was lost" in json.loads(body)["error"]["message"]
    if shared:
        # The resumed session kept the host's handshake: the call is recorded under its name and version.
        records = [json.loads(line) for line in llmc("audit", "tail", "-n", "100").stdout.splitlines()]
        resumed = [r for r in records if r["event"] == "outcome" and r["arguments"] == {"a": 41, "b": 1}]
        assert [(r["outcome"], r["client"]["name"], r["client"]["protocolVersion"]) for r in resumed] == [
            ("ok", "http-host", "2025-11-25")
        ]


# 80 batched calls through HAProxy and 20 `llmc call` processes (each starting the SDK server): 49 s
# at load 3, past pytest's 120 s (pytest-timeout killed it) with three CPU burners at load 10, as
# on the CI runner (four workers on two cores). The assertions allow a run longer than the
# window; eight minutes bounds the run itself.
@pytest.mark.timeout(480)
def test_a_rate_limit_holds_across_two_replicas_and_two_call_loops(isolated_dirs: Path, state_url: str, tmp_path: Path) -> None:
    """calls_per_minute = 60, counted in the database, while two hosts send batches through
    HAProxy to both replicas and two loops of `llmc call` run beside them: never more than 60
    calls in a minute (exactly 60 when the run fits in the window, as it does on a quiet
    machine); the gateway refuses the rest as a tool error naming the limit, `llmc call` with
    exit 4."""
    write_profile(isolated_dirs)
    profile = isolated_dirs / "config" / "profiles" / "default.toml"
    profile.write_text(profile.read_text() + "calls_per_minute = 60\n")
    # The hosts are llmc without a profile or the database: only the replicas count their calls.
    host_env = {
        "LLMC_STATE_URL": "",
        "LLMC_CONFIG_DIR": str(tmp_path / "host-config"),
        "LLMC_STATE_DIR": str(tmp_path / "host-state"),
    }
    with deployment(profile) as (front, replicas):
        batch = "".join(json.dumps({"tool": "sdk.echo", "arguments": {"message": f"gw-{i}"}}) + "\n" for i in range(40))
        hosts = [
            subprocess.Popen(
                [llmc_executable(), "call", "--url", front.url, "--batch", "-"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, **host_env},
            )
            for _ in range(2)
        ]

        def loop(n: int) -> list[subprocess.CompletedProcess[str]]:
            return [llmc_process("call", "sdk.echo", f"message=loop{n}-{i}") for i in range(10)]  # two at once

        with ThreadPoolExecutor(2) as pool:
            loops = list(pool.map(loop, range(2)))
        outputs = [h.communicate(batch, timeout=300)[0] for h in hosts]
        pids = {r.proc.pid for r in replicas}

    for out in outputs:
        check_output(["call", "--batch", "-"], out)
    lines = [json.loads(line) for out in outputs for line in out.splitlines()]
    assert len(lines) == 80
    gateway_ran = [line for line in lines if line.get("isError") is False]
    gateway_refused = [
        line
        for line in lines
        if line.get("isError") is True
        and "rate limit: profile limit of 60 calls per minute reached" in line["content"][0]["text"]
    ]
    calls = [proc for runs in loops for proc in runs]
    loop_ran = [p for p in calls if p.returncode == 0]
    loop_refused = [p for p in calls if p.returncode == 4 and "rate limit" in p.stderr]
    assert len(gateway_ran) + len(gateway_refused) == 80 and len(loop_ran) + len(loop_refused) == 20, (
        lines[:2],
        [(p.returncode, p.stderr) for p in calls][:2],
    )
    ran = len(gateway_ran) + len(loop_ran)
    records = [json.loads(line) for line in llmc("audit", "tail", "-n", "1000").stdout.splitlines()]
    outcomes = [r["outcome"] for r in records if r["event"] == "outcome"]
    assert outcomes.count("ok") == ran and outcomes.count("denied") == 100 - ran
    # The window slides: on a slow machine the run may outlast the minute, and then calls whose
    # predecessors left the window may run. What must hold: never more than 60 calls in a minute
    # (judged by the outcomes' times, less a margin for the time between counting and recording),
    # at least 60 ran, and exactly 60 when the whole run fitted inside the window.
    ran_at = sorted(_seconds(r["time"]) for r in records if r["event"] == "outcome" and r["outcome"] == "ok")
    assert ran >= 60 and all(bisect.bisect_right(ran_at, t + 58) - i <= 60 for i, t in enumerate(ran_at))
    every = [_seconds(r["time"]) for r in records]
    if max(every) - min(every) < 58:
        assert ran == 60
        with psycopg.connect(state_url) as conn:
            assert conn.execute("SELECT count(*) FROM llmc_rate").fetchone() == (60,)
    gateway_outcomes = [r for r in records if r["event"] == "outcome" and r["pid"] in pids]
    assert {r["pid"] for r in gateway_outcomes} == pids and len(gateway_outcomes) == 80  # both replicas counted
    assert json.loads(llmc("audit", "verify").stdout)["ok"] is True


def test_a_session_resumes_only_for_its_principal_and_the_database_keeps_no_session_id(
    isolated_dirs: Path, state_url: str
) -> None:
    write_profile(isolated_dirs)
    profile = isolated_dirs / "config" / "profiles" / "default.toml"
    # a gateway with principals starts no unsandboxed stdio server
    profile.write_text(profile.read_text().replace("\n[policy]", '\nsandbox = "bwrap"\n[policy]', 1))
    tokens = [json.loads(llmc("serve", "-p", str(profile), "token", "create", name).stdout)["token"] for name in ("ops", "ci")]
    ops, ci = ({"Authorization": f"Bearer {token}"} for token in tokens)
    replicas = [start(profile, process=True), start(profile, process=True)]
    try:
        session = replicas[0].request("POST", "/mcp", INIT, ops)[1]["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        # Another principal cannot ride on it, on the replica that did not open it either.
        assert replicas[1].request("POST", "/mcp", listing, {**ci, "Mcp-Session-Id": session})[0] == 404
        status, _, body = replicas[1].request("POST", "/mcp", listing, {**ops, "Mcp-Session-Id": session})
        assert status == 200 and "sdk.add" in {t["name"] for t in json.loads(body)["result"]["tools"]}
        with psycopg.connect(state_url) as conn:
            rows = conn.execute("SELECT id_sha256, record::text FROM llmc_host_session").fetchall()
        assert len(rows) == 1 and session not in json.dumps(rows)
        assert json.loads(rows[0][1])["principal"] == "ops"
        # The host's DELETE, on either replica, ends it for every replica that has not seen it yet.
        assert replicas[1].request("DELETE", "/mcp", None, {**ops, "Mcp-Session-Id": session})[0] == 200
        with psycopg.connect(state_url) as conn:
            assert conn.execute("SELECT count(*) FROM llmc_host_session").fetchone() == (0,)
    finally:
        for replica in replicas:
            stop(replica)


def _seconds(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
