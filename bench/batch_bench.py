"""A 1,000-call `llmc call --batch` against the floor: a standard-library loop making the same
1,000 tools/call requests over one stdio connection to the same server.

    .venv/bin/python bench/batch_bench.py [--calls N]

Both talk to server-everything's `echo` over stdio. llmc's batch also applies the policy and
writes two audit records per call (fsync'd), which the floor does not.
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
n, server = int(sys.argv[1]), sys.argv[2]
p = subprocess.Popen([server], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
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


def timed(argv: list[str], stdin: str | None, env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode:
        raise SystemExit(f"{argv[:3]} failed: {proc.stderr[-500:]}")
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000)
    n = parser.parse_args().calls
    state = tempfile.mkdtemp(prefix="llmc-bench-")
    env = {**os.environ, "LLMC_STATE_DIR": state, "LLMC_CONFIG_DIR": state}
    # Users run with bytecode caches; without them every run compiles every module again.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    lines = "".join(json.dumps({"id": i, "tool": "echo", "arguments": {"message": str(i)}}) + "\n" for i in range(n))
    floor = timed([sys.executable, "-c", FLOOR, str(n), SERVER], None, env)
    llmc = timed([LLMC, "call", "--batch", "-", "--yes", "--stdio", SERVER], lines, env)
    print(f"{n} calls: floor {floor:.2f} s, llmc --batch {llmc:.2f} s, ratio {llmc / floor:.2f}")
    # On a shared machine wall time follows the load; CPU time (both sides start the same server,
    # whose CPU counts on both) much less so.
    print(f"CPU (user + system, the server's included): floor {CPU[0]:.2f} s, llmc --batch {CPU[1]:.2f} s, ratio {CPU[1] / CPU[0]:.2f}")


if __name__ == "__main__":
    main()
