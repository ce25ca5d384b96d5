"""The `mcp` SDK test servers of tests/peers served in a thread of the test process, where `llmc()`
runs in-process and the server's process is not what a test is about.

Starting one as a process costs most of a second of CPU (importing the SDK); the in-process runs
of the suite started them about 300 times. Here the SDK is imported once per test process and
each start is a thread serving a fresh server (its own state, as a new process has) on the SDK's
own stdio transport, over pipes, in the environment the process would have had. llmc's side is
unchanged: its StdioTransport frames, reads and closes as for a child process; only the process
is replaced, by ServerThread, which has what StdioTransport uses of a subprocess.Popen.

A peer served so defines `configure(argv, exit, environ) -> MCPServer` (its transport aside) and
is listed in THREADED. What stays a real process: a sandboxed server (a `launch` runs it
contained), a server over HTTP, every other peer, and every server of llmc_process(), a gateway
or a keeper.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

from llmc_cli.mcp import transports
from llmc_cli.mcp.transports import child, stdio

PEERS = (Path(__file__).parent / "peers").resolve()
THREADED = (
    "sdk_server.py",
    "sdk_library.py",
    "counting_server.py",
    "leaky_records.py",
    "poisoned_tools.py",
    "sdk_toolbox.py",
    "fence_breaker.py",
)


def serves_in_a_thread(command: list[str], launch: list[str]) -> tuple[str, list[str]] | None:
    """(the peer's module, its arguments) when `command` runs a THREADED peer over stdio with this
    interpreter, uncontained; else None (a real process)."""
    if launch or len(command) < 2 or Path(command[0]).resolve() != Path(sys.executable).resolve():
        return None
    script = Path(command[1]).resolve()
    if script.parent != PEERS or script.name not in THREADED:
        return None
    args = [a for a in command[2:] if a != "stdio"]
    if args and not args[0].startswith("-"):  # another transport (sse, streamable-http)
        return None
    return f"tests.peers.{script.stem}", args


class ServerThread:
    """What StdioTransport uses of a subprocess.Popen (stdin, stdout, stderr, pid, wait, poll,
    returncode), for a peer serving in a thread. Its exit (EOF on its input, the `crash`
    tool, a signal) is at once what a process's would be: the exit status is set and the
    server's ends of the pipes point at /dev/null, so the reader sees EOF and nothing the thread
    still writes reaches it. The thread itself ends once the serving loop has wound down."""

    def __init__(self, module: str, args: list[str], environ: dict[str, str]) -> None:
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        self.stdin = os.fdopen(in_w, "wb")
        self.stdout = os.fdopen(out_r, "rb")
        self.stderr = os.fdopen(err_r, "rb")
        self.pid = -1  # no process: StdioTransport's group signals come to signal() instead
        self.returncode: int | None = None
        self._fds = (in_r, out_w, err_w)  # the server's ends, closed when the thread ends
        self._exited = threading.Lock()
        self._done = threading.Event()
        self._cancel: Callable[[], None] | None = None  # the serving loop's, once it runs
        self._name = module
        serve = functools.partial(self._serve, module, args, environ)
        threading.Thread(target=serve, daemon=True, name=f"{module}-thread").start()

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(self._name, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def poll(self) -> int | None:
        return self.returncode

    def signal(self, signum: int) -> None:
        """A signal to the server's group kills it, as SIGTERM and SIGKILL kill these peers."""
        self._exit_now(-signum)
        if (cancel := self._cancel) is not None:
            cancel()

    def _exit_now(self, code: int) -> None:
        """The first exit counts: the status is set and the pipes are left (see the class)."""
        if not self._exited.acquire(blocking=False):
            return
        null = os.open(os.devnull, os.O_RDWR)
        try:
            for fd in self._fds:
                os.dup2(null, fd)  # the number stays valid: a late write cannot land in a file that reused it
        finally:
            os.close(null)
        self.returncode = code
        self._done.set()

    # -- the serving thread --------------------------------------------------------------------

    def _serve(self, module: str, args: list[str], environ: dict[str, str]) -> None:
        import importlib

        import anyio

        code = 0
        try:
            server = importlib.import_module(module).configure(args, exit=self._crash, environ=environ)
            anyio.run(self._run, server)
        except BaseException as exc:  # noqa: BLE001 - whatever ends the thread is the exit status
            code = _exit_code(exc)
            if code == 1:  # a traceback, as a process would print it
                with contextlib.suppress(OSError):
                    os.write(self._fds[2], "".join(traceback.format_exception(exc)).encode("utf-8", "replace"))
        finally:
            self._exit_now(code)
            for fd in self._fds:
                os.close(fd)

    async def _run(self, server: Any) -> None:
        import asyncio

        import anyio
        from mcp.server.stdio import stdio_server

        in_r, out_w, _ = self._fds
        stdin = anyio.wrap_file(io.TextIOWrapper(os.fdopen(in_r, "rb", closefd=False), encoding="utf-8", errors="replace"))
        stdout = anyio.wrap_file(io.TextIOWrapper(os.fdopen(out_w, "wb", closefd=False), encoding="utf-8"))
        lowlevel = server._lowlevel_server  # what MCPServer.run_stdio_async runs, on these streams
        with anyio.CancelScope() as scope:
            loop = asyncio.get_running_loop()

            def cancel() -> None:
                with contextlib.suppress(RuntimeError):  # the loop is closed: nothing left to cancel
                    loop.call_soon_threadsafe(scope.cancel)

            self._cancel = cancel
            async with stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream):
                await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

    def _crash(self, code: int) -> NoReturn:
        """A peer's os._exit: the exit now, then the serving loop ends (the SDK catches Exception)."""
        self._exit_now(code)
        raise _Exit(code)


class _Exit(BaseException):
    def __init__(self, code: int) -> None:
        self.code = code


def _exit_code(exc: BaseException) -> int:
    if isinstance(exc, _Exit):
        return exc.code
    if isinstance(exc, BaseExceptionGroup):
        codes = [_exit_code(inner) for inner in exc.exceptions]
        return next((code for code in codes if code != 1), 1)
    return 1


_REAL = stdio.StdioTransport


class _InThisProcess(_REAL):
    """StdioTransport whose THREADED peers run in a thread (serves_in_a_thread); every other
    command in a process, untouched."""

    def _spawn(self) -> Any:
        peer = serves_in_a_thread(self.command, self.launch)
        return super()._spawn() if peer is None else ServerThread(*peer, child.child_environment(self.env))

    @staticmethod
    def _signal_group(proc: Any, sig: int) -> None:
        if isinstance(proc, ServerThread):
            proc.signal(sig)
        else:
            _REAL._signal_group(proc, sig)


@contextlib.contextmanager
def peers_in_threads() -> Iterator[None]:
    """For the block, llmc in this process serves the THREADED peers over stdio in threads."""
    # mcp/client.py makes its transport as `transports.StdioTransport`, a lazy name the package
    # keeps once asked (llmc_cli.lazy_names): replaced there too, and put back as it was (not
    # asked yet: not kept), or a first ask inside the block would keep the stand-in for the
    # rest of the test process, and a gateway or keeper started in it later would run its
    # peers as threads (tests/gateway/test_upstream_sharing.py counts their processes).
    namespace = vars(transports)
    saved, kept = stdio.StdioTransport, namespace.get("StdioTransport")
    stdio.StdioTransport = namespace["StdioTransport"] = _InThisProcess  # type: ignore[misc]
    try:
        yield
    finally:
        stdio.StdioTransport = saved  # type: ignore[misc]
        if kept is None:
            namespace.pop("StdioTransport", None)
        else:
            namespace["StdioTransport"] = kept
