"""A command starts the stdio server it uses first before the rest of llmc loads (services/sandbox.py
`launch`), so that the server's own start-up overlaps llmc's; the catalog adopts that process
(one process, not two), and a command that fails after starting it leaves nothing running.

What was imported when the server started is read in a fresh interpreter (the test process has
imported everything): the real subprocess.Popen runs, observed on its way. What is left running is
read from the real processes: the pid of every server started, gone once the command returned."""

from __future__ import annotations

import functools
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from llmc_cli.errors import ConnectionFailed
from llmc_cli.mcp.client import connect
from llmc_cli.mcp.transports import stdio
from llmc_cli.model import ServerSpec
from tests.helpers import llmc, llmc_process, profile_file, sdk_server, wait_until
from tests.processes import gone
from tests.sandbox.conftest import BWRAP

PEERS = Path(__file__).resolve().parents[1] / "peers"
HANGS = [sys.executable, str(PEERS / "misbehaving_stdio.py"), "hang-on-exit"]  # ignores EOF and SIGTERM

# What a command loads only after its server started: the pipeline and its stages, policy, audit,
# state, the catalog's connections and the protocol session.
LATER = (
    "llmc_cli.services.pipeline",
    "llmc_cli.services.calls",
    "llmc_cli.services.catalogs",
    "llmc_cli.services.batch",
    "llmc_cli.policy.rules",
    "llmc_cli.audit",
    "llmc_cli.store",
    "llmc_cli.catalog.pool",
    "llmc_cli.mcp.client",
    "llmc_cli.mcp.session",
)

OBSERVE = """
import atexit, json, subprocess, sys
out, marker = sys.argv.pop(1), sys.argv.pop(1)
spawns = []
popen = subprocess.Popen.__init__
def observed(self, args, *rest, **kw):
    if any(marker in str(a) for a in args):
        spawns.append(sorted(sys.modules))
    popen(self, args, *rest, **kw)
subprocess.Popen.__init__ = observed
atexit.register(lambda: open(out, 'w').write(json.dumps({"spawns": spawns, "end": sorted(sys.modules)})))
sys.argv[0] = 'llmc'
from llmc_cli.cli.main import main
main()
"""


def observed(tmp_path: Path, marker: str, *arguments: str) -> tuple[list[list[str]], set[str], subprocess.CompletedProcess[str]]:
    """Run `llmc ARGUMENTS` in a fresh interpreter: the modules loaded at each start of a process
    whose argv mentions `marker`, the modules loaded at the end, and the process."""
    out = tmp_path / "observed.json"
    env = {**os.environ}
    for name in ("LLMC_PROFILE", "LLMC_SESSION", "LLMC_OTEL", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        env.pop(name, None)
    proc = subprocess.run(
        [sys.executable, "-c", OBSERVE, str(out), marker, *arguments],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    seen = json.loads(out.read_text())
    return seen["spawns"], set(seen["end"]), proc


def loaded(modules: set[str] | list[str], prefix: str) -> bool:
    return any(m == prefix or m.startswith(prefix + ".") for m in modules)


def test_an_adhoc_server_starts_before_the_rest_of_llmc_loads_and_is_started_once(tmp_path: Path) -> None:
    server = shlex.join(sdk_server("sdk_server.py"))
    for command in (["tools", "list"], ["call", "echo", "message=hi"]):
        spawns, end, proc = observed(tmp_path, "sdk_server.py", *command, "--stdio", server)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert len(spawns) == 1, f"`llmc {command[0]}` started {len(spawns)} processes of its server"
        early = [m for m in LATER if loaded(spawns[0], m)]
        assert early == [], f"`llmc {' '.join(command)}` loaded {early} before starting its server"
        assert [m for m in ("llmc_cli.services.catalogs", "llmc_cli.mcp.session") if loaded(end, m)] == [
            "llmc_cli.services.catalogs",
            "llmc_cli.mcp.session",
        ]
    assert loaded(end, "llmc_cli.services.pipeline") and loaded(end, "llmc_cli.audit")  # the call's, after
    assert not loaded(end, "llmc_cli.server.sandbox")  # bubblewrap's parts: a sandboxed launch's only


def test_a_profile_server_a_call_names_starts_first_and_a_batch_s_first_one_too(tmp_path: Path, isolated_dirs: Path) -> None:
    config = isolated_dirs / "config"
    argv = sdk_server("sdk_server.py")
    profile_file(config, f"[servers.t]\ncommand = {json.dumps(argv[0])}\nargs = {json.dumps(argv[1:])}\n")
    spawns, end, proc = observed(tmp_path, "sdk_server.py", "call", "t.echo", "message=hi")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(spawns) == 1 and [m for m in LATER if loaded(spawns[0], m)] == []
    assert json.loads(proc.stdout)["content"][0]["text"] == "hi"
    batch = tmp_path / "calls.jsonl"
    batch.write_text(
        '{"id": 1, "tool": "t.echo", "arguments": {"message": "a"}}\n{"id": 2, "tool": "t.add", "arguments": {"a": 1, "b": 2}}\n'
    )
    spawns, end, proc = observed(tmp_path, "sdk_server.py", "call", "--batch", str(batch), "--yes")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(spawns) == 1 and [m for m in LATER if loaded(spawns[0], m)] == []
    assert [json.loads(line)["id"] for line in proc.stdout.splitlines()] == [1, 2]
    assert loaded(end, "llmc_cli.services.batch")


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pid of every stdio server process started in this test (the real spawn runs)."""
    pids: list[int] = []
    spawn = stdio.StdioTransport._spawn

    def observed_spawn(self: stdio.StdioTransport) -> subprocess.Popen[bytes]:
        proc = spawn(self)
        pids.append(proc.pid)
        return proc

    monkeypatch.setattr(stdio.StdioTransport, "_spawn", observed_spawn)
    return pids


def test_a_profile_that_fails_to_load_after_the_start_leaves_no_server_running(
    tmp_path: Path, isolated_dirs: Path, started: list[int]
) -> None:
    profile_file(isolated_dirs / "config", "broken = [\n", name="broken")
    for command in (["tools", "list"], ["call", "echo", "message=hi"]):
        result = llmc("-p", "broken", *command, "--stdio", shlex.join(HANGS))
        assert result.returncode == 3 and "invalid TOML" in result.stderr, result.stderr
    assert len(started) == 2  # each started its server before the profile loaded
    assert [pid for pid in started if not gone(pid)] == []


def test_failures_after_a_profile_server_started_exit_as_before_and_leave_no_server(
    isolated_dirs: Path, started: list[int]
) -> None:
    server = f"[servers.t]\ncommand = {json.dumps(sys.executable)}\nargs = {json.dumps([str(PEERS / 'misbehaving_stdio.py'), 'good'])}\n"
    profile_file(isolated_dirs / "config", server)
    profile_file(isolated_dirs / "config", f'{server}\n[policy]\ndeny = ["t.echo"]\n', name="denying")
    unknown = llmc("call", "t.nosuch")
    assert unknown.returncode == 2 and "no tool named 'nosuch'" in unknown.stderr, unknown.stderr
    invalid = llmc("call", "t.echo", "message:=5")
    assert invalid.returncode == 2 and "message" in invalid.stderr, invalid.stderr
    denied = llmc("-p", "denying", "call", "t.echo", "message=hi")
    assert denied.returncode == 4 and "denied" in denied.stderr, denied.stderr
    assert len(started) == 2  # each command started its server, first; but not the call the policy denies by name
    assert [pid for pid in started if not gone(pid)] == []


def test_a_server_that_cannot_start_fails_as_it_always_did(isolated_dirs: Path, started: list[int]) -> None:
    """The early start leaves a process it cannot start to the connection, which reports it."""
    result = llmc("call", "echo", "--stdio", "/nonexistent/server")
    assert result.returncode == 5 and "command not found: /nonexistent/server" in result.stderr, result.stderr
    listed = llmc("tools", "list", "--stdio", "/nonexistent/server")
    assert listed.returncode == 5 and "command not found" in listed.stderr, listed.stderr
    assert started == []


def test_a_server_held_by_a_session_is_not_started_here(isolated_dirs: Path, started: list[int]) -> None:
    """--session with --stdio is refused before any server starts."""
    result = llmc("tools", "list", "--session", "kb", "--stdio", shlex.join(HANGS))
    assert result.returncode == 2 and "drop --stdio/--url" in result.stderr, result.stderr
    assert started == []


def test_a_sandboxed_server_starts_early_in_its_sandbox(tmp_path: Path, isolated_dirs: Path, started: list[int]) -> None:
    """The early start uses the launch the profile decides (bubblewrap), nothing else."""
    if BWRAP is None:
        pytest.skip("bubblewrap is not installed")
    argv = sdk_server("sdk_server.py")
    profile_file(
        isolated_dirs / "config",
        f'[servers.t]\ncommand = {json.dumps(argv[0])}\nargs = {json.dumps(argv[1:])}\nsandbox = "bwrap"\n',
    )
    result = llmc("call", "t.echo", "message=boxed")
    assert result.returncode == 0, result.stderr
    assert result.json()["content"][0]["text"] == "boxed"
    assert len(started) == 1 and gone(started[0])


def test_a_process_started_for_another_spec_is_not_adopted(started: list[int]) -> None:
    """connect() adopts a started process only when it runs exactly what the spec says (command,
    launch, environment, working directory); otherwise it stops it and refuses."""
    argv = sdk_server("sdk_server.py")
    transport = stdio.StdioTransport(argv, env={"A": "1"})
    transport.spawn()
    with pytest.raises(ValueError, match="not the one its spec describes"):
        connect(ServerSpec(name="t", command=tuple(argv), env={"A": "2"}), started=transport)
    assert len(started) == 1 and gone(started[0])
    adopted = stdio.StdioTransport(argv)
    adopted.spawn()
    with connect(ServerSpec(name="t", command=tuple(argv)), started=adopted) as session:
        assert session.transport is adopted and session.call_tool("echo", {"message": "x"})["content"][0]["text"] == "x"
    assert len(started) == 2 and gone(started[1])
    with pytest.raises(ConnectionFailed, match="command not found"):
        stdio.StdioTransport(["/nonexistent/server"]).spawn()


@pytest.mark.e2e  # a signal to the llmc process itself
def test_a_signal_soon_after_the_start_leaves_no_server(tmp_path: Path) -> None:
    """The server, once started, interrupts llmc (SIGINT to its parent), wherever llmc is then
    (loading, opening its catalog, connecting): exit 130 as for any Ctrl-C, and the server, which
    ignores EOF and SIGTERM, is gone."""
    pidfile = tmp_path / "server.pid"
    script = f"echo $$ > {shlex.quote(str(pidfile))}; kill -INT $PPID; exec {shlex.join(HANGS)}"
    for command in (["tools", "list"], ["call", "echo", "message=hi"]):
        result = llmc_process(*command, "--stdio", shlex.join(["sh", "-c", script]), timeout=60)
        assert result.returncode == 130 and "llmc: interrupted" in result.stderr, result.stderr
        pid = int(pidfile.read_text())
        assert wait_until(functools.partial(gone, pid), 5), f"server {pid} still runs"
        pidfile.unlink()
