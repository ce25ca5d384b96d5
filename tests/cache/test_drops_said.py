"""Issue 39, "a dropped entry is said at -v": by every front end that calls tools, not only
`llmc call` (`call --batch`: tests/cache/test_list_changed_at_start.py): `ask` on stderr, the
gateway in its log. The counting server announces notifications/tools/list_changed from its
`announce` tool (to an initialize-era client); the real CLI, the real OpenAI SDK against the fake."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.cache.test_results import write_profile
from tests.fakes.llm import FakeLLM
from tests.fakes.scripts import turn
from tests.helpers import llmc, llmc_executable, profile_file

DROPPED = re.compile(r"cache: dropped \d+ cached result\(s\) of count: it announced notifications/tools/list_changed")


def legacy_era(tmp_path: Path) -> None:
    """Start the server once and remember it as an initialize-era server (it hears list_changed)."""
    assert llmc("call", "count.big", "size=1").returncode == 0
    eras = Path(os.environ["LLMC_STATE_DIR"]) / "servers.json"
    remembered = json.loads(eras.read_text())
    eras.write_text(json.dumps({k: {**v, "era": "legacy", "version": "2025-11-25"} for k, v in remembered.items()}))


def test_ask_says_a_drop_at_verbose(isolated_dirs: Path) -> None:
    servers = write_profile(isolated_dirs).read_text()
    legacy_era(isolated_dirs)

    def script() -> list[Any]:
        return [
            turn("openai", calls=[("c1", "search", {"query": "a"})]),
            turn("openai", calls=[("c2", "announce", {})]),
            turn("openai", calls=[("c3", "search", {"query": "a"})]),
            turn("openai", text="Done."),
        ]

    for verbose, said in (((), False), (("-v",), True)):
        with FakeLLM("openai", script()) as fake:
            profile_file(
                isolated_dirs / "config",
                servers + f'\n[llm]\nprovider = "openai"\nmodel = "m"\nbase_url = "{fake.base_url}"\n',
            )
            proc = llmc(*verbose, "ask", "search twice", env={"OPENAI_API_KEY": "k"})
        assert proc.returncode == 0, proc.stderr
        assert [s["outcome"] for s in proc.json()["steps"]] == ["ok", "ok", "ok"]
        assert bool(DROPPED.search(proc.stderr)) is said, proc.stderr


def rpc(proc: subprocess.Popen[bytes], message: dict[str, Any], seconds: float = 30) -> dict[str, Any] | None:
    """Send one message; for a request, read lines until its response (bounded in time)."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()
    if "id" not in message:
        return None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:
            break
        reply = json.loads(line)
        if reply.get("id") == message["id"]:
            return dict(reply)
    raise AssertionError(f"no reply to {message['method']} within {seconds} s")


def test_the_gateway_logs_a_drop_at_verbose(isolated_dirs: Path) -> None:
    profile = write_profile(isolated_dirs)
    legacy_era(isolated_dirs)
    proc = subprocess.Popen(
        [llmc_executable(), "-v", "serve", "-p", str(profile)],
        bufsize=0,  # unbuffered: a line read ahead into a buffer would be invisible to select()
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ),
    )
    try:
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        assert rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        for n, (tool, arguments) in enumerate((("search", {"query": "a"}), ("announce", {}), ("search", {"query": "a"})), 2):
            reply = rpc(
                proc,
                {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": f"count.{tool}", "arguments": arguments}},
            )
            assert reply is not None and "result" in reply and not reply["result"].get("isError"), reply
    finally:
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.close()  # end of input: the gateway stops
        proc.wait(timeout=60)
        stderr = proc.stderr.read()
        proc.stdout and proc.stdout.close()
        proc.stderr.close()
    log = stderr.decode()
    assert re.search(r"^llmc serve: " + DROPPED.pattern, log, re.M), log
