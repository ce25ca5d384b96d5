"""System calls of llmc's own process, by thread, from `strace -f -o FILE llmc ...` (which also
follows the servers it starts: `strace -f -c` counts theirs too). A thread is llmc's when it was
cloned with CLONE_THREAD from llmc's first thread or one of its threads.

    strace -f -o /tmp/b.strace llmc call --batch calls.jsonl --yes --stdio SERVER
    python bench/strace_threads.py /tmp/b.strace [CALLS]   (counts divided by CALLS)

Then the calls' window alone, from the third to the last JSON-RPC message written by the thread
that writes most of them to one descriptor (a batch's worker writing its requests; the floor's
loop, whose first two are its handshake): every process's system calls in it, per message
written there, llmc's threads apart and the other processes (the server) together. The same of
the floor (bench/batch_bench.py's FLOOR script under strace) puts the two side by side:

    strace -f -o /tmp/f.strace python -c "$FLOOR" 1000 SERVER > /dev/null"""

from __future__ import annotations

import collections
import re
import sys

LINE = re.compile(r"(\d+)\s+(?:[\d:.]+\s+)?(.*)")  # (strace -tt: a time after the thread)
CALL = re.compile(r"([a-z0-9_]+)\(")


def main(path: str, calls: float) -> None:
    root: int | None = None
    process: dict[int, int] = {}  # thread id -> process id
    counts: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    pending: dict[int, str] = {}  # a call strace shows unfinished, by thread
    with open(path) as f:
        lines = f.read().splitlines()
    for text in lines:
        m = LINE.match(text)
        if not m:
            continue
        tid, rest = int(m.group(1)), m.group(2)
        if root is None:
            root = process[tid] = tid
        if rest.startswith("<... "):  # resumed: counted when it started
            name, whole = rest[5:].split(" ", 1)[0], pending.pop(tid, "") + rest
        else:
            c = CALL.match(rest)
            if not c:
                continue
            name, whole = c.group(1), rest
            counts[tid][name] += 1
            if rest.endswith("<unfinished ...>"):
                pending[tid] = rest
                continue
        if name in ("clone", "clone3", "fork", "vfork"):
            child = re.search(r"= (\d+)\s*$", whole)
            if child:
                new = int(child.group(1))
                process[new] = process.get(tid, tid) if "CLONE_THREAD" in whole else new
    mine = [t for t in counts if process.get(t) == root]
    window(lines, {t for t in process if process.get(t) == root})
    total: collections.Counter[str] = collections.Counter()
    for t in mine:
        total.update(counts[t])
    top = ", ".join(f"{k} {v / calls:.2f}" for k, v in total.most_common(12))
    print(f"llmc's process: {sum(total.values()) / calls:.2f} system calls (per {calls:g}): {top}")
    for t in sorted(mine, key=lambda t: -sum(counts[t].values()))[:6]:
        top = ", ".join(f"{k} {v / calls:.2f}" for k, v in counts[t].most_common(8))
        print(f"  thread {t}: {sum(counts[t].values()) / calls:.2f}: {top}")


WRITE = re.compile(r"(\d+)\s+(?:[\d:.]+\s+)?write\((\d+), \"\{\\\"jsonrpc\\\"")  # a JSON-RPC message written


def window(lines: list[str], mine: set[int]) -> None:
    """System calls between the first and last write of the busiest writer (see the docstring)."""
    writes: collections.Counter[tuple[int, str]] = collections.Counter()
    for text in lines:
        m = WRITE.match(text)
        if m and int(m.group(1)) in mine:
            writes[(int(m.group(1)), m.group(2))] += 1
    if not writes:
        return
    (writer, fd), _ = writes.most_common(1)[0]
    at = [i for i, text in enumerate(lines) if (m := WRITE.match(text)) and int(m.group(1)) == writer and m.group(2) == fd]
    at = at[2:]  # after a handshake's two messages (the floor's loop sends initialize itself)
    n = len(at) - 1
    if n < 1:
        return
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for text in lines[at[0] : at[-1]]:
        m = LINE.match(text)
        c = CALL.match(m.group(2)) if m else None
        if not m or not c:
            continue  # (a call resumed: counted when it started)
        tid = int(m.group(1))
        who = ("writer" if tid == writer else f"thread {tid}") if tid in mine else "other processes"
        counts[who][c.group(1)] += 1
    print(f"the window: {n} messages written to descriptor {fd} by thread {writer}; system calls a message:")
    for who, c in sorted(counts.items(), key=lambda kv: -sum(kv[1].values())):
        top = ", ".join(f"{k} {v / n:.3f}" for k, v in c.most_common(8))
        print(f"  {who}: {sum(c.values()) / n:.3f}: {top}")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 1.0)
