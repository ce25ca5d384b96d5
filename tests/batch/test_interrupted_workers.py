"""A batch interrupted (SIGINT, SIGTERM, SIGHUP) between two groups of parallel calls: the main
thread records the interruption and exits while a server's worker thread may still be going to
its next group. Once the interpreter finalizes, a thread pool takes no new work: the worker's
RuntimeError ("cannot schedule new futures after interpreter shutdown") was printed as a thread's
traceback on stderr (seen in 2 of 8 batches of 3,000 calls signalled at random). The worker now
starts no group once the command is interrupted. In process: the real batch worker, pipeline and
SDK test server; the interpreter's finalizing is the one thing stood in for (the pool module's
own flag, as its atexit hook sets it)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers import audit_trail, llmc, sdk_server


def test_an_interrupted_batch_worker_hands_its_pool_no_new_group(isolated_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from concurrent.futures import thread as futures_thread

    from llmc_cli import interrupts, services
    from llmc_cli.config.profiles import load_profile
    from llmc_cli.services.batch import Batch, BatchItem
    from llmc_cli.services.calls import OPEN_CALLS

    path = isolated_dirs / "batch.toml"
    path.write_text(
        f"[servers.sdk]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(sdk_server('sdk_server.py')[1])}]\n"
        'sandbox = "none"\n\n[policy]\nconfirm_destructive = false\n\n[policy.hints."sdk.echo"]\nreadOnly = true\n'
    )
    profile = load_profile(str(path))
    with services.open_catalog(profile) as catalog:
        pipeline = services.open_calls(catalog, profile, command="call --batch")
        items = [BatchItem(i, i, "sdk.echo", {"message": f"m{i}"}) for i in range(6)]
        batch = Batch(pipeline, items, parallel=3)
        batch._decide_all()  # routed, validated and decided: the decisions on disk
        try:
            interrupts._requested.set()  # what the main thread's handler does first
            interrupts._received.append(15)
            monkeypatch.setattr(futures_thread, "_shutdown", True)  # the interpreter finalizes
            batch._run_server(items)  # raised RuntimeError, from the pool's submit, before the fix
            OPEN_CALLS.interrupt_all("terminated (SIGTERM)")  # what the main thread records then
        finally:
            interrupts._requested.clear()
            interrupts._received.clear()
            pipeline.close()
    assert all(batch.done) and all(item.result is None for item in items)  # none ran, none left waiting
    records = audit_trail(isolated_dirs / "state")
    assert [(r["event"], r.get("decision") or r.get("outcome")) for r in records] == [("decision", "allow")] * 6 + [
        ("outcome", "interrupted")
    ] * 6
    verified = llmc("audit", "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
