"""The audit path alone: a Deferred over an AuditLog (the gateway's and the batch's trail), each
"call" a decision through record_before_actions (fsync'd before it returns) and an outcome through
record, by one thread and by 16 at once; CPU per call, context switches and calls/s of the process.
Several trees A/B in one run, alternating (each tree's .venv python, -P, so its own code loads):

    .venv/bin/python bench/audit_bench.py /work/main . [--rounds 3] [--calls 100] [--threads 16]

The log is in a temporary directory (its file system decides the fsync's cost).
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

SCRIPT = r"""
import os, resource, sys, tempfile, threading, time
from llmc_cli.audit import AuditLog, Deferred
threads, calls = int(sys.argv[1]), int(sys.argv[2])
record = {"event": "decision", "decision": "allow", "server": "ev", "tool": "echo", "arguments": {"message": "hello"},
          "user": "u", "host": "h", "pid": 1, "profile": "default", "rule": "default", "command": "serve"}
with tempfile.TemporaryDirectory() as tmp:
    log = AuditLog(os.path.join(tmp, "audit.jsonl"))
    log.append(record)
    with Deferred(log) as trail:
        def work():
            for _ in range(calls):
                trail.record_before_actions([record])
                trail.record({"event": "outcome", "outcome": "ok"}, before_action=False)
        before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        workers = [threading.Thread(target=work) for _ in range(threads)]
        for w in workers: w.start()
        for w in workers: w.join()
        after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - start
    n = threads * calls
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / n * 1e6
    switches = (after.ru_nvcsw - before.ru_nvcsw + after.ru_nivcsw - before.ru_nivcsw) / n
    print(f"{cpu:.0f} us CPU/call, {switches:.1f} switches/call, {n / wall:.0f} calls/s, {wall / calls * 1e3:.2f} ms wall per thread's call")
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("trees", nargs="+")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args()
    with open("/proc/loadavg") as fh:
        print(f"load at the start: {fh.read().split()[:3]}")
    for threads in (1, args.threads):
        for round_ in range(1, args.rounds + 1):
            for tree in args.trees:
                python = str(Path(tree).resolve() / ".venv" / "bin" / "python")
                out = subprocess.run(
                    [python, "-P", "-c", SCRIPT, str(threads), str(args.calls)],
                    capture_output=True,
                    text=True,
                    timeout=600,
                    check=True,
                )
                print(f"{threads:2d} threads, round {round_}, {tree}: {out.stdout.strip()}")


if __name__ == "__main__":
    main()
