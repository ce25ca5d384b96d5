"""Gateways built from several source trees side by side in one run, in front of the stdio
upstream of gateway_bench.py (server-everything, audit on, the same policy): alternating rounds
of 16 concurrent session clients, then a sequential stretch, each gateway's CPU per call (its
process's user + system time, children not counted), throughput and sequential latency. For a
change's effect on a shared machine whose load drifts: compare within a run, not across runs.

    .venv/bin/python bench/gateway_tree_ab.py TREE [TREE ...] [--rounds 4] [--calls 1600] [--sequential 100]

A TREE is a directory holding an `llmc_cli` package (e.g. `git archive COMMIT llmc_cli | tar -x -C
/tmp/old`), put first on PYTHONPATH of that gateway's `llmc serve`; `.` is this checkout.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gateway_bench as gb  # noqa: E402 - the bench's own helpers, beside this file


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("trees", nargs="+")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--calls", type=int, default=1600, help="concurrent calls per gateway and round")
    parser.add_argument("--sequential", type=int, default=100, help="sequential calls per gateway and round")
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    server = f'command = "{gb.EVERYTHING}"\nargs = ["stdio"]\n'
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        targets = []
        for i, tree in enumerate(args.trees):
            env_before = os.environ.get("PYTHONPATH")
            os.environ["PYTHONPATH"] = str(Path(tree).resolve())
            try:
                targets.append(gb.llmc_gateway(tmp, f"tree{i}", server, stack, []))
            finally:
                if env_before is None:
                    os.environ.pop("PYTHONPATH", None)
                else:
                    os.environ["PYTHONPATH"] = env_before
        callers = {i: [t.caller() for _ in range(args.clients)] for i, t in enumerate(targets)}
        for group in callers.values():
            for caller in group:
                for _ in range(10):  # warm: the upstream and every session
                    caller.call()
        cpu: dict[int, list[float]] = {i: [] for i in callers}
        rate: dict[int, list[float]] = {i: [] for i in callers}
        latency: dict[int, list[float]] = {i: [] for i in callers}
        per_client = args.calls // args.clients
        load = os.getloadavg()
        for round_ in range(args.rounds):
            order = list(callers) if round_ % 2 == 0 else list(reversed(callers))
            for i in order:
                pid = targets[i].proc.pid  # type: ignore[union-attr]
                before, started = gb.cpu_seconds(pid), time.perf_counter()
                threads = [threading.Thread(target=lambda c=c: [c.call() for _ in range(per_client)]) for c in callers[i]]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                elapsed = time.perf_counter() - started
                cpu[i].append((gb.cpu_seconds(pid) - before) / (per_client * args.clients))
                rate[i].append(per_client * args.clients / elapsed)
                latency[i] += [callers[i][0].call() for _ in range(args.sequential)]
        print(f"load at the start {load}, at the end {os.getloadavg()}; {args.rounds} rounds of "
              f"{args.clients} clients x {per_client} calls, then {args.sequential} sequential calls, per gateway")
        print("| tree | gateway CPU/call (rounds) | calls/s | sequential median |")
        print("|---|---|---|---|")
        for i, tree in enumerate(args.trees):
            rounds = " ".join(f"{c * 1e6:.0f}" for c in cpu[i])
            print(f"| {tree} | {statistics.median(cpu[i]) * 1e6:.0f} µs ({rounds}) | {statistics.median(rate[i]):.0f} "
                  f"| {statistics.median(latency[i]) * 1000:.2f} ms |")
        for group in callers.values():
            for caller in group:
                gb.close_session(caller)


if __name__ == "__main__":
    main()
