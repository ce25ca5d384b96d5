"""Session keepers against real processes: `llmc session start|list|stop`, `call --session`.

Every keeper a test starts is stopped in the fixture's teardown (`session stop --all`), and
killed by pid as a last resort, so a failing test leaves no background process behind. Every
wait is bounded in time.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import llmc, llmc_executable, profile_file, sdk_server, wait_until
from tests.processes import PROC, gone, live_processes

WAIT = 15.0  # upper bound for any process to come or go (wait_until's default too)
TIMEOUT = 60  # upper bound for one llmc command


# -- processes -------------------------------------------------------------------------------------


def children(pid: int) -> list[int]:
    """Live child processes of pid (the servers a keeper started), read from /proc (Linux)."""
    return [p.pid for p in live_processes() if p.ppid == pid]


def keeper_pids(state: Path) -> list[int]:
    """Keepers whose environment points at this test's state directory (the last-resort sweep)."""
    return [
        p.pid
        for p in live_processes()
        if any(b"llmc_cli.keeper" in arg for arg in p.cmdline()) and f"LLMC_STATE_DIR={state}".encode() in p.environ()
    ]


def one_line(text: str) -> str:
    """The single stderr line of a failed command (no traceback, no usage banner)."""
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


# -- the fixture -----------------------------------------------------------------------------------


@dataclass
class Keepers:
    env: dict[str, str]
    state: Path
    pids: set[int] = field(default_factory=set)

    def run(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return llmc(*args, env={**self.env, **(env or {})}, timeout=TIMEOUT)

    def start(self, name: str, *args: str) -> dict[str, Any]:
        proc = self.run("session", "start", name, *args)
        assert proc.returncode == 0, proc.stderr
        status = json.loads(proc.stdout)
        self.pids.add(status["pid"])
        return status

    def call(self, tool: str, *args: str, session: str | None = None) -> subprocess.CompletedProcess[str]:
        return self.run("call", tool, *args, *(["--session", session] if session else []), "--yes")

    def listed(self) -> list[dict[str, Any]]:
        proc = self.run("session", "list")
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["sessions"]

    def sock(self, name: str) -> Path:
        return self.state / "sessions" / f"{name}.sock"


@pytest.fixture
def keepers(isolated_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Keepers]:
    # A short state directory: tmp_path plus a long test name can pass the ~100 bytes a Unix
    # socket path may have, and the command would (rightly) refuse it.
    state = Path(tempfile.mkdtemp(prefix="llmc-ks-", dir="/tmp" if os.path.isdir("/tmp") else None))
    config = isolated_dirs / "config"
    server = sdk_server("sdk_server.py")
    profile_file(config, "".join(f'[servers.{name}]\ncommand = "{server[0]}"\nargs = ["{server[1]}"]\n' for name in ("t", "u")))
    env = {"LLMC_CONFIG_DIR": str(config), "LLMC_STATE_DIR": str(state)}
    for key, value in env.items():
        monkeypatch.setenv(key, value)  # for the tests that attach in-process
    kept = Keepers(env=env, state=state)
    try:
        yield kept
    finally:
        try:
            llmc("session", "stop", "--all", env=env, timeout=TIMEOUT)
        finally:
            for pid in kept.pids | set(keeper_pids(state)):
                if gone(pid):
                    continue
                servers = children(pid)
                try:
                    os.killpg(pid, signal.SIGKILL) if os.getpgid(pid) == pid else os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                for child in servers:  # they leave on EOF, but do not count on it here
                    try:
                        os.kill(child, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            shutil.rmtree(state, ignore_errors=True)


# -- start, list, stop -----------------------------------------------------------------------------


def test_start_list_call_stop(keepers: Keepers) -> None:
    status = keepers.start("work", "-s", "t")
    pid = status["pid"]
    assert status["name"] == "work" and isinstance(pid, int) and not gone(pid)
    assert [(s["name"], s["state"], s["restarts"]) for s in status["servers"]] == [("t", "running", 0)]
    assert status["socket"] == str(keepers.sock("work")) and keepers.sock("work").exists()

    # Whoever reaches the socket runs tools as the user: only the user may.
    keepers_dir = keepers.state / "sessions"
    assert stat.S_IMODE(keepers_dir.stat().st_mode) == 0o700
    assert stat.S_ISSOCK(keepers.sock("work").stat().st_mode)
    assert stat.S_IMODE(keepers.sock("work").stat().st_mode) == 0o600
    assert stat.S_IMODE((keepers_dir / "work.log").stat().st_mode) == 0o600

    listed = keepers.listed()
    assert [(r["name"], r["pid"]) for r in listed] == [("work", pid)]
    assert [s["name"] for s in listed[0]["servers"]] == ["t"]

    proc = keepers.call("t.echo", "message=hello", session="work")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["content"][0]["text"] == "hello"
    servers = children(pid)
    assert servers or not PROC.is_dir(), "the keeper holds the server as its child"

    again = keepers.run("session", "start", "work", "-s", "t")
    assert again.returncode == 2
    assert "already running" in one_line(again.stderr) and f"pid {pid}" in again.stderr
    assert not gone(pid) and keepers.sock("work").exists()

    # Usage errors while it runs: the session's servers are the ones it holds.
    proc = keepers.call("t.echo", "message=x", "--stdio", " ".join(sdk_server("sdk_server.py")), session="work")
    assert proc.returncode == 2 and "--session work" in one_line(proc.stderr)
    proc = keepers.call("u.echo", "message=x", "-s", "u", session="work")
    assert proc.returncode == 2 and "does not hold" in one_line(proc.stderr)
    assert keepers.run("session", "stop").returncode == 2

    stopped = keepers.run("session", "stop", "work")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout) == {"name": "work", "pid": pid, "stopped": True}
    assert wait_until(lambda: gone(pid)), "the keeper outlived session stop"
    assert not keepers.sock("work").exists()
    assert wait_until(lambda: all(gone(p) for p in servers)), "the servers outlived their session"

    missing = keepers.run("session", "stop", "work")
    assert missing.returncode == 5 and "not running" in one_line(missing.stderr)
    assert keepers.listed() == []


def test_bad_session_names_are_usage_errors(keepers: Keepers) -> None:
    for name in ("bad name", "../up", "x" * 65, ".hidden"):
        proc = keepers.run("session", "start", name, "-s", "t")
        assert proc.returncode == 2 and "invalid session name" in one_line(proc.stderr), name
    proc = keepers.call("t.echo", "message=x", session="a/b")
    assert proc.returncode == 2 and "invalid session name" in one_line(proc.stderr)
    assert not list((keepers.state / "sessions").glob("*"))
    assert not keeper_pids(keepers.state)


def test_idle_timeout_stops_the_keeper_even_while_it_is_listed(keepers: Keepers) -> None:
    status = keepers.start("idle", "-s", "t", "--idle", "2s")
    pid, started = status["pid"], time.monotonic()
    assert status["idleTimeout"] == 2.0
    # `session list` asks the keeper for its status: that is no use of the session, so it must
    # neither reset the idle clock nor report it as zero. The clock starts when the session is
    # ready, not while its servers start.
    idle_seen, listed_until = 0.0, 0.0
    while not gone(pid) and time.monotonic() - started < WAIT:
        for row in keepers.listed():
            idle_seen, listed_until = max(idle_seen, row["idleFor"]), time.monotonic() - started
        time.sleep(0.2)
    assert gone(pid), "the keeper did not stop after 2s idle while being listed"
    assert listed_until > 1.0, "the keeper stopped long before 2s idle"
    assert idle_seen >= 0.5, "session list reports no idle time"
    assert wait_until(lambda: not keepers.sock("idle").exists(), timeout=5)
    assert "idle for 2s" in (keepers.state / "sessions" / "idle.log").read_text()
    proc = keepers.call("t.echo", "message=x", session="idle")
    assert proc.returncode == 5 and "not running" in one_line(proc.stderr)


def test_keeper_ignores_modules_in_the_current_directory(keepers: Keepers, tmp_path: Path) -> None:
    """`python -m` puts the current directory first on sys.path: the keeper must not import a
    json.py or selectors.py lying where `session start` runs."""
    for module in ("json", "selectors", "socket"):
        (tmp_path / f"{module}.py").write_text('raise SystemExit("imported from the current directory")\n')
    proc = llmc("session", "start", "here", "-s", "t", cwd=tmp_path, timeout=TIMEOUT, env=keepers.env)
    assert proc.returncode == 0, proc.stderr
    keepers.pids.add(json.loads(proc.stdout)["pid"])
    proc = keepers.call("t.echo", "message=safe", session="here")
    assert proc.returncode == 0 and json.loads(proc.stdout)["content"][0]["text"] == "safe"


# -- stale sockets ---------------------------------------------------------------------------------


def test_killed_keeper_is_detected_and_cleaned(keepers: Keepers) -> None:
    pid = keepers.start("k", "-s", "t")["pid"]
    assert keepers.call("t.echo", "message=x", session="k").returncode == 0
    servers = children(pid)
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: gone(pid))
    assert keepers.sock("k").exists(), "a killed keeper cannot remove its socket"
    assert wait_until(lambda: all(gone(p) for p in servers)), "a killed keeper's servers live on"

    proc = keepers.call("t.echo", "message=x", session="k")
    assert proc.returncode == 5, proc.stderr
    assert "session k is not running" in one_line(proc.stderr)
    assert not keepers.sock("k").exists()

    # A new keeper under the same name; killed again, `session list` finds it stale.
    pid = keepers.start("k", "-s", "t")["pid"]
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: gone(pid))
    proc = keepers.run("session", "list")
    assert proc.returncode == 0 and json.loads(proc.stdout) == {"sessions": [], "errors": []}
    assert "removed stale session k" in proc.stderr
    assert not keepers.sock("k").exists()

    keepers.start("k", "-s", "t")
    proc = keepers.run("call", "t.echo", "message=back", "--yes", env={"LLMC_SESSION": "k"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["content"][0]["text"] == "back"


def test_hand_made_stale_sockets_are_removed(keepers: Keepers) -> None:
    keepers_dir = keepers.state / "sessions"
    keepers_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    for name in ("ghost", "ghost2", "ghost3", "reuse"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.bind(str(keepers.sock(name)))  # bound, never listening, closed: nobody answers
        assert keepers.sock(name).exists()

    proc = keepers.call("t.echo", "message=x", session="ghost")
    assert proc.returncode == 5 and "session ghost is not running" in one_line(proc.stderr)
    assert not keepers.sock("ghost").exists()

    proc = keepers.run("session", "stop", "ghost3")
    assert proc.returncode == 5 and "not running" in one_line(proc.stderr)
    assert not keepers.sock("ghost3").exists()

    status = keepers.start("reuse", "-s", "t")  # a stale socket does not block its name
    assert status["name"] == "reuse"
    proc = keepers.run("session", "list")
    assert proc.returncode == 0
    assert [r["name"] for r in json.loads(proc.stdout)["sessions"]] == ["reuse"]
    assert "removed stale session ghost2" in proc.stderr and "reuse" not in proc.stderr
    assert sorted(p.name for p in keepers_dir.glob("*.sock")) == ["reuse.sock"]


# -- several sessions ------------------------------------------------------------------------------


def test_two_sessions_work_independently(keepers: Keepers) -> None:
    alpha = keepers.start("alpha", "-s", "t")["pid"]
    beta = keepers.start("beta", "-s", "t", "-s", "u")["pid"]
    assert alpha != beta
    assert not set(children(alpha)) & set(children(beta)), "each session holds its own server processes"
    assert [r["name"] for r in keepers.listed()] == ["alpha", "beta"]

    proc = keepers.call("t.add", "a:=2", "b:=3", session="alpha")
    assert proc.returncode == 0 and json.loads(proc.stdout)["structuredContent"] == {"result": 5}
    proc = keepers.call("u.echo", "message=from-beta", session="beta")
    assert proc.returncode == 0 and json.loads(proc.stdout)["content"][0]["text"] == "from-beta"
    proc = keepers.call("u.echo", "message=x", "-s", "u", session="alpha")
    assert proc.returncode == 2

    # A crash in one session is no news to the other.
    assert keepers.call("t.crash", session="alpha").returncode == 5
    proc = keepers.call("t.echo", "message=calm", session="beta")
    assert proc.returncode == 0 and "warnings" not in json.loads(proc.stdout) and "warning" not in proc.stderr

    assert keepers.run("session", "stop", "alpha").returncode == 0
    assert wait_until(lambda: gone(alpha))
    assert not gone(beta)
    proc = keepers.call("t.echo", "message=still-here", session="beta")
    assert proc.returncode == 0 and json.loads(proc.stdout)["content"][0]["text"] == "still-here"
    assert [r["name"] for r in keepers.listed()] == ["beta"]

    gamma = keepers.start("gamma", "-s", "u")["pid"]
    proc = keepers.run("session", "stop", "--all")
    assert proc.returncode == 0, proc.stderr
    assert sorted(json.loads(line)["name"] for line in proc.stdout.splitlines()) == ["beta", "gamma"]
    assert wait_until(lambda: gone(beta) and gone(gamma))
    assert not list((keepers.state / "sessions").glob("*.sock"))
    proc = keepers.run("session", "stop", "--all")
    assert proc.returncode == 0 and proc.stdout.strip() == ""
    proc = keepers.run("session", "stop", "alpha")
    assert proc.returncode == 5 and "not running" in one_line(proc.stderr)


# -- servers inside a session ----------------------------------------------------------------------


def test_crashed_server_is_restarted_with_a_warning(keepers: Keepers) -> None:
    keepers.start("crashy", "-s", "t")
    proc = keepers.call("t.crash", session="crashy")
    assert proc.returncode == 5, proc.stderr

    proc = keepers.call("t.echo", "message=after", session="crashy")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["content"][0]["text"] == "after"
    assert len(out["warnings"]) == 1 and "restarted" in out["warnings"][0] and "crashy" in out["warnings"][0]
    assert f"llmc: warning: {out['warnings'][0]}" in proc.stderr.splitlines()

    proc = keepers.call("t.echo", "message=quiet", session="crashy")
    assert proc.returncode == 0 and "warnings" not in json.loads(proc.stdout) and "warning" not in proc.stderr
    [row] = keepers.listed()
    assert [(s["name"], s["state"], s["restarts"]) for s in row["servers"]] == [("t", "running", 1)]


def test_concurrent_callers_get_their_own_answers(keepers: Keepers) -> None:
    keepers.start("busy", "-s", "t")
    env = {**os.environ, **keepers.env}
    jobs: dict[str, subprocess.Popen[str]] = {}
    for i in range(4):
        seconds = f"0.{5 + i}"
        jobs[f"slept {seconds}"] = subprocess.Popen(
            [llmc_executable(), "call", "t.slow", f"seconds:={seconds}", "--session", "busy", "--yes"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        jobs[f"message-{i}"] = subprocess.Popen(
            [llmc_executable(), "call", "t.echo", f"message=message-{i}", "--session", "busy", "--yes"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
        )
    try:
        outcomes = {expected: (job.wait(timeout=TIMEOUT), *job.communicate(timeout=TIMEOUT)) for expected, job in jobs.items()}
    finally:
        for job in jobs.values():
            if job.poll() is None:
                job.kill()
                job.wait(timeout=10)
    for expected, (code, stdout, stderr) in outcomes.items():
        assert code == 0, (expected, stderr)
        assert "Traceback" not in stderr
        assert json.loads(stdout)["content"][0]["text"] == expected


def test_ids_and_progress_tokens_are_remapped_per_caller(keepers: Keepers) -> None:
    """Two attached callers both number their requests from 1 and use them as progress tokens:
    each must get its own reply and only its own progress."""
    from llmc_cli.keeper.transport import attach
    from llmc_cli.mcp.hooks import ClientHooks

    path = keepers.start("prog", "-s", "t")["socket"]
    steps = {0: 5, 1: 8}  # slow reports progress every tenth of a second
    progress: dict[int, list[dict[str, Any]]] = {0: [], 1: []}
    results: dict[int, Any] = {}
    barrier = threading.Barrier(2, timeout=WAIT)

    def caller(i: int) -> None:
        try:
            session = attach(path, "prog", "t", timeout=30, hooks=ClientHooks(on_progress=progress[i].append))
            try:
                barrier.wait()
                results[i] = session.call_tool("slow", {"seconds": steps[i] / 10})
            finally:
                session.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            results[i] = exc

    threads = [threading.Thread(target=caller, args=(i,)) for i in steps]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=TIMEOUT)
    assert not any(thread.is_alive() for thread in threads)
    for i, count in steps.items():
        assert not isinstance(results[i], BaseException), results[i]
        assert results[i]["content"][0]["text"] == f"slept {count / 10}"
        assert {p["total"] for p in progress[i]} == {count}, progress[i]
        assert len(progress[i]) == count
        assert len({p["progressToken"] for p in progress[i]}) == 1


def test_a_caller_attached_across_a_restart_is_told_not_rerouted(keepers: Keepers) -> None:
    """A long-lived caller (a batch, say) holds handles of the server it attached to: when that
    server dies and another caller's attach restarts it, the first caller's connection ends with
    the reason, instead of its next request silently reaching a server that knows nothing."""
    from llmc_cli.errors import ConnectionFailed
    from llmc_cli.keeper.transport import attach

    path = keepers.start("long", "-s", "t")["socket"]
    session = attach(path, "long", "t", timeout=30)
    try:
        assert session.call_tool("remember", {"key": "k", "value": "v"})["isError"] is False
        assert keepers.call("t.crash", session="long").returncode == 5
        restarted = keepers.call("t.echo", "message=after", session="long")
        assert restarted.returncode == 0 and "warning" in restarted.stderr
        with pytest.raises(ConnectionFailed) as caught:
            session.call_tool("recall", {"key": "k"})
        assert "restarted" in caught.value.message and "state the server kept" in caught.value.message
    finally:
        session.close()


def test_server_state_lives_across_invocations_and_batches(keepers: Keepers) -> None:
    keepers.start("state", "-s", "t")
    assert keepers.call("t.remember", "key=colour", "value=teal", session="state").returncode == 0
    proc = keepers.call("t.recall", "key=colour", session="state")
    assert proc.returncode == 0 and json.loads(proc.stdout)["content"][0]["text"] == "teal"
    # Without the session, a fresh server knows nothing.
    assert keepers.call("t.recall", "key=colour").returncode == 1
    # A batch through the session: one connection to the same server.
    lines = [
        {"id": 1, "tool": "t.remember", "arguments": {"key": "k", "value": "v"}},
        {"id": 2, "tool": "t.recall", "arguments": {"key": "colour"}},
    ]
    proc = llmc(
        "call",
        "--batch",
        "-",
        "--yes",
        "--session",
        "state",
        env=keepers.env,
        timeout=TIMEOUT,
        stdin="".join(json.dumps(line) + "\n" for line in lines),
    )
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(line)["content"][0]["text"] for line in proc.stdout.splitlines()] == ["remembered k", "teal"]


def test_an_explicit_stdio_server_beats_llmc_session_from_the_shell(keepers: Keepers) -> None:
    server = " ".join(sdk_server("sdk_server.py"))
    proc = keepers.run("call", "echo", "message=adhoc", "--yes", "--text", "--stdio", server, env={"LLMC_SESSION": "not-running"})
    assert proc.returncode == 0 and proc.stdout.strip() == "adhoc", proc.stderr
    proc = keepers.run("call", "echo", "message=x", "--yes", "--session", "not-running", "--stdio", server)
    assert proc.returncode == 2 and "drop --stdio/--url" in one_line(proc.stderr)
