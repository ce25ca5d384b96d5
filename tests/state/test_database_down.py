"""The state database stopped mid-run, under a running gateway and under `llmc call`: every call
refuses (llmc call: exit 3 naming the database; through the gateway: a tool error naming it),
never with the password; nothing runs unaudited (the upstream server logs every call it
receives, compared with the audit trail); both recover when the database returns."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.gateway.test_http import INIT, start, stop
from tests.helpers import PEERS, llmc, llmc_process, profile_file
from tests.state.postgres import PASSWORD, PostgresServer

pytestmark = pytest.mark.e2e  # a real PostgreSQL (and HAProxy)


def _messages(lines: list[dict]) -> list[str]:
    return [line["arguments"]["message"] for line in lines]


def test_the_database_stopped_under_the_gateway_and_llmc_call(
    isolated_dirs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls_log = tmp_path / "upstream-calls.jsonl"
    profile = profile_file(
        isolated_dirs / "config",
        f"""[servers.sdk]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(PEERS / "sdk_server.py"))}, "stdio", "--call-log", {json.dumps(str(calls_log))}]
[policy]
confirm_destructive = false
""",
    )
    # The host in front of the gateway is llmc without the database or a profile: only the
    # gateway's own audit trail is under test.
    host_env = {"LLMC_STATE_URL": "", "LLMC_CONFIG_DIR": str(tmp_path / "host"), "LLMC_STATE_DIR": str(tmp_path / "host")}
    server = PostgresServer()  # its own cluster: this test stops it
    try:
        monkeypatch.setenv("LLMC_STATE_URL", server.url(password=True))  # the password in the url: never shown
        database = f"PostgreSQL database 127.0.0.1:{server.port}/postgres"
        assert llmc("state", "migrate").returncode == 0
        gateway = start(profile, process=True)
        done = threading.Event()
        try:

            def cli(message: str) -> subprocess.CompletedProcess[str]:
                return llmc("call", "sdk.echo", f"message={message}")

            def via_gateway(message: str) -> subprocess.CompletedProcess[str]:
                return llmc("call", "--url", gateway.url, "sdk.echo", f"message={message}", env=host_env)

            assert cli("cli-before").returncode == 0
            assert via_gateway("gw-before").returncode == 0
            # A host keeps calling through the gateway while the database goes away and comes back.

            def loop() -> None:
                for i in range(40):
                    if done.is_set():
                        return
                    # a process of its own: llmc() runs in the test's main thread only
                    llmc_process("call", "--url", gateway.url, "sdk.echo", f"message=gw-loop-{i}", env=host_env)
                    # whatever it hears: the audit comparison below judges

            looper = threading.Thread(target=loop)
            looper.start()
            server.stop()

            refused = cli("cli-down")
            assert refused.returncode == 3 and refused.stdout == "", refused.stderr
            assert database in refused.stderr and "not run" in refused.stderr
            assert PASSWORD not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
            batch = "".join(
                json.dumps({"tool": "sdk.echo", "arguments": {"message": f"batch-down-{i}"}}) + "\n" for i in range(3)
            )
            refused_batch = llmc("call", "--batch", "-", stdin=batch)
            assert refused_batch.returncode == 3 and database in refused_batch.stderr + refused_batch.stdout
            assert PASSWORD not in refused_batch.stderr + refused_batch.stdout
            through = via_gateway("gw-down")
            result = json.loads(through.stdout)
            assert through.returncode == 1 and result["isError"] is True, through.stderr
            assert database in result["content"][0]["text"] and "no call was run" in result["content"][0]["text"]
            assert PASSWORD not in through.stdout + through.stderr

            # An initialize-era host cannot start a session the other replicas could not resume.
            status, _headers, body = gateway.request("POST", "/mcp", INIT)
            error = json.loads(body)["error"]["message"]
            assert status == 200 and error.startswith("cannot start a session") and database in error, body
            assert PASSWORD not in body.decode()
            assert json.loads(gateway.request("GET", "/status")[2])["sessions"] == 0

            server.start()
            assert cli("cli-after").returncode == 0
            after = via_gateway("gw-after")
            assert after.returncode == 0, after.stdout + after.stderr
            done.set()
            looper.join(timeout=120)
        except BaseException:
            done.set()
            gateway.proc.kill()  # its outcomes may be waiting for the database: no orderly stop
            raise
        gateway_stderr = stop(gateway)  # exit 0: every outcome written once the database returned
        assert PASSWORD not in gateway_stderr

        upstream = _messages([json.loads(line) for line in calls_log.read_text().splitlines()])
        records = [json.loads(line) for line in llmc("audit", "tail", "-n", "1000").stdout.splitlines()]
        decided = _messages([r for r in records if r["event"] == "decision" and r["decision"] == "allow"])
        ran = _messages([r for r in records if r["event"] == "outcome" and r["outcome"] == "ok"])
        # Nothing unaudited: every call the upstream received had its decision recorded first,
        # and every call recorded as run reached the upstream.
        assert set(upstream) <= set(decided) and sorted(ran) == sorted(upstream), (upstream, decided, ran)
        assert {"cli-before", "gw-before", "cli-after", "gw-after"} <= set(upstream)
        assert not {"cli-down", "gw-down", "batch-down-0", "batch-down-1", "batch-down-2"} & set(upstream)
        assert json.loads(llmc("audit", "verify").stdout)["ok"] is True
    finally:
        server.close()
