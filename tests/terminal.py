"""The installed llmc on a pseudo-terminal, as a person at a shell runs it.

    with Terminal("call", "srv.tool") as term:
        term.expect("Run it?")
        term.type("y")
        code = term.wait()

stdin and stderr are the terminal (its controlling terminal: llmc leads its own session, as a
shell job does), stdout is a pipe so the JSON stays readable (or the terminal too, when asked). `interrupt()` types Ctrl-C: the
terminal's line discipline sends SIGINT to its foreground process group, exactly what a shell user
causes. Every wait is bounded.
"""

from __future__ import annotations

import codecs
import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
import time
from typing import Any

from tests.helpers import llmc_executable
from tests.schemas import check_output


class Terminal:
    def __init__(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 60, stdout_on_terminal: bool = False
    ) -> None:
        self.timeout = timeout
        self.master, self.slave = pty.openpty()
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        self.proc = subprocess.Popen(
            [llmc_executable(), *args],
            stdin=self.slave,
            stderr=self.slave,
            stdout=self.slave if stdout_on_terminal else subprocess.PIPE,
            env={**os.environ, **(env or {})},
            start_new_session=True,
            preexec_fn=_take_terminal,
        )
        self.screen = ""  # everything llmc wrote to the terminal so far, as it was written
        self.stdout = ""
        self._seen = 0  # where the next expect() starts looking
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")  # a character may span reads

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.proc.stdout:
            self.proc.stdout.close()
        os.close(self.master)
        os.close(self.slave)

    def expect(self, text: str) -> str:
        """Wait until `text` appears on the terminal after what earlier calls matched; return
        the screen from there up to and including it."""
        deadline = time.monotonic() + self.timeout
        while (found := self.screen.find(text, self._seen)) < 0:
            exited = self.proc.poll() is not None  # then what it wrote is all there is
            if not self._read(min(1.0, deadline - time.monotonic())) and (exited or time.monotonic() > deadline):
                raise AssertionError(
                    f"{text!r} did not appear (exit status {self.proc.poll()}); the terminal shows:\n{self.screen}"
                )
        start, self._seen = self._seen, found + len(text)
        return self.screen[start : self._seen]

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\r")  # Enter, as a keyboard sends it

    def interrupt(self) -> None:
        os.write(self.master, b"\x03")  # Ctrl-C

    def wait(self) -> int:
        """Exit status; the rest of the terminal's output read."""
        out, _ = self.proc.communicate(timeout=self.timeout)
        self.stdout = (out or b"").decode("utf-8", "replace")
        if self.proc.stdout is not None:  # a pipe: the JSON there fits the command's schema
            check_output(self.proc.args[1:], self.stdout)
        while self._read(0.2):
            pass
        return self.proc.returncode

    def line_reaches_the_shell(self) -> bool:
        """After llmc exited: a line typed now is read by the next reader of the terminal (the
        shell), not eaten by something llmc left behind."""
        os.write(self.master, b"echo next\r")
        ready, _, _ = select.select([self.slave], [], [], 10)
        return bool(ready) and os.read(self.slave, 1024).startswith(b"echo next")

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], max(0.0, timeout))
        if not ready:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: no process has the terminal open any more
            return False
        self.screen += self._decoder.decode(data)
        return bool(data)


def _take_terminal() -> None:
    """In the child, after setsid: make the pty (fd 0) its controlling terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
