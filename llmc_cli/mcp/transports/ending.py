"""How a stdio server's end is awaited (a pidfd where there is one) and judged: still at work when
its wait ran out, or asleep with EOF ignored (transports/stdio.py's close)."""

from __future__ import annotations

import os
import select
import subprocess


def ended_within(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Whether `proc` ended (and was reaped) within `timeout` seconds. On Linux the wait wakes
    when it ends (a pidfd). subprocess's wait(timeout) polls, sleeping 1, 2, 4 .. 50 ms between
    looks: it sees a server that ends 9 ms after SIGTERM at 15 ms, one that ends at 17 ms at 31."""
    if proc.returncode is not None:
        return True  # reaped already (its pid may be another process's now)
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux (5.3+), or reaped meanwhile by another thread
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)  # readable once the process has ended
        if not poller.poll(max(timeout, 0.0) * 1000):
            return False
    finally:
        os.close(pidfd)
    proc.wait()  # it ended: the reap does not block
    return True


def at_work(pid: int) -> bool:
    """Whether a thread of `pid` or of a process below it (npx -> node) is running, waiting for a
    CPU or in an uninterruptible wait (Linux /proc states R, D): a server busy exiting, not one
    asleep that ignores EOF. At most 32 processes looked at; without /proc: False (asleep)."""
    pending, looked = [pid], 0
    while pending and looked < 32:
        current, looked = pending.pop(), looked + 1
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue  # gone meanwhile, or no /proc
        for task in tasks:
            try:
                with open(f"/proc/{current}/task/{task}/stat", "rb") as stat:
                    if stat.read().rpartition(b")")[2].split(None, 1)[0] in (b"R", b"D"):
                        return True
                with open(f"/proc/{current}/task/{task}/children", "rb") as children:
                    pending.extend(int(child) for child in children.read().split())
            except (OSError, ValueError, IndexError):
                continue
    return False
