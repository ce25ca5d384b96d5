"""`llmc serve --workers 2` with a state database: each worker is a replica of its own (its own
lease), a killed worker's sessions are resumed from the database instead of lost, and the calls
of both workers land in one audit chain."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.gateway.test_http import stop
from tests.gateway.test_workers import WORKERS, call, connection_to, open_session, post, reply_of, start, workers_of
from tests.helpers import PEERS, llmc, wait_until

pytestmark = pytest.mark.e2e  # a real PostgreSQL, the gateway's processes

PROFILE = f"""\
[servers.sdk]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(PEERS / "sdk_server.py"))}]

[policy.hints]
"sdk.add" = {{ readOnly = true }}
"""


def test_a_killed_workers_sessions_resume_from_the_database(isolated_dirs: Path, state_url: str, tmp_path: Path) -> None:
    profile = tmp_path / "gw.toml"
    profile.write_text(PROFILE)
    running = start(profile, *WORKERS, process=True)
    try:
        sessions = [open_session(running, 0), open_session(running, 1)]
        for n, (session, worker) in enumerate([(s, w) for s in sessions for w in (0, 1)]):
            conn = connection_to(running, worker)
            response = post(conn, call("sdk.add", n + 2, a=n, b=1), session)
            assert response.status == 200 and reply_of(response)["result"]["structuredContent"] == {"result": n + 1}
            conn.close()
        # A call's outcome is written with the next decision or within a second (audit.Deferred):
        # on disk before the worker is killed (a SIGKILL within that second loses it by design).
        assert wait_until(lambda: json.loads(llmc("audit", "head").stdout)["records"] >= 2 * 4, 30)
        victim = workers_of(running)[0]
        os.kill(victim, signal.SIGKILL)
        assert wait_until(lambda: len(workers_of(running)) == 2 and victim not in workers_of(running), 60)
        for session in sessions:  # the dead worker's session too: resumed from the database
            for worker in (0, 1):
                conn = connection_to(running, worker)
                response = post(conn, call("sdk.add", 20, a=2, b=2), session)
                assert response.status == 200, response.read()
                assert reply_of(response)["result"]["structuredContent"] == {"result": 4}
                conn.close()
    finally:
        stderr = stop(running)
    assert f"(pid {victim}) was killed by SIGKILL; starting it again" in stderr
    verified = llmc("audit", "verify")
    report = json.loads(verified.stdout)
    assert verified.returncode == 0 and report["ok"] is True, verified.stdout
    assert report["records"] >= 2 * 8  # a decision and an outcome for each of the calls above
