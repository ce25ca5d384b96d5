"""Denial of service from inside the workspace server: a catastrophic regular expression, a
background child that would outlive the server, a shell that forks or allocates without limit."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.helpers import TO_THREAD, llmc, wait_until
from tests.processes import live_processes
from tests.server.conftest import COMMANDS, SANDBOXES

# Patterns that backtrack exponentially on a line of 40 "a"s (one line is enough).
CATASTROPHIC = [r"(.+)+\x00", r"(a+)+$b", r"(a|aa)+c", r"^(a|a?)+$x", r"(\w*)*\d"]
WORKER_MARK = b"PR_SET_PDEATHSIG"  # in the regex worker's command line


def _workers() -> list[int]:
    """Regex worker processes (any parent) still running."""
    return [p.pid for p in live_processes() if any(WORKER_MARK in arg for arg in p.cmdline())]


def _gone(pids: list[int], seconds: float = 5.0) -> bool:
    return wait_until(lambda: not set(pids) & set(_workers()), seconds)


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_catastrophic_regex_is_stopped_and_the_server_stays_responsive(workspace, root: Path, pattern: str) -> None:
    (root / "long.txt").write_text("a" * 40 + "\n")
    before = _workers()
    ws = workspace(search_timeout=1.5)
    started = ws.ok("start_search", pattern=pattern, kind="content", regex=True, wait_ms=0)
    assert started["done"] is False
    # The match runs elsewhere: this server (in this very process) still answers at once.
    assert ws.ok("list_directory")["entries"][0]["name"] == "long.txt"
    done = ws.ok("get_more_search_results", search_id=started["searchId"])
    for _ in range(200):
        if done["done"]:
            break
        time.sleep(0.05)
        done = ws.ok("get_more_search_results", search_id=started["searchId"])
    assert done["done"] is True
    assert "regular expression was still matching" in done["stoppedBy"] and "killed" in done["stoppedBy"]
    assert _gone([p for p in _workers() if p not in before])


def test_stop_search_kills_the_matcher(workspace, root: Path) -> None:
    (root / "long.txt").write_text("a" * 40 + "\n")
    before = _workers()
    ws = workspace(search_timeout=600)
    search = ws.ok("start_search", pattern=CATASTROPHIC[0], kind="content", regex=True, wait_ms=300)
    running = [p for p in _workers() if p not in before]
    assert running, "the regex runs in a worker process"
    stopped = ws.ok("stop_search", search_id=search["searchId"])
    assert stopped["done"] is True and stopped["stoppedBy"] == "stopped"
    assert _gone(running)


def test_regex_search_still_finds_lines(workspace, root: Path) -> None:
    """The worker is an implementation detail: results, line numbers and flags are as before."""
    (root / "a.txt").write_text("alpha 1\nBeta 22\ngamma 333\n" + "filler\n" * 50_000 + "delta 4444\n")
    ws = workspace()
    found = ws.ok("start_search", pattern=r"\d{3,}$", kind="content", regex=True, wait_ms=10_000)
    assert [(r["line"], r["text"]) for r in found["results"]] == [(3, "gamma 333"), (50_004, "delta 4444")]
    beta = ws.ok("start_search", pattern=r"^beta", kind="content", regex=True, wait_ms=10_000)
    assert [r["line"] for r in beta["results"]] == [2]  # case-insensitive by default
    assert "invalid regular expression" in ws.error("start_search", pattern="(", kind="content", regex=True)


def test_catastrophic_regex_through_the_cli_honours_timeout(tmp_path: Path) -> None:
    """`llmc call --timeout 2` with a catastrophic regex and the server in-process: the call
    times out (exit 7) instead of hanging llmc at 100% CPU, and no matcher is left behind."""
    (tmp_path / "long.txt").write_text("a" * 40 + "\n")
    profile = tmp_path / "p.toml"
    profile.write_text(f'[servers.ws]\nbuiltin = "workspace"\noptions = {{ roots = ["{tmp_path}"] }}\n')
    before = _workers()
    proc = llmc(
        "-p",
        str(profile),
        "call",
        "--timeout",
        "2",
        "ws.start_search",
        f"pattern={CATASTROPHIC[0]}",
        "kind=content",
        "regex=true",
        "wait_ms=30000",
        timeout=60,
    )
    assert proc.returncode == 7, (proc.stdout, proc.stderr)
    assert _gone([p for p in _workers() if p not in before])


# ---------------------------------------------------------------------- processes
@pytest.fixture(params=SANDBOXES)
def sandbox(request) -> str:
    return request.param


@pytest.fixture
def runner(sandbox, workspace):
    return lambda **extra: workspace(sandbox=sandbox, allow_commands=COMMANDS, timeout=20, **extra)


def _alive(marker: str) -> list[int]:
    return [p.pid for p in live_processes() if p.cmdline()[:2] == [b"sleep", marker.encode()]]


def _started(marker: str) -> bool:
    """Is `sleep MARKER` running? (It may still be between fork and exec when its parent answers.)"""
    return wait_until(lambda: _alive(marker), 5)


# Ways a child can try to outlive the server; each line is a shell script whose background
# `sleep MARKER` must be gone once the server closes, though the script itself has ended.
OUTLIVE = [
    ("background", "sleep {m} >/dev/null 2>&1 &"),
    ("setsid", "setsid sleep {m} >/dev/null 2>&1 &"),
    ("setsid, clean environment", "env -i setsid sleep {m} >/dev/null 2>&1 &"),
    ("double fork", "( ( sleep {m} >/dev/null 2>&1 & ) & )"),
    ("double fork, setsid, clean env", "( env -i setsid sh -c 'sleep {m} >/dev/null 2>&1 &' & )"),
    ("nohup", "nohup sleep {m} >/dev/null 2>&1 &"),
    (
        "every mark dropped",
        "( env -i python3 -I -c 'import os; os.closerange(3, 65536); os.setsid(); "
        'os.execvp("sleep", ["sleep", "{m}"])\' </dev/null >/dev/null 2>&1 & )',
    ),
]


@pytest.mark.parametrize("script", [s for _, s in OUTLIVE], ids=[n for n, _ in OUTLIVE])
def test_background_child_does_not_outlive_the_server(runner, sandbox: str, script: str) -> None:
    """Without a sandbox the child survives its parent until the server closes; with bwrap it
    dies with the PID namespace as soon as the parent (the namespace's init) exits."""
    marker = str(300 + sum(script.encode()) % 600)
    ws = runner()
    out = ws.ok("run_command", argv=["sh", "-c", script.format(m=marker) + "\necho started"])
    assert out["output"].strip().endswith("started") and out["running"] is False
    if sandbox == "none":
        assert _started(marker), "the child runs after its parent exited"
    ws.session.close()
    assert wait_until(lambda: not _alive(marker), 10), _alive(marker)


LIMITS = [  # (option, value, /proc/self/limits row, expected soft limit as printed there)
    ("max_user_processes", 321, "Max processes", "321"),
    ("max_memory_bytes", 3 << 30, "Max address space", str(3 << 30)),
    ("max_cpu_seconds", 17, "Max cpu time", "17"),
]


@pytest.mark.parametrize("option, value, row, shown", LIMITS, ids=[o for o, *_ in LIMITS])
def test_resource_limits_visible_in_the_child(runner, option: str, value: int, row: str, shown: str) -> None:
    ws = runner(**{option: value})
    limits = ws.ok("run_command", argv=["cat", "/proc/self/limits"])["output"]
    line = next(line for line in limits.splitlines() if line.startswith(row))
    assert re.split(r"\s{2,}", line)[1] == shown, line
    assert ws.ok("get_config")["processes"]["limits"][option] == value


def test_default_resource_limits(runner) -> None:
    ws = runner()
    limits = ws.ok("run_command", argv=["cat", "/proc/self/limits"])["output"]
    soft = {
        row: re.split(r"\s{2,}", line)[1]
        for line in limits.splitlines()
        for row in ("Max processes", "Max address space", "Max cpu time")
        if line.startswith(row)
    }
    # cpu: the process time limit (timeout=20 in `runner`)
    assert soft == {"Max processes": "1024", "Max address space": str(4 << 30), "Max cpu time": "20"}
    assert ws.ok("run_command", argv=["sh", "-c", "ulimit -t"])["output"] == "20\n"  # as a shell sees it


def test_memory_limit_stops_a_runaway_allocation(runner) -> None:
    """CONTAINED: a shell that tries to allocate 2 GiB under a 256 MiB limit fails, the server lives."""
    ws = runner(max_memory_bytes=256 << 20)
    out = ws.ok("run_command", argv=["sh", "-c", "x=$(head -c 2000000000 /dev/zero | tr '\\0' a); echo ${#x}"])
    assert out["exitCode"] != 0 or out["output"].strip() != "2000000000"


@pytest.mark.parametrize("server", ["builtin", "stdio"])
def test_background_child_ends_with_llmc_call(tmp_path: Path, server: str) -> None:
    """Through the real CLI: `llmc call` runs a command that leaves `sleep` in the background
    and exits; the workspace server (in-process, or `llmc serve workspace` as a stdio child that
    gets end of input and then SIGTERM) takes the child down with it."""
    from tests.helpers import llmc_executable

    marker = "787" if server == "builtin" else "797"
    if server == "builtin":
        table = (
            f'builtin = "workspace"\noptions = {{ roots = ["{tmp_path}"], read_only = false, '
            'sandbox = "none", allow_commands = ["sh"] }\n'
        )
    else:
        table = (
            f'command = "{llmc_executable()}"\nargs = ["serve", "workspace", "--root", "{tmp_path}", '
            '"--sandbox", "none", "--allow-command", "sh"]\n'
        )
    profile = tmp_path / "p.toml"
    profile.write_text(f"[servers.ws]\n{table}")
    script = f"setsid sleep {marker} >/dev/null 2>&1 & echo started"
    proc = llmc("-p", str(profile), "call", "--yes", "ws.run_command", "--json", f'{{"argv": ["sh", "-c", "{script}"]}}')
    assert proc.returncode == 0 and "started" in proc.stdout, (proc.stdout, proc.stderr)
    assert wait_until(lambda: not _alive(marker), 10), _alive(marker)


@TO_THREAD
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_sigterm_ends_the_stdio_server_and_its_process_trees(tmp_path: Path, to_thread: bool, signame: str) -> None:
    """`llmc serve workspace` killed with SIGTERM or SIGHUP (its input still open) closes like at
    end of input: the background child of a finished command is gone, and the exit status is 143
    (DESIGN's code for both), also when the kernel hands the signal to a thread other than the one
    reading the input."""
    import json
    import signal
    import subprocess

    from tests.helpers import llmc_executable, signal_another_thread

    marker = "807"
    server = subprocess.Popen(
        [llmc_executable(), "serve", "workspace", "--root", str(tmp_path), "--sandbox", "none", "--allow-command", "sh"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert server.stdin is not None and server.stdout is not None
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "run_command",
                "arguments": {"argv": ["sh", "-c", f"setsid sleep {marker} >/dev/null 2>&1 & echo ok"]},
            },
        },
    ]
    try:
        server.stdin.write("".join(json.dumps(m) + "\n" for m in messages).encode())
        server.stdin.flush()
        for _ in range(10):  # the initialize answer, then the call's
            reply = json.loads(server.stdout.readline())
            if reply.get("id") == 2:
                break
        assert reply["result"]["structuredContent"]["output"] == "ok\n"
        assert _started(marker)
        sig = signal.Signals[signame]
        if to_thread:
            signal_another_thread(server.pid, sig)
        else:
            server.send_signal(sig)
        assert server.wait(timeout=30) == 143
    finally:
        server.kill()
        server.wait()
    assert wait_until(lambda: not _alive(marker), 10), _alive(marker)


def test_a_storm_of_sigterms_still_ends_the_stdio_server_with_143(tmp_path: Path) -> None:
    """A supervisor that repeats its stop, or a signal that lands while the interpreter finalizes
    (when CPython has put back SIGTERM's default action): the server still closes and exits 143,
    never killed by the signal half-way."""
    import signal
    import subprocess

    from tests.helpers import llmc_executable, signal_until_exit

    server = subprocess.Popen(
        [llmc_executable(), "serve", "workspace", "--root", str(tmp_path), "--sandbox", "none"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        server.stdin.write(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
        server.stdin.flush()
        assert b'"id":1' in server.stdout.readline().replace(b" ", b"")  # it is serving
        assert signal_until_exit(server, signal.SIGTERM) == 143
        assert b"Traceback" not in server.stderr.read()  # type: ignore[union-attr]
    finally:
        server.kill()
        server.wait()


def test_catastrophic_regex_in_ask_honours_total_timeout(tmp_path: Path) -> None:
    """`llmc ask --total-timeout 3`: the model asks for a catastrophic regex search that would
    wait 30 s; llmc stops at its total timeout (exit 7) instead of hanging, no matcher left."""
    from tests.fakes.llm import FakeLLM
    from tests.fakes.scripts import turn

    (tmp_path / "long.txt").write_text("a" * 40 + "\n")
    search = {"pattern": CATASTROPHIC[0], "kind": "content", "regex": True, "wait_ms": 30000}
    before = _workers()
    with FakeLLM("openai", [turn("openai", calls=[("c1", "start_search", search)]), turn("openai", text="done")]) as fake:
        profile = tmp_path / "p.toml"
        profile.write_text(
            f'[servers.ws]\nbuiltin = "workspace"\noptions = {{ roots = ["{tmp_path}"] }}\n\n'
            f'[llm]\nprovider = "openai"\nmodel = "m"\nbase_url = "{fake.base_url}"\n'
        )
        proc = llmc("-p", str(profile), "ask", "find it", "--total-timeout", "3", env={"OPENAI_API_KEY": "k"}, timeout=60)
    assert proc.returncode == 7, (proc.stdout, proc.stderr)
    assert _gone([p for p in _workers() if p not in before])
