"""stdio transport: newline-delimited JSON-RPC over a child process's stdin/stdout.

The child gets an allow-listed environment (never the user's whole environment, which holds
tokens for unrelated services) plus what the server's description declares. Its stderr is
kept (last lines) so a failure can say why; shutdown is stdin close -> wait -> SIGTERM -> SIGKILL,
bounded in time, and kills the whole process group so `npx`-style wrappers leave no orphans.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import signal
import subprocess
import threading
import weakref
from collections.abc import Callable
from typing import ClassVar

from llmc_cli.errors import ConnectionFailed, LlmcError, ProtocolError
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.messages import JSONObject
from llmc_cli.mcp.transports.base import Closed, Deliver, max_message_bytes, too_large
from llmc_cli.mcp.transports.crash_lines import telling_line

# Variables a server legitimately needs to start (the MCP SDKs pass a similar list).
INHERITED_ENV = (
    "HOME",
    "LOGNAME",
    "PATH",
    "SHELL",
    "TERM",
    "USER",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "SYSTEMROOT",
    "NODE_PATH",
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "npm_config_cache",
    "VIRTUAL_ENV",
    "PYTHONPATH",
)
STDERR_LINES_KEPT = 50
GARBAGE_LINES_TOLERATED = 100  # servers that log to stdout: skip a few lines, then give up


_spawner_lock = threading.Lock()
_spawner_pool: list[concurrent.futures.ThreadPoolExecutor] = []


def _spawner() -> concurrent.futures.ThreadPoolExecutor:
    """One thread, kept until llmc exits, that starts every launched (sandboxed) server."""
    with _spawner_lock:
        if not _spawner_pool:
            _spawner_pool.append(concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="llmc-spawner"))
        return _spawner_pool[0]


def child_environment(declared: dict[str, str]) -> dict[str, str]:
    env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
    env.update(declared)
    return env


class StdioTransport:
    #: Every started transport, so an interrupted command can stop its servers (they run in
    #: their own process groups and do not get the terminal's Ctrl-C).
    live: ClassVar[weakref.WeakSet[StdioTransport]] = weakref.WeakSet()

    @classmethod
    def close_all(cls) -> None:
        for transport in list(cls.live):
            transport.close()

    def __init__(
        self,
        command: list[str] | tuple[str, ...],
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        on_stderr: Callable[[str], None] | None = None,
        shutdown_timeout: float = 2.0,
        eof_grace: float = 0.05,
        launch: list[str] | tuple[str, ...] = (),
    ) -> None:
        if not command:
            raise ConnectionFailed("empty command for a stdio server")
        self.command = list(command)
        self.launch = list(launch)  # what runs the command contained (limits, sandbox), computed above mcp/
        self.env = dict(env or {})
        self.cwd = cwd
        self.on_stderr = on_stderr
        self.shutdown_timeout = shutdown_timeout
        self.eof_grace = eof_grace  # many servers (Node ones with timers) never exit on EOF alone
        self.protocol_version: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_LINES_KEPT)
        self._write_lock = threading.Lock()
        self._closing = False
        self._threads: list[threading.Thread] = []

    def start(self, deliver: Deliver, closed: Closed) -> None:
        self._proc = self._spawn()
        StdioTransport.live.add(self)
        for target, args in ((self._read_stdout, (deliver, closed)), (self._read_stderr, ())):
            t = threading.Thread(target=target, args=args, daemon=True, name=f"llmc-stdio-{target.__name__}")
            t.start()
            self._threads.append(t)

    def _spawn(self) -> subprocess.Popen[bytes]:
        """The server's process: the one place it is made."""

        def popen() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                [*self.launch, *self.command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=child_environment(self.env),
                cwd=self.cwd,
                start_new_session=True,  # own process group: we can kill wrappers and their children
            )

        try:
            # A launch (bubblewrap --die-with-parent) ends the server when its parent THREAD ends
            # (PR_SET_PDEATHSIG is per thread): it is started by a thread that lives as long as llmc.
            return _spawner().submit(popen).result() if self.launch else popen()
        except FileNotFoundError:
            raise ConnectionFailed(f"cannot start server: command not found: {self.command[0]}") from None
        except PermissionError:
            raise ConnectionFailed(f"cannot start server: permission denied: {self.command[0]}") from None
        except NotADirectoryError:
            raise ConnectionFailed(f"cannot start server: working directory not found: {self.cwd}") from None
        except OSError as exc:
            if self.cwd and not os.path.isdir(self.cwd):
                raise ConnectionFailed(f"cannot start server: working directory not found: {self.cwd}") from None
            raise ConnectionFailed(f"cannot start server {self.command[0]}: {exc.strerror or exc}") from None

    def send(self, message: JSONObject) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise ConnectionFailed("stdio transport is not started")
        data = (jsonrpc.encode(message) + "\n").encode("utf-8")
        with self._write_lock:
            try:
                proc.stdin.write(data)
                proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                raise ConnectionFailed(self._exit_message("server closed its input")) from None

    def close(self) -> None:
        proc = self._proc
        if proc is None or self._closing:
            return
        self._closing = True
        StdioTransport.live.discard(self)
        try:
            if proc.stdin:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=self.eof_grace)
        except subprocess.TimeoutExpired:
            self._signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=self.shutdown_timeout)
            except subprocess.TimeoutExpired:
                self._signal_group(proc, signal.SIGKILL)
                proc.wait(timeout=self.shutdown_timeout)
        # The server exited; children it left in its group (npx -> node) go too.
        self._signal_group(proc, signal.SIGKILL)
        for t in self._threads:
            t.join(timeout=1.0)
        for stream in (proc.stdout, proc.stderr):
            try:
                if stream:
                    stream.close()
            except OSError:
                pass

    def diagnostics(self) -> str:
        return "\n".join(self._stderr_tail)

    # -- internals ---------------------------------------------------------------------------

    @staticmethod
    def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _read_stdout(self, deliver: Deliver, closed: Closed) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        error: LlmcError | None = None
        garbage = 0
        limit = max_message_bytes()  # one message per line; a server that streams without newlines is broken
        try:
            for raw in iter(lambda: self._proc.stdout.readline(limit + 1), b""):  # type: ignore[union-attr]
                if len(raw) > limit:
                    error = too_large(limit, "a line")
                    break
                line = raw.strip()
                if not line:
                    continue
                try:
                    messages = jsonrpc.decode(line)
                except ProtocolError as exc:
                    # Servers that print banners or logs on stdout break the protocol; tolerate a
                    # few lines (shown with -v) before declaring the stream unusable.
                    garbage += 1
                    self._note_stderr(f"[stdout, not JSON-RPC] {line[:200].decode('utf-8', 'replace')}")
                    if garbage > GARBAGE_LINES_TOLERATED:
                        error = ProtocolError(f"server wrote too many non-JSON-RPC lines on stdout: {exc.message}")
                        break
                    continue
                for message in messages:
                    deliver(message)
        except (OSError, ValueError):
            pass
        if error is None and not self._closing:
            error = ConnectionFailed(self._exit_message("server closed the connection"))
        closed(error)

    def _read_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        try:
            for raw in iter(self._proc.stderr.readline, b""):
                self._note_stderr(raw.decode("utf-8", "replace").rstrip())
        except (OSError, ValueError):
            pass

    def _note_stderr(self, line: str) -> None:
        self._stderr_tail.append(line)
        if self.on_stderr:
            self.on_stderr(line)

    def _exit_message(self, what: str) -> str:
        proc = self._proc
        code = None
        if proc is not None:
            try:
                code = proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                code = None
        if code is not None:  # the server is gone: let the stderr reader take its last lines
            for t in self._threads:
                if t.name.endswith("_read_stderr") and t is not threading.current_thread():
                    t.join(timeout=0.5)
        detail = f"{what}" + (f" (exit status {code})" if code is not None else "")
        line = telling_line(list(self._stderr_tail))
        if line:
            detail += f": {line.strip()[:300]}"
        return detail
