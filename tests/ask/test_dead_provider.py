"""Issue 39, "every server starts before the first model turn": `ask` against a base URL that
refuses connections ends in the time of its (retried) request, not once a slow server started,
and the server it began is stopped. The real CLI, the SDK test server behind a slow start."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from tests.helpers import free_port, llmc, profile_file, sdk_server

SLOW = 8.0  # seconds the server sleeps before it reads initialize


def slow_server(pid_file: Path, ready_file: Path) -> str:
    """A [servers.slow] table: the SDK test server, started after SLOW seconds (pid written first)."""
    script = (
        "import os, runpy, sys, time; "
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep({SLOW}); "
        f"open({str(ready_file)!r}, 'w').write('up'); "
        f"sys.argv = [{sdk_server('sdk_server.py')[1]!r}]; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    return f'[servers.slow]\ncommand = {json.dumps(sys.executable)}\nargs = ["-c", {json.dumps(script)}]\n'


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_refused_base_url_ends_ask_before_a_slow_server_started(isolated_dirs: Path) -> None:
    pid_file, ready_file = isolated_dirs / "server.pid", isolated_dirs / "server.ready"
    base_url = f"http://127.0.0.1:{free_port()}/v1"
    profile_file(
        isolated_dirs / "config",
        slow_server(pid_file, ready_file) + f'\n[llm]\nprovider = "openai"\nmodel = "m"\nbase_url = "{base_url}"\n',
    )
    proc = llmc("ask", "hi", env={"OPENAI_API_KEY": "k"})
    assert proc.returncode == 8, proc.stderr
    assert not ready_file.exists(), "ask waited for the server's start-up"
    assert "connection to http://127.0.0.1:" in proc.stderr and "Connection refused" in proc.stderr, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    # the server it began is stopped once its start-up ends (nobody is left to use it)
    deadline = time.monotonic() + SLOW + 20
    while pid_file.exists() and alive(int(pid_file.read_text() or 0)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pid_file.exists() and not alive(int(pid_file.read_text())), "the slow server was left running"
