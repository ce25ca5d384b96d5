"""Ending a process's whole tree without bubblewrap: its process group, what carries its
environment tag, what holds its marker (an inherited pipe descriptor, which survives setsid and
`env -i`), and every descendant of those (a keeper process adopts every orphan of the tree: see
sandbox._LAUNCH); frozen with SIGSTOP first so nothing forks while the tree is collected.
"""

from __future__ import annotations

import os
import signal

from llmc_cli.model import dataclass
from llmc_cli.server.launcher import TAG_VAR

KILL_ROUNDS = 20  # collect-and-kill passes over /proc; each freezes what it finds before killing


@dataclass(frozen=True)
class Tree:
    """How to recognise the processes of one started process's tree."""

    leader: int
    tag: str  # value of TAG_VAR in their environment
    marker: str  # readlink of the inherited marker descriptor, "pipe:[inode]"
    leader_reaped: bool  # then its pid may belong to someone else now


def kill_trees(trees: list[Tree]) -> None:
    """Kill every process of these trees: each leader's process group, holders of a tree's
    environment tag or marker descriptor, and all their descendants. Each round freezes what
    it found (SIGSTOP: a frozen process cannot fork) and then kills it, until a round finds
    nothing. What closes every descriptor, wipes its environment and calls setsid escapes this;
    only bwrap's PID namespace contains that (README: sandbox = "none")."""
    if not trees:
        return
    me = os.getpid()
    for _ in range(KILL_ROUNDS):
        found = _members(trees) - {me}
        if not found:
            return
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in found:
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
        for tree in trees:
            killpg(tree.leader, signal.SIGKILL)


def _members(trees: list[Tree]) -> set[int]:
    leaders = {t.leader for t in trees if not t.leader_reaped}
    groups = {t.leader for t in trees}  # a group id cannot be reused while a member lives
    needles = {f"{TAG_VAR}={t.tag}".encode() for t in trees}
    markers = {t.marker for t in trees}
    parents: dict[int, int] = {}
    members: set[int] = set()
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return members
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == b"Z":
            continue  # a zombie is dead already; its parent reaps it
        parents[pid] = int(fields[1])
        if pid in leaders or int(fields[2]) in groups or _carries(pid, needles, markers):
            members.add(pid)
    grew = True
    while grew:  # descendants of members (a forked child that has not exec'd yet, or has dropped both marks)
        grew = False
        for pid, parent in parents.items():
            if parent in members and pid not in members:
                members.add(pid)
                grew = True
    return members


def _carries(pid: int, needles: set[bytes], markers: set[str]) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            if needles & set(f.read().split(b"\0")):
                return True
        for fd in os.listdir(f"/proc/{pid}/fd"):
            if os.readlink(f"/proc/{pid}/fd/{fd}") in markers:
                return True
    except OSError:
        pass
    return False


def fd_link(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return "\0"  # no /proc (macOS): matches no descriptor


def killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
