"""What OpenTelemetry costs: the same 200 calls over stdio to the SDK test server with telemetry
off, on (exporting to a local OTLP receiver that decodes what it gets), and on with a collector
that accepts connections and never answers; alternating rounds, medians. Two measurements:

- per call: a process opens the catalog, makes one call (start-up), then times only its loop of
  200 calls through services.call_tool (policy, audit, the MCP request: what `llmc call` does for
  each call); the export runs in the SDK's background thread during the loop and is counted.
  This is the per-call overhead (target: at most 1 ms), free of start-up noise.
- whole command: `llmc call --batch` of 200 calls and of 1 call, as a user runs it (start-up,
  SDK import and the final bounded flush included).

    .venv/bin/python bench/otel_bench.py [--calls 200] [--rounds 5]

Also: how many OpenTelemetry modules a call imports when off (must be 0). Prints; never
asserts; exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.telemetry.receiver import Receiver  # noqa: E402 - the tests' receiver, reused

LLMC = str(Path(sys.executable).parent / "llmc")
SERVER = f"{sys.executable} {ROOT / 'tests' / 'peers' / 'sdk_server.py'}"


def silent_collector() -> tuple[str, socket.socket]:
    """A port that accepts and never replies: the worst a collector can do."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}", listener


LOOP = """
import sys, time
from llmc_cli import services, telemetry
from llmc_cli.audit import mask_secrets
from llmc_cli.cli.targets import adhoc_spec
from llmc_cli.config.profiles import load_profile
from llmc_cli.model import ToolCall
otel, server, calls = sys.argv[1] == "on", sys.argv[2], int(sys.argv[3])
if otel:
    telemetry.enable("llmc call", mask_secrets)
profile = load_profile(None)
catalog = services.open_catalog(None, (), adhoc_spec(server, None, (), None, (), "auto", None))
invocation = services.Invocation(profile=profile, command="call", caller="human")
name = next(iter(catalog.specs))
services.call_tool(catalog, invocation, ToolCall(name, "add", {"a": 0, "b": 1}))  # start-up
started, cpu = time.perf_counter(), time.process_time()
for i in range(calls):
    services.call_tool(catalog, invocation, ToolCall(name, "add", {"a": i, "b": 1}))
print(time.perf_counter() - started, time.process_time() - cpu)
catalog.close()
telemetry.shutdown()
"""


def loop(env: dict[str, str], otel: bool, calls: int) -> tuple[float, float]:
    """Seconds for `calls` calls in one process, start-up and the final flush excluded: wall
    time, and CPU time of llmc's process (all its threads, the exporter's included; the server's
    excluded, the same in every mode). CPU time is what telemetry adds when the machine is busy."""
    proc = subprocess.run([sys.executable, "-c", LOOP, "on" if otel else "off", SERVER, str(calls)],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"loop failed ({proc.returncode}): {proc.stderr[-500:]}")
    wall, cpu = proc.stdout.split()[:2]
    return float(wall), float(cpu)


def run(batch: str, env: dict[str, str], otel: bool) -> float:
    argv = [LLMC, *(["--otel"] if otel else []), "call", "--stdio", SERVER, "--batch", batch]
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"llmc failed ({proc.returncode}): {proc.stderr[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, Receiver() as receiver:
        batch, one = Path(tmp) / "calls.jsonl", Path(tmp) / "one.jsonl"
        batch.write_text("".join(json.dumps({"tool": "add", "arguments": {"a": i, "b": 1}}) + "\n"
                                 for i in range(args.calls)))
        one.write_text(json.dumps({"tool": "add", "arguments": {"a": 1, "b": 1}}) + "\n")
        base = {**os.environ, "LLMC_STATE_DIR": f"{tmp}/state", "LLMC_CONFIG_DIR": f"{tmp}/config"}
        base.pop("LLMC_OTEL", None)
        dead_url, dead = silent_collector()
        modes = {
            "off": (base, False),
            "on": ({**base, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}, True),
            "on, silent collector": ({**base, "OTEL_EXPORTER_OTLP_ENDPOINT": dead_url}, True),
        }
        times: dict[str, list[float]] = {name: [] for name in modes}
        single: dict[str, list[float]] = {name: [] for name in modes}  # start-up and flush: the fixed part
        loops: dict[str, list[float]] = {name: [] for name in modes}
        cpus: dict[str, list[float]] = {name: [] for name in modes}
        for _ in range(args.rounds):
            for name, (env, otel) in modes.items():
                wall, cpu = loop(env, otel, args.calls)
                loops[name].append(wall)
                cpus[name].append(cpu)
                times[name].append(run(str(batch), env, otel))
                single[name].append(run(str(one), env, otel))
        dead.close()
        probe = ("import sys; from llmc_cli.cli.main import main\ntry: main(['call', '--stdio', %r, 'add', 'a=1', 'b=2'])\n"
                 "except SystemExit: pass\nprint(len([m for m in sys.modules if m.startswith('opentelemetry')]), "
                 "file=sys.stderr)") % SERVER
        imported = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=base)
        spans = len(receiver.got.spans)
    loop_off = statistics.median(loops["off"]) / args.calls
    cpu_off = statistics.median(cpus["off"]) / args.calls
    print(f"{args.calls} calls through services.call_tool in one process (start-up and final flush excluded), "
          f"median of {args.rounds} alternating rounds")
    print(f"{'mode':<24}{'loop s':>9}{'wall ms/call':>14}{'added':>9}{'CPU ms/call':>13}{'added':>9}")
    for name, values in loops.items():
        per_call = statistics.median(values) / args.calls
        cpu = statistics.median(cpus[name]) / args.calls
        print(f"{name:<24}{statistics.median(values):>9.3f}{per_call * 1000:>14.3f}{(per_call - loop_off) * 1000:>+9.3f}"
              f"{cpu * 1000:>13.3f}{(cpu - cpu_off) * 1000:>+9.3f}")
    print()
    off = statistics.median(times["off"])
    off_marginal = (off - statistics.median(single["off"])) / (args.calls - 1)
    print(f"{args.calls} calls through one `llmc call --batch` (and a 1-call batch for the fixed part), "
          f"median of {args.rounds} alternating rounds")
    print(f"{'mode':<24}{'batch s':>9}{'vs off':>8}{'1 call s':>10}{'per call ms':>13}{'added per call ms':>19}")
    for name, values in times.items():
        median, fixed = statistics.median(values), statistics.median(single[name])
        marginal = (median - fixed) / (args.calls - 1)
        print(f"{name:<24}{median:>9.3f}{median / off:>7.2f}x{fixed:>10.3f}{marginal * 1000:>13.2f}"
              f"{(marginal - off_marginal) * 1000:>+19.2f}")
    print(f"spans the receiver decoded: {spans}")
    print(f"OpenTelemetry modules imported by a call with telemetry off: {imported.stderr.strip().splitlines()[-1]}")


if __name__ == "__main__":
    main()
