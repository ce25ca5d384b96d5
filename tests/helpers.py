"""Helpers to find and start the real MCP peers: npm packages in tests/node and tests/node-dc, SDK servers
in tests/peers."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
NODE_BIN = ROOT / "tests" / "node" / "node_modules" / ".bin"
PEERS = ROOT / "tests" / "peers"
DESKTOP_COMMANDER = ROOT / "tests" / "node-dc" / "node_modules" / "@wonderwhy-er" / "desktop-commander"


def node_tool(name: str) -> str:
    """Path of an npm-installed executable; scripts/test.sh installs them (never skipped silently)."""
    path = NODE_BIN / name
    if not path.exists():
        pytest.fail(f"{path} is missing: run scripts/test.sh, which installs tests/node")
    return str(path)


def conformance_suite(spec: str) -> str:
    """The official conformance suite's entry point for a spec version: 0.1.x tests up to
    2025-11-25; the 2026-07-28 suite is a pre-release installed under the alias conformance-2026.
    Both packages name their bin `conformance`, and which one npm links there is not fixed, so
    each is run from its own package. scripts/test.sh installs both (never skipped silently)."""
    package = "conformance-2026" if spec == "2026-07-28" else "@modelcontextprotocol/conformance"
    path = NODE_BIN.parent / package / "dist" / "index.js"
    if not path.exists():
        pytest.fail(f"{path} is missing: run scripts/test.sh, which installs tests/node")
    return str(path)


def desktop_commander() -> list[str]:
    """argv that runs Desktop Commander (its package.json "bin": dist/index.js, an ES module) on stdio.

    With the pinned Node 22 of tests/node when it is there (DC asks for Node >= 18), else the system's
    node. scripts/test.sh installs it into tests/node-dc (never skipped silently)."""
    entry = DESKTOP_COMMANDER / "dist" / "index.js"
    if not entry.exists():
        pytest.fail(f"{entry} is missing: run scripts/test.sh, which installs tests/node-dc")
    node = str(NODE_BIN / "node") if (NODE_BIN / "node").exists() else shutil.which("node")
    if not node:
        pytest.fail("no node to run Desktop Commander: run scripts/test.sh, which installs Node 22 in tests/node")
    return [node, str(entry)]


def sdk_server(name: str) -> list[str]:
    """argv that runs one of the Python test servers in tests/peers with this interpreter."""
    return [sys.executable, str(PEERS / name)]


def profile_file(config: Path, text: str, name: str = "default") -> Path:
    """Write profile NAME under a config directory (LLMC_CONFIG_DIR); its path."""
    path = config / "profiles" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[ThreadingHTTPServer]:
    """The standard library's HTTP server on a loopback port, in a thread, for the block."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


def wait_until(predicate: Callable[[], object], timeout: float = 15.0, interval: float = 0.05) -> bool:
    """Poll `predicate` until it holds or `timeout` seconds pass; whether it holds at the end."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def wait_listening(proc: subprocess.Popen[bytes], port: int, what: object, timeout: float = 30.0) -> None:
    """Wait (bounded) until the server `proc` accepts connections on a loopback port. The test
    fails, with the end of the server's stderr when it was captured, if it exits or never listens."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            stderr = proc.stderr.read().decode(errors="replace")[-2000:] if proc.stderr else ""
            pytest.fail(f"{what} exited early: {stderr}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"{what} did not listen on {port} within {timeout:g}s")
            time.sleep(0.05)


def llmc_executable() -> str:
    path = Path(sys.executable).parent / "llmc"
    return str(path) if path.exists() else shutil.which("llmc") or "llmc"


class Result(subprocess.CompletedProcess[str]):
    """What a run of llmc gave: returncode, stdout, stderr (text), and stdout as JSON (already
    checked against the command's schema in schemas/ when the run ended)."""

    def json(self) -> Any:
        return json.loads(self.stdout)

    def lines(self) -> list[Any]:
        """stdout as JSON Lines."""
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


def llmc(
    *args: str,
    stdin: str | bytes | None = None,
    env: dict[str, str | None] | None = None,
    timeout: float = 120,
    cwd: Path | None = None,
) -> Result:
    """Run the `llmc` entry point in this process as a user would (no terminal): the default test
    runner. What a fresh process would have is set up for the run and put back after it
    (tests/inprocess.py): the environment with `env` applied (None unsets), the working directory,
    stdin (bytes need not be UTF-8; None: empty, as /dev/null), stdout and stderr captured apart,
    the exit code, and llmc's process-wide state. A traceback is always a failure. `timeout` is
    the process runner's; here pytest-timeout bounds the test. Tests about the process itself
    (signals, terminals, start-up, crashes, file descriptors, daemons) use llmc_process()."""
    from tests.inprocess import run_main

    code, out, err = run_main(list(args), stdin=stdin, env=env, cwd=cwd)
    return _checked(Result(["llmc", *args], code, _text(out, stdin), _text(err, stdin)))


def _text(data: bytes, stdin: str | bytes | None) -> str:
    """Output as the process runner gives it: decoded strictly, or leniently when the input was
    bytes (which need not be UTF-8 and may come back)."""
    return data.decode(errors="replace" if isinstance(stdin, bytes) else "strict")


def llmc_process(
    *args: str, stdin: str | bytes | None = None, env: dict[str, str] | None = None, timeout: float = 120, cwd: Path | None = None
) -> Result:
    """Run the installed `llmc` executable in a process of its own (no terminal), for what only a
    process shows: signals, exit statuses of a crash, start-up, file descriptors, daemons left
    behind. The output is text either way; a traceback is always a failure."""
    binary = isinstance(stdin, bytes)
    proc = subprocess.run(
        [llmc_executable(), *args],
        input=stdin,
        capture_output=True,
        text=not binary,
        timeout=timeout,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )
    if binary:
        proc.stdout, proc.stderr = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    return _checked(Result(proc.args, proc.returncode, proc.stdout, proc.stderr))


def _checked(result: Result) -> Result:
    """What every run must satisfy, whichever way it was started: no traceback, and JSON on
    stdout that fits the command's schema (tests/schemas.py), line by line for JSON Lines."""
    from tests.schemas import check_output

    assert "Traceback" not in result.stderr, result.stderr
    check_output(list(result.args)[1:], result.stdout)
    return result


TGKILL = {"x86_64": 234, "aarch64": 131}.get(os.uname().machine)  # the syscall's number
TO_THREAD = pytest.mark.parametrize(
    "to_thread",
    [
        False,
        pytest.param(
            True, marks=pytest.mark.skipif(TGKILL is None, reason="tgkill's number is known for x86_64 and aarch64 only")
        ),
    ],
    ids=["process", "thread"],
)


def signal_until_exit(proc: subprocess.Popen[Any], sig: int, seconds: float = 60.0, interval: float = 0.002) -> int:
    """Send `sig` to `proc` again and again, every `interval` seconds, until it exits (bounded by
    `seconds` and so in count), as an impatient operator or a supervisor that repeats its stop
    does; the process's exit status. A signal that lands while the interpreter finalizes, when
    CPython has put back each signal's default action, is in the storm too."""
    deadline = time.monotonic() + seconds
    while proc.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, sig)
        time.sleep(interval)
    return proc.wait(timeout=max(0.1, deadline - time.monotonic()))


def signal_another_thread(pid: int, sig: int) -> None:
    """Send `sig` to one of a process's threads other than the main one, as the kernel may choose
    to for a signal sent to the process: the process must react all the same."""
    others = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)
    assert others, "the process has no thread but the main one"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(TGKILL, pid, others[-1], int(sig)) != 0:
        raise OSError(ctypes.get_errno(), "tgkill")


def audit_trail(state_dir: Path) -> list[dict[str, Any]]:
    """The records of the audit trail in a state directory, read the way `llmc audit` reads them: a
    gateway or keeper may be appending meanwhile, and a record being written is waited for, not torn."""
    from llmc_cli.audit.log import AuditLog

    return [json.loads(line) for _, _, line in AuditLog(state_dir / "audit.jsonl").records()]


def assert_call_pumps_beside_a_listen(session: Any, wait: float = 60.0) -> None:
    """A call of the SDK server's `slow` tool made while `session` has a listen open: every
    progress message is read while the call is the only wait (`alone()`), and the caller's own
    thread reads the last of them (the pump). Not on the main thread, which never pumps."""
    from dataclasses import replace

    seen: list[tuple[threading.Thread, bool]] = []
    session.hooks = replace(
        session.hooks, on_progress=lambda _params: seen.append((threading.current_thread(), session._inflight.alone()))
    )
    result: list[object] = []
    worker = threading.Thread(target=lambda: result.append(session.call_tool("slow", {"seconds": 1.0})))
    worker.start()
    worker.join(wait)
    assert result, "the call did not end"
    assert seen and all(alone for _, alone in seen)
    # the reader thread may deliver the first message while it hands over; the caller reads the rest
    assert seen[-1][0] is worker, [thread.name for thread, _ in seen]
