"""stdio transport: newline-delimited JSON-RPC over a child process's stdin/stdout.

The child gets an allow-listed environment (never the user's whole environment, which holds
tokens for unrelated services) plus what the server's description declares. Its stderr is
kept (last lines) so a failure can say why; shutdown is stdin close -> wait -> SIGTERM -> SIGKILL,
bounded in time, and kills the whole process group so `npx`-style wrappers leave no orphans.
The wait after stdin closes (`eof_grace`) is what the spec calls a reasonable time for a server
to exit on EOF; a server seen lately to let it pass asleep (mcp/client.py remembers it,
`on_linger`) is given none: SIGTERM follows the close of its input at once, as it would have 50 ms
later. One still at work when the wait ran out (exiting slowly on a loaded machine, flushing) is
not taken for one that ignores EOF.

Who reads the server's stdout: one thread at a time, in order. A reader thread does while the
connection is idle or shared; a caller that is the only one awaiting a reply (a batch's calls, a
sequential client) reads its own reply on its own thread (pump), while the reader thread stands
aside: a reply then costs one wake-up of the waiting thread, not a wake-up of the reader thread
and a hand-over to the caller (and the reply, read, is taken as it is, not handed over through
the session's matcher). The reader thread takes over again when a caller finds others
waiting, when the server wrote something that nobody read LINGER seconds after the last caller
read (a message of an idle connection, its end), and IDLE seconds after it: not merely because a
lone caller was slow to send its next request (a loaded machine, another thread holding the GIL).
"""

from __future__ import annotations

import collections
import os
import select
import subprocess
import threading
import time
import weakref
from _signal import SIGKILL, SIGTERM  # the numbers, without the signal module's enums (cli/lazy_stdlib.py)
from _thread import get_ident
from collections.abc import Callable
from typing import Any, ClassVar

from llmc_cli.errors import ConnectionFailed, LlmcError, ProtocolError
from llmc_cli.mcp import jsonrpc
from llmc_cli.mcp.inflight import Future
from llmc_cli.mcp.messages import JSONObject
from llmc_cli.mcp.transports.base import Closed, Deliver, max_message_bytes, too_large
from llmc_cli.mcp.transports.child import child_environment, has_terminal, spawner
from llmc_cli.mcp.transports.ending import at_work, ended_within
from llmc_cli.model import EVERYTHING, compact_json_line

STDERR_LINES_KEPT = 50
GARBAGE_LINES_TOLERATED = 100  # servers that log to stdout: skip a few lines, then give up
LINGER = 0.05  # seconds the reader thread stands aside after a caller last read its own reply
IDLE = 1.0  # seconds after which it reads again whatever: an idle connection's reader sleeps in read()
READ_BYTES = 65536
FIRST_READ_BYTES = 8192  # what most messages fit in
_MAIN = threading.main_thread().ident  # the main thread never reads in pump()


class _Ended(Exception):
    """The server's stdout ended (EOF, a read error, a line over the limit, too much garbage)."""

    def __init__(self, error: LlmcError | None = None) -> None:
        super().__init__()
        self.error = error


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
        self.on_linger: Callable[[], None] | None = None  # told when a server outlived its eof_grace
        self.protocol_version: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_LINES_KEPT)
        self._write_lock = threading.Lock()
        self._spawning = threading.Lock()  # the process is made and recorded, or closed, not both at once
        self._closing = False
        self._threads: list[threading.Thread] = []
        # Who reads stdout (see the module's docstring); the fields below are guarded by _stream.
        # `with self._held:` takes the Condition's own lock in C (Condition.__enter__ is a Python
        # call around it): pump takes it twice per request.
        self._held = threading.RLock()
        self._stream = threading.Condition(self._held)
        self._reader: int | None = None  # the thread reading stdout now (its ident)
        self._aside = False  # the reader thread stands aside: a caller reads its own replies
        self._left = 0.0  # when a caller last stopped reading (time.monotonic())
        self._ended = False  # stdout ended and `closed` was called
        self._buffer = bytearray()  # read from stdout, not yet a whole line
        self._garbage = 0
        self._limit = max_message_bytes()  # one message per line; a server that streams without newlines is broken
        self._deliver: Deliver | None = None
        self._closed: Closed | None = None
        # poll(2), not select(2): select cannot watch a descriptor >= FD_SETSIZE (1024), which a
        # server's pipe gets in a process holding many (the gateway's connections): a caller
        # reading its own reply failed with "filedescriptor out of range in select()". Two
        # objects, registered once (select.select also builds three lists and three fd_sets a
        # wait): one for whoever reads (one thread at a time), one for the reader thread's look
        # while it stands aside (a poll object is not shared between threads).
        self._ready: select.poll | None = None
        self._unread_poll: select.poll | None = None

    def spawn(self) -> None:
        """Start the server's process now, before start() reads it (once; start() adopts it): a
        command's first act, so that the server's own start-up overlaps the rest of llmc's.
        Until start(), nothing reads its stdout or stderr (the pipes hold what it writes); close()
        stops it as it stops a started one, and close_all() finds it. ConnectionFailed when it
        cannot be started, or the transport was closed first."""
        # The process and its record are made together where no signal handler runs (handlers
        # run on the main thread only): an interrupted command finds every process it made. A
        # launch (bubblewrap --die-with-parent) ends the server when its parent THREAD ends
        # (PR_SET_PDEATHSIG is per thread): the spawner's thread lives as long as llmc.
        if self.launch or threading.current_thread() is threading.main_thread():
            spawner().run(self._made)
        else:
            self._made()

    def _made(self) -> None:
        with self._spawning:  # close() waits for a spawn under way, then stops what it made
            if self._closing:
                raise ConnectionFailed("the connection was closed before its server started")
            if self._proc is None:
                self._proc = self._spawn()
                StdioTransport.live.add(self)

    def start(self, deliver: Deliver, closed: Closed) -> None:
        self.spawn()
        self._deliver, self._closed = deliver, closed
        assert self._proc is not None and self._proc.stdout is not None
        self._ready = select.poll()
        self._ready.register(self._proc.stdout.fileno(), select.POLLIN)
        self._unread_poll = select.poll()
        self._unread_poll.register(self._proc.stdout.fileno(), select.POLLIN)
        for target in (self._read_stdout, self._read_stderr):
            t = threading.Thread(target=target, daemon=True, name=f"llmc-stdio-{target.__name__}")
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
                # Its own process group either way (we can kill wrappers and their children; the
                # terminal's Ctrl-C does not reach it). A session of its own only when llmc has a
                # terminal the server could open and stop on (SIGTTIN): a new session is also a
                # scheduler autogroup of its own, in which node spent +0.05-0.15 s of CPU over a
                # 1,000-call batch (bench/RESULTS.md, session 15).
                start_new_session=alone,
                process_group=None if alone else 0,
            )

        alone = has_terminal()

        try:
            return popen()
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

    def send(self, message: JSONObject, foreign: object = EVERYTHING) -> None:
        """`foreign`: the part of `message` that came from outside (compact_json_line's)."""
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise ConnectionFailed("stdio transport is not started")
        data = compact_json_line(message, foreign)  # jsonrpc.encode's and a newline, as bytes (no text made to be encoded)
        lock = self._write_lock  # (acquire and release, not `with`: see inflight.InFlight.open)
        lock.acquire()
        try:
            # to the pipe itself, not through the file's buffer (its write, then its flush):
            # nothing else writes there; a write to a pipe may be partial (a full pipe, a signal)
            sent = os.write(proc.stdin.fileno(), data)  # (ValueError once closed)
            while sent < len(data):
                data = data[sent:]
                sent = os.write(proc.stdin.fileno(), data)
        except (BrokenPipeError, ValueError, OSError):
            raise ConnectionFailed(self._exit_message("server closed its input")) from None
        finally:
            lock.release()

    def close(self) -> None:
        with self._spawning:  # a process being made is recorded first, and stopped here
            proc, closing = self._proc, self._closing
            self._closing = True
        if proc is None or closing:
            return  # nothing started (and nothing will be), or closed already
        StdioTransport.live.discard(self)
        with self._stream:
            self._aside = False  # the reader thread reads to the end (and reports it)
            self._stream.notify_all()
        try:
            if proc.stdin:
                proc.stdin.close()
        except OSError:
            pass
        if not ended_within(proc, self.eof_grace):
            if self.eof_grace > 0 and self.on_linger is not None and not at_work(proc.pid):
                self.on_linger()  # best effort (the era cache's save): it never stops this close
            self._signal_group(proc, SIGTERM)
            if not ended_within(proc, self.shutdown_timeout):
                self._signal_group(proc, SIGKILL)
                proc.wait(timeout=self.shutdown_timeout)
        # The server exited; children it left in its group (npx -> node) go too.
        self._signal_group(proc, SIGKILL)
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=1.0)
        with self._stream:  # a caller reading its reply sees the end too: its descriptor stays until then
            self._stream.wait_for(lambda: self._reader in (None, get_ident()), timeout=1.0)
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

    def pump(self, future: Future[Any], timeout: float, alone: Callable[[], bool], own: int | None = None) -> bool | JSONObject:
        """Read and deliver the server's messages on this thread until `future` is done or `timeout`
        seconds passed, when `alone()` (the caller is the only one awaiting a reply) and no other
        thread reads; the reader thread stands aside meanwhile. False when the caller should
        wait for its reply to be delivered instead (the reader thread then reads). The main
        thread never reads here: a signal's exception must not fall between a read and its line.
        `own`: the caller's request id: a line that is its reply (result or error), alone, is
        returned as it is, not delivered (the matcher's hand-over skipped: the caller is its
        only reader); every other message is delivered as ever."""
        if not self._aside and not alone():
            # The reader thread reads (or is about to) and others wait too: nothing to hand
            # over, so no turn on the lock it takes after every line (the locked path below
            # decides the same for these two values).
            return False
        me = get_ident()  # (threading.current_thread() and main_thread() are two Python calls)
        held = self._held  # (acquire and release, not `with`: see inflight.InFlight.open)
        held.acquire()
        try:
            if self._ended or self._closing or self._proc is None:
                return False
            if me == _MAIN or not alone():
                if self._aside and self._reader is None:  # nobody reads: the reader thread does, now
                    self._aside = False
                    self._stream.notify_all()
                return False
            self._aside = True
            if self._reader is not None:  # the reader thread steps aside after the message it reads
                self._stream.wait_for(lambda: self._reader is None or self._ended, timeout)
                if self._reader is not None or self._ended or future._done:
                    # Read for this caller, who reads its own from now: the reader thread stays
                    # aside from here, as after a caller's own read (it took over again at once).
                    self._left = time.monotonic()
                    return True
            self._reader = me
        finally:
            held.release()
        deadline = time.monotonic() + timeout
        try:
            while not future._done:  # (the attribute done() returns: a call less a line)
                line = self._line(deadline)
                if line is None:
                    break
                mine = self._handle(line, own)
                if mine is not None:
                    if not future._done:
                        return mine
                    self._deliver(mine)  # failed meanwhile (the connection ended): the matcher drops it
        except _Ended as end:
            self._end(end.error)
        finally:
            # Let go without the lock unless someone must be woken: the reader thread reads
            # `_reader`, then `_left`, under the lock, and `_left` is set first here, so it never
            # finds the caller gone with the time of an earlier read.
            self._left = time.monotonic()  # the reader thread stays aside a while: no wake-up per call
            self._reader = None
            if self._closing or not alone():  # others await replies, or close() waits: the reader thread reads for them
                with self._held:
                    self._aside = False
                    self._stream.notify_all()
        return True

    def _read_stdout(self) -> None:
        """The reader thread: reads while no caller does (see the module's docstring)."""
        me = get_ident()
        try:
            while True:
                with self._stream:
                    while self._aside and not self._closing:
                        self._stream.wait(LINGER)
                        if self._reader is None:
                            idle = time.monotonic() - self._left
                            if idle >= IDLE or (idle >= LINGER and self._unread()):
                                self._aside = False  # a message waits that no caller reads, or none calls: back to reading
                    if self._ended:
                        return
                    self._reader = me
                while True:
                    line = self._line(None)
                    assert line is not None  # no deadline: a line, or the end
                    self._handle(line)
                    with self._stream:
                        if self._aside:  # a caller reads its own replies from here on
                            self._reader = None
                            self._stream.notify_all()
                            break
        except _Ended as end:
            self._end(end.error)
        finally:
            with self._stream:
                if self._reader == me:
                    self._reader = None
                self._stream.notify_all()

    def _unread(self) -> bool:
        """Whether the server wrote something nobody has read yet (held in the buffer, or in
        the pipe, its end included). Asked by the reader thread standing aside: a lone caller
        between two calls has read every reply, so however long it takes to send its next
        request (a loaded machine, a thread holding the GIL), the reader thread does not wake
        to read that request's reply and hand it over."""
        if self._buffer:
            return True
        try:
            return bool(self._unread_poll.poll(0))  # type: ignore[union-attr]  # started; data, its end (POLLHUP), or a closed descriptor
        except (OSError, ValueError):  # reading says what
            return True

    def _line(self, deadline: float | None) -> bytes | None:
        """The next line of stdout (by the one thread reading it), None at `deadline`."""
        assert self._proc is not None and self._proc.stdout is not None
        while True:
            if self._buffer:  # (most reads are one whole line: nothing held before them)
                end = self._buffer.find(b"\n")
                if end >= 0:
                    if end + 1 > self._limit:
                        raise _Ended(too_large(self._limit, "a line"))
                    line = bytes(self._buffer[:end])
                    del self._buffer[: end + 1]
                    return line
                if len(self._buffer) > self._limit:
                    raise _Ended(too_large(self._limit, "a line"))
            fd = self._proc.stdout.fileno()  # (ValueError once closed: never a number reused since)
            if deadline is not None:
                wait = deadline - time.monotonic()
                # (the end of the stream, or a descriptor closed under it, is an event too: read, it says so)
                if wait <= 0 or not self._ready.poll(wait * 1000):  # type: ignore[union-attr]  # started
                    return None
            try:
                # a line's first read small, its rest large: os.read makes (and shrinks) an object of
                # the size asked, and 64 KiB costs a malloc beyond the small ones (~2 us a read)
                chunk = os.read(fd, READ_BYTES if self._buffer else FIRST_READ_BYTES)
            except (OSError, ValueError):
                raise _Ended() from None
            if not chunk:
                if self._buffer:  # a last line without its newline
                    line, self._buffer = bytes(self._buffer), bytearray()
                    return line
                raise _Ended()
            # The usual read, one whole line: not through the buffer (three copies). (Its newline
            # last and no other, as integers: bytes.find parses its arguments, ~2,000 instructions.)
            if not self._buffer and chunk[-1] == 10 and len(chunk) <= self._limit and 10 not in (line := chunk[:-1]):
                return line
            self._buffer += chunk

    def _handle(self, raw: bytes, own: int | None = None) -> JSONObject | None:
        """One line: its messages delivered, or noted as not JSON-RPC (a few are tolerated). A
        line that is only the reply to `own` (a request id) is returned instead, undelivered."""
        line = raw.strip()
        if not line:
            return None
        try:
            messages = jsonrpc.decode(line)
        except ProtocolError as exc:
            # Servers that print banners or logs on stdout break the protocol; tolerate a
            # few lines (shown with -v) before declaring the stream unusable.
            self._garbage += 1
            self._note_stderr(f"[stdout, not JSON-RPC] {line[:200].decode('utf-8', 'replace')}")
            if self._garbage > GARBAGE_LINES_TOLERATED:
                raise _Ended(ProtocolError(f"server wrote too many non-JSON-RPC lines on stdout: {exc.message}")) from None
            return None
        if own is not None and len(messages) == 1:
            # what the session would hand its matcher for `own`: no method, the id by exact type
            # (a JSON true is no id 1); decode checked the rest (kind_of: a response or an error)
            m = messages[0]
            if "method" not in m and type(rid := m.get("id")) is int and rid == own:
                return m
        assert self._deliver is not None
        for message in messages:
            self._deliver(message)
        return None

    def _end(self, error: LlmcError | None) -> None:
        """stdout ended: `closed` is called, once, whoever read the end."""
        with self._stream:
            if self._ended:
                return
            self._ended = True
            self._stream.notify_all()
        if error is None and not self._closing:
            error = ConnectionFailed(self._exit_message("server closed the connection"))
        assert self._closed is not None
        self._closed(error)

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
        from llmc_cli.mcp.transports.crash_lines import telling_line  # only when a server failed

        detail = f"{what}" + (f" (exit status {code})" if code is not None else "")
        line = telling_line(list(self._stderr_tail))
        if line:
            detail += f": {line.strip()[:300]}"
        return detail
