"""A 1,000-call `llmc call --batch` against the floor: a standard-library loop making the same
1,000 tools/call requests over one stdio connection to the same server.

    .venv/bin/python bench/batch_bench.py [--calls N] [--rounds R] [--compare OTHER_LLMC]

Both talk to server-everything's `echo` over stdio. llmc's batch also applies the policy and
writes two audit records per call (fsync'd), which the floor does not.

The server runs under bench/rusage_of.py on every side, so each run's CPU is split by process:
the server's (user/system) and its client's (the floor's Python loop, or llmc), the wrapper's
own start subtracted. `--compare OTHER_LLMC` runs a second build in the same rounds, alternating
(floor, llmc, other), and prints each one's ratios to the floor of its own round. Before the
rounds every side runs once untimed (`--warmup`): the first run of a build meets a new state
directory (its audit log, servers.json) and cold file caches, which no later round does.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = str(ROOT / "tests" / "node" / "node_modules" / ".bin" / "mcp-server-everything")
# LLMC_BENCH_LLMC: another build's llmc to measure (an A/B of two trees from one venv)
LLMC = os.environ.get("LLMC_BENCH_LLMC") or str(Path(sys.executable).parent / "llmc")

FLOOR = r"""
import json, subprocess, sys
n, server = int(sys.argv[1]), sys.argv[2:]
p = subprocess.Popen(server, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
def send(m):
    p.stdin.write((json.dumps(m) + "\n").encode()); p.stdin.flush()
def wait(i):
    for line in p.stdout:
        m = json.loads(line)
        if m.get("id") == i:
            return m
send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "floor", "version": "0"}}})
wait(0)
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
for i in range(1, n + 1):
    send({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "echo", "arguments": {"message": str(i)}}})
    print(json.dumps(wait(i)["result"]))
p.stdin.close(); p.terminate(); p.wait()
"""


CPU: list[float] = []  # the CPU seconds (user + system) of each timed() run's processes, the server's included
WRAPPER = str(ROOT / "bench" / "rusage_of.py")


class Run:
    """One timed run: wall seconds, and CPU seconds split into the client's and the server's."""

    def __init__(self, wall: float, user: float, system: float, server: dict[str, float]) -> None:
        self.wall = wall
        self.server_user, self.server_system = server["user"], server["system"]
        wrapper = server["self_user"] + server["self_system"]
        self.client_user = user - self.server_user - server["self_user"]
        self.client_system = system - self.server_system - server["self_system"]
        self.cpu = user + system - wrapper  # what the client and the server spent

    @property
    def server(self) -> float:
        return self.server_user + self.server_system

    @property
    def client(self) -> float:
        return self.client_user + self.client_system

    def split(self) -> str:
        return (
            f"CPU {self.cpu:.2f} s = client {self.client:.2f} (user {self.client_user:.2f}, system {self.client_system:.2f})"
            f" + server {self.server:.2f} (user {self.server_user:.2f}, system {self.server_system:.2f}); wall {self.wall:.2f} s"
        )


def timed(argv: list[str], stdin: str | None, env: dict[str, str], report: str) -> Run:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode:
        raise SystemExit(f"{argv[:3]} failed: {proc.stderr[-500:]}")
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    with open(report, encoding="utf-8") as fh:
        server = json.load(fh)
    os.unlink(report)
    return Run(elapsed, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, server)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs of every side before the rounds")
    parser.add_argument("--compare", metavar="OTHER_LLMC", help="another build's llmc, run in the same rounds")
    args = parser.parse_args()
    n = args.calls
    state = tempfile.mkdtemp(prefix="llmc-bench-")
    env = {**os.environ, "LLMC_STATE_DIR": state, "LLMC_CONFIG_DIR": state}
    # Users run with bytecode caches; without them every run compiles every module again.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    report = os.path.join(state, "server-rusage.json")
    server = f"{sys.executable} -S {WRAPPER} {report} {SERVER}"
    lines = "".join(json.dumps({"id": i, "tool": "echo", "arguments": {"message": str(i)}}) + "\n" for i in range(n))
    builds = {"llmc": LLMC, **({"other": args.compare} if args.compare else {})}
    ratios: dict[str, list[float]] = {name: [] for name in builds}
    floor_argv = [sys.executable, "-c", FLOOR, str(n), sys.executable, "-S", WRAPPER, report, SERVER]
    for _ in range(args.warmup):
        timed(floor_argv, None, env, report)
        for llmc in builds.values():
            timed([llmc, "call", "--batch", "-", "--yes", "--stdio", server], lines, env, report)
    for round_ in range(args.rounds):
        floor = timed(floor_argv, None, env, report)
        print(f"round {round_ + 1}, {n} calls: floor  {floor.split()}")
        for name, llmc in builds.items():
            run = timed([llmc, "call", "--batch", "-", "--yes", "--stdio", server], lines, env, report)
            ratios[name].append(run.cpu / floor.cpu)
            print(f"round {round_ + 1}, {n} calls: {name:6} {run.split()}")
            print(
                f"  {name}: CPU ratio {run.cpu / floor.cpu:.2f}, wall ratio {run.wall / floor.wall:.2f};"
                f" client {run.client:.2f} s vs floor's {floor.client:.2f} s (+{(run.client - floor.client) / n * 1e3:.3f} ms a call),"
                f" server {run.server:.2f} s vs floor's {floor.server:.2f} s"
            )
    for name, values in ratios.items():
        shown = ", ".join(f"{v:.2f}" for v in values)
        print(f"{name} ({builds[name]}): CPU ratio to the floor, median {median(values):.2f} ({shown})")


if __name__ == "__main__":
    main()
