"""Sequential `llmc call` invocations through a session keeper, against the same calls without
one, and against the floor: `python -c "import click"` plus one round trip to the keeper (a
stdlib client that attaches over the Unix socket and makes the same tools/call).

    .venv/bin/python bench/session_bench.py [--calls 200]

The server is the SDK test server over stdio (tests/peers/sdk_server.py), tool `echo`. Each
llmc call also loads the profile, applies the policy and writes two fsync'd audit records,
which the floor does not. Calls through the keeper alternate with the floor's; prints the
median wall time per call of each and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = [sys.executable, str(ROOT / "tests" / "peers" / "sdk_server.py")]
# LLMC_BENCH_LLMC: another build's llmc to measure (an A/B of two trees from one venv)
LLMC = os.environ.get("LLMC_BENCH_LLMC") or str(Path(sys.executable).parent / "llmc")

# The floor: interpreter start-up with click imported, then one attach + tools/call round trip.
FLOOR = r"""
import json, socket, sys
import click
sock = socket.socket(socket.AF_UNIX)
sock.connect(sys.argv[1])
stream = sock.makefile("rb")
def send(m):
    sock.sendall((json.dumps(m) + "\n").encode())
send({"llmc": "attach", "server": "t"})
stream.readline()
send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"message": "hi"}}})
assert json.loads(stream.readline())["id"] == 1
"""


CPU: dict[str, list[float]] = {}  # CPU seconds (user + system) of each run, by case


def seconds(argv: list[str], env: dict[str, str], case: str = "") -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
    if proc.returncode:
        raise SystemExit(f"{argv[:4]} failed: {proc.stderr[-500:]}")
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.setdefault(case, []).append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    calls = parser.parse_args().calls
    home = tempfile.mkdtemp(prefix="llmc-bench-")
    env = {**os.environ, "LLMC_STATE_DIR": f"{home}/s", "LLMC_CONFIG_DIR": f"{home}/c"}
    # Users run with bytecode caches; without them every run compiles every module again.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("LLMC_SESSION", None)
    subprocess.run([LLMC, "servers", "add", "t", "--", *SERVER], env=env, check=True, capture_output=True)
    started = subprocess.run([LLMC, "session", "start", "bench", "-s", "t", "--idle", "10m"], env=env,
                             capture_output=True, text=True)
    if started.returncode:
        raise SystemExit(f"session start failed: {started.stderr}")
    socket_path = json.loads(started.stdout)["socket"]
    try:
        call = [LLMC, "call", "t.echo", "message=hi", "--yes"]
        cases = {"keeper": [*call, "--session", "bench"], "floor": [sys.executable, "-c", FLOOR, socket_path]}
        times: dict[str, list[float]] = {name: [] for name in cases}
        for i in range(calls + 1):  # alternating, so load on a shared machine hits both alike
            for name, argv in cases.items():
                elapsed = seconds(argv, env, name)
                if i:  # the first round warms caches (bytecode, the page cache)
                    times[name].append(elapsed)
        # Without a session every call starts the server: a tenth as many, for the comparison.
        without = statistics.median(seconds(call, env) for _ in range(max(1, calls // 10)))
    finally:
        subprocess.run([LLMC, "session", "stop", "bench"], env=env, capture_output=True)
    keeper, floor = statistics.median(times["keeper"]), statistics.median(times["floor"])
    print(f"{calls} sequential calls, alternating, median per call: floor (import click + 1 round trip) {floor * 1000:.0f} ms, "
          f"through the keeper {keeper * 1000:.0f} ms, without a session {without * 1000:.0f} ms")
    print(f"keeper / floor {keeper / floor:.2f} (target 1.5), without / keeper {without / keeper:.2f}")
    # On a shared machine wall time follows the load; the CPU time of each process much less so.
    cpu_keeper, cpu_floor = statistics.median(CPU["keeper"][1:]), statistics.median(CPU["floor"][1:])
    print(f"CPU per call (user + system): floor {cpu_floor * 1000:.0f} ms, through the keeper {cpu_keeper * 1000:.0f} ms, "
          f"ratio {cpu_keeper / cpu_floor:.2f}")


if __name__ == "__main__":
    main()
