"""System calls of llmc's own process, by thread, from `strace -f -o FILE llmc ...` (which also
follows the servers it starts: `strace -f -c` counts theirs too). A thread is llmc's when it was
cloned with CLONE_THREAD from llmc's first thread or one of its threads.

    strace -f -o /tmp/b.strace llmc call --batch calls.jsonl --yes --stdio SERVER
    python bench/strace_threads.py /tmp/b.strace [CALLS]   (counts divided by CALLS)"""

from __future__ import annotations

import collections
import re
import sys

LINE = re.compile(r"(\d+)\s+(.*)")
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
    total: collections.Counter[str] = collections.Counter()
    for t in mine:
        total.update(counts[t])
    top = ", ".join(f"{k} {v / calls:.2f}" for k, v in total.most_common(12))
    print(f"llmc's process: {sum(total.values()) / calls:.2f} system calls (per {calls:g}): {top}")
    for t in sorted(mine, key=lambda t: -sum(counts[t].values()))[:6]:
        top = ", ".join(f"{k} {v / calls:.2f}" for k, v in counts[t].most_common(8))
        print(f"  thread {t}: {sum(counts[t].values()) / calls:.2f}: {top}")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 1.0)
