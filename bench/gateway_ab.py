"""Two builds of the gateway side by side in one run: the same upstream, alternating rounds of
16 concurrent clients, then each one's median throughput, CPU per call and sequential latency.
For a change's effect on a machine whose speed drifts between runs (compare ratios, not runs).

    .venv/bin/python bench/gateway_ab.py OLD_LLMC NEW_LLMC [--rounds 6] [--calls 1600]

OLD_LLMC and NEW_LLMC are `llmc` executables (another checkout's venv, e.g. a git worktree of
the commit before). Both gateways serve the same profile in front of the SDK test server over
Streamable HTTP, audit on, each with its own state directory.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gateway_bench as gb  # noqa: E402 - the bench's own helpers, beside this file


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=1600)
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        up_port = gb.free_port()
        upstream = subprocess.Popen([sys.executable, str(gb.ROOT / "tests" / "peers" / "sdk_server.py"),
                                     "streamable-http", "--port", str(up_port), "--stateless", "--json"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        gateways: dict[str, tuple[int, subprocess.Popen[bytes]]] = {}
        try:
            gb.wait_up(up_port, "/mcp", upstream)
            profile = Path(tmp) / "bench.toml"
            profile.write_text(f'[servers.up]\nurl = "http://127.0.0.1:{up_port}/mcp"\n\n'
                               '[policy.hints."up.echo"]\nreadOnly = true\n')
            for name, executable in (("old", args.old), ("new", args.new)):
                port = gb.free_port()
                env = {**os.environ, "LLMC_CONFIG_DIR": f"{tmp}/config-{name}", "LLMC_STATE_DIR": f"{tmp}/state-{name}"}
                proc = subprocess.Popen([executable, "serve", "-p", str(profile), "--http", f"127.0.0.1:{port}"],
                                        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                gateways[name] = (port, proc)
                gb.wait_up(port, "/healthz", proc)
                gb.sequential(gb.Target(name, "HTTP", port, "up.echo", proc), 50)  # warm
            seen: dict[str, dict[str, list[float]]] = {name: {"rate": [], "cpu": [], "seq": []} for name in gateways}
            for round_ in range(args.rounds):
                for name in ("old", "new") if round_ % 2 == 0 else ("new", "old"):
                    port, proc = gateways[name]
                    cpu_before = gb.cpu_seconds(proc.pid)
                    target = gb.Target(name, "HTTP", port, "up.echo", proc)
                    rate, _ = gb.concurrent(target.caller, args.clients, args.calls)
                    seen[name]["cpu"].append((gb.cpu_seconds(proc.pid) - cpu_before) / args.calls * 1000)
                    seen[name]["rate"].append(rate)
                    seen[name]["seq"].append(statistics.median(gb.sequential(target, 200)) * 1000)
            direct = statistics.median(gb.sequential(gb.Target("direct", "HTTP", up_port), 300)) * 1000
            print(f"{args.clients} concurrent clients x {args.calls} calls, {args.rounds} alternating rounds; "
                  f"direct sequential median {direct:.2f} ms")
            for name in gateways:
                rates = seen[name]["rate"]
                print(f"  {name}: {statistics.median(rates):.0f} calls/s (rounds {' '.join(f'{r:.0f}' for r in rates)}), "
                      f"CPU {statistics.median(seen[name]['cpu']):.2f} ms per call, "
                      f"sequential median {statistics.median(seen[name]['seq']):.2f} ms")
            print(f"  new/old throughput: {statistics.median(seen['new']['rate']) / statistics.median(seen['old']['rate']):.2f}x")
        finally:
            for _, proc in gateways.values():
                proc.terminate()
                proc.wait(timeout=30)
            upstream.terminate()
            upstream.wait(timeout=30)


if __name__ == "__main__":
    main()
