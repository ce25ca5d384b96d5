"""A real shell kept alive across llmc invocations: Desktop Commander (npm) held by a session keeper.

Every step is its own `llmc` process; only the keeper (and the Desktop Commander it holds) lives
between them, so a variable exported in one invocation and read back in a later one proves that the
same shell survived. Desktop Commander runs in a hermetic HOME with its telemetry off (config file
and environment) and its feature-flag URL pointed at a closed loopback port.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from tests.helpers import desktop_commander, free_port, llmc, wait_until
from tests.processes import gone

pytestmark = pytest.mark.e2e  # Desktop Commander: an npm server, its processes and shells

# Interactive, so it prints a prompt Desktop Commander recognises as "waiting for input" (no waiting
# for its timeout); 2>&1 so the prompt (stderr) comes after a command's output (stdout), in order.
SHELL = "bash --norc --noprofile -i 2>&1"
STARTED = re.compile(r"Process started with PID (\d+)")
WAIT_MS = 10_000  # what Desktop Commander may wait for a prompt or output, per call
LLMC_TIMEOUT = 60  # what one llmc invocation may take


@pytest.fixture
def dc_env(isolated_dirs: Path):
    """Environment of every llmc command: a HOME of its own, and server `dc` in the default profile."""
    home = isolated_dirs / "home"
    dc_dir = home / ".claude-server-commander"  # where Desktop Commander keeps config and logs
    dc_dir.mkdir(parents=True)
    (dc_dir / "config.json").write_text(
        json.dumps(
            {
                "telemetryEnabled": False,
                "pendingWelcomeOnboarding": False,  # a first run would open a welcome page in a browser
                "welcomeOnboardingEligible": False,
                "defaultShell": shutil.which("bash") or "/bin/bash",
                "allowedDirectories": [],
                "blockedCommands": [],
            }
        )
    )
    env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }
    added = llmc(
        "servers",
        "add",
        "dc",
        "--env",
        "DESKTOP_COMMANDER_DISABLE_TELEMETRY=1",
        "--env",
        f"DC_FLAG_URL=http://127.0.0.1:{free_port()}/flags.json",
        # Not sandboxed: these tests follow the shell's pid from here, and a sandboxed
        # server reports pids of its own namespace (tests/sandbox runs it sandboxed).
        "--sandbox",
        "none",
        "--",
        *desktop_commander(),
        env=env,
        timeout=LLMC_TIMEOUT,
    )
    assert added.returncode == 0, added.stderr
    try:
        yield env
    finally:
        llmc("session", "stop", "--all", env=env, timeout=LLMC_TIMEOUT)


def call(env: dict[str, str], tool: str, *args: str, session: str | None = "ops") -> str:
    """One `llmc call dc.TOOL` in its own process; the text of a successful result."""
    proc = llmc("call", f"dc.{tool}", *args, "--yes", *(["--session", session] if session else []), env=env, timeout=LLMC_TIMEOUT)
    assert proc.returncode == 0, f"{tool}: exit {proc.returncode}: {proc.stderr}"
    result = json.loads(proc.stdout)
    text = "\n".join(c["text"] for c in result["content"] if c.get("type") == "text")
    assert result["isError"] is False, text
    return text


def test_a_shell_survives_across_invocations(dc_env):
    started = llmc("session", "start", "ops", "-s", "dc", "--idle", "5m", env=dc_env, timeout=LLMC_TIMEOUT)
    assert started.returncode == 0, started.stderr
    assert [(s["name"], s["state"]) for s in json.loads(started.stdout)["servers"]] == [("dc", "running")]

    text = call(dc_env, "start_process", f"command={SHELL}", f"timeout_ms={WAIT_MS}")
    match = STARTED.search(text)
    assert match, text
    pid = int(match.group(1))
    assert not gone(pid)

    call(dc_env, "interact_with_process", f"pid={pid}", "input=export LLMC_MARK=42", f"timeout_ms={WAIT_MS}")
    # A later invocation, joining the session through the environment instead of --session.
    text = call(
        {**dc_env, "LLMC_SESSION": "ops"},
        "interact_with_process",
        f"pid={pid}",
        'input=echo "mark=$LLMC_MARK"',
        f"timeout_ms={WAIT_MS}",
        session=None,
    )
    assert "mark=42" in text.splitlines(), text

    text = call(dc_env, "read_process_output", f"pid={pid}", "offset=-20", "timeout_ms=1000")
    assert "mark=42" in text.splitlines(), text
    assert f"PID: {pid}," in call(dc_env, "list_sessions")
    # Without the session, a new Desktop Commander starts and knows nothing of that shell.
    assert f"PID: {pid}," not in call(dc_env, "list_sessions", session=None)

    assert "Successfully initiated termination" in call(dc_env, "force_terminate", f"pid={pid}")
    deadline = time.monotonic() + 15  # SIGINT, which an interactive bash ignores, then SIGKILL after 1s
    while f"PID: {pid}," in call(dc_env, "list_sessions") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert f"PID: {pid}," not in call(dc_env, "list_sessions")
    assert wait_until(lambda: gone(pid), max(deadline - time.monotonic(), 0)), f"the shell {pid} outlived force_terminate"

    stopped = llmc("session", "stop", "ops", env=dc_env, timeout=LLMC_TIMEOUT)
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout)["stopped"] is True

    after = llmc("call", "dc.list_sessions", "--yes", "--session", "ops", env=dc_env, timeout=LLMC_TIMEOUT)
    assert after.returncode == 5, (after.returncode, after.stdout, after.stderr)
    assert after.stdout == ""
    lines = after.stderr.strip().splitlines()
    assert len(lines) == 1 and "ops" in lines[0] and "not running" in lines[0], after.stderr
