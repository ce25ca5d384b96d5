"""Where the stdio server's CPU goes under each client of bench/batch_bench.py: server-everything's
CPU split into phases by a probe preloaded into node (bench/server_phases_probe.js):

    start  until the first tools/call request is read (node's start-up, initialize, the one-off
           exchanges: llmc's server/discover and tools/list)
    calls  from the first tools/call read to the N-th (N-1 round trips)
    tail   from the N-th read to the process's end (the last call, stdin's end, the exit)

and, for the calls phase, node's main thread apart from its other threads (V8's platform workers)
by /proc/self/task/*/schedstat. The whole server's CPU comes from bench/rusage_of.py, as in
batch_bench. Clients, run alternating in each round (the order rotated and reversed every round):

    floor          batch_bench's standard-library loop
    llmc           LLMC_BENCH_LLMC (or this venv's llmc); `other`: --compare OTHER_LLMC
    work:US        the floor busy for US microseconds after each reply, before its next request
    work-after:US  the floor busy for US microseconds after sending each request

    .venv/bin/python bench/server_phases.py --rounds 13 floor llmc work:100 work-after:100

Printed: each client's medians, and each phase's difference to the first client within a round
(the load moves a round's figures together; the paired difference is steadier than either).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import batch_bench as bb

PROBE = str(Path(__file__).resolve().parent / "server_phases_probe.js")
AFTER_REPLY = '    print(json.dumps(wait(i)["result"]))\n'
AFTER_SEND = '    send({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "echo", "arguments": {"message": str(i)}}})\n'


def busy(code: str, hook: str, micros: float) -> str:
    assert hook in code
    spin = f"    t = time.perf_counter()\n    while time.perf_counter() - t < {micros / 1e6!r}: pass\n"
    return code.replace(hook, hook + spin).replace("import json,", "import time, json,")


def client(name: str, n: int, server: list[str], compare: str | None) -> tuple[list[str], str | None]:
    """The command line of a client, and its stdin."""
    if name in ("llmc", "other"):
        llmc = bb.LLMC if name == "llmc" else compare
        if not llmc:
            raise SystemExit("`other` needs --compare OTHER_LLMC")
        lines = "".join(json.dumps({"id": i, "tool": "echo", "arguments": {"message": str(i)}}) + "\n" for i in range(n))
        return [llmc, "call", "--batch", "-", "--yes", "--stdio", " ".join(server)], lines
    code = bb.FLOOR
    if name.startswith("work:"):
        code = busy(code, AFTER_REPLY, float(name[5:]))
    elif name.startswith("work-after:"):
        code = busy(code, AFTER_SEND, float(name[11:]))
    elif name != "floor":
        raise SystemExit(f"unknown client {name!r}")
    return [sys.executable, "-c", code, str(n), *server], None


def phases(probe: dict, total: float) -> dict[str, float]:
    def cpu(tag: str) -> float:
        return probe[tag]["user"] + probe[tag]["system"] if tag in probe else float("nan")

    first, last = probe.get("first"), probe.get("last")
    out = {"server": total, "start": cpu("first"), "calls": cpu("last") - cpu("first"), "tail": total - cpu("last")}
    if first and last:
        main = min(last["threads"], key=int)
        ran = {tid: last["threads"][tid][0] - first["threads"][tid][0] for tid in last["threads"] if tid in first["threads"]}
        out["calls main thread"] = ran.get(main, float("nan"))
        out["calls other threads"] = sum(v for tid, v in ran.items() if tid != main)
        out["calls wall"] = last["at"] - first["at"]
        out["calls voluntary switches"] = last["voluntary"] - first["voluntary"]
    out["exited at EOF"] = 1.0 if "exit" in probe else 0.0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("clients", nargs="+")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--compare", metavar="OTHER_LLMC")
    args = parser.parse_args()
    state = tempfile.mkdtemp(prefix="llmc-bench-")
    env = {**os.environ, "LLMC_STATE_DIR": state, "LLMC_CONFIG_DIR": state}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    report = os.path.join(state, "server-rusage.json")
    probe_out = report + ".probe"
    # llmc passes the server an allow-listed environment: the probe's variables go through env(1)
    server = ["env", f"NODE_OPTIONS=--require={PROBE}", f"PROBE_OUT={probe_out}", f"PROBE_N={args.calls}"]
    server += [sys.executable, "-S", bb.WRAPPER, report, bb.SERVER]
    names = args.clients
    results: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    print(f"load {os.getloadavg()[0]:.2f} at {time.strftime('%H:%M:%S')}", flush=True)
    for round_ in range(args.rounds):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order[::-1] if round_ % 2 else order:
            argv, stdin = client(name, args.calls, server, args.compare)
            run = bb.timed(argv, stdin, env, report)
            with open(probe_out, encoding="utf-8") as fh:
                probe = json.load(fh)
            os.unlink(probe_out)
            results[name].append({**phases(probe, run.server), "client": run.client, "wall": run.wall})
        print(f"round {round_ + 1}: " + ", ".join(f"{n} {results[n][-1]['server']:.3f}" for n in names), flush=True)
    print(f"load {os.getloadavg()[0]:.2f} at {time.strftime('%H:%M:%S')}")
    keys = list(results[names[0]][0])
    for name in names:
        shown = ", ".join(f"{k} {statistics.median(r[k] for r in results[name]):.3f}" for k in keys)
        print(f"{name}: medians (s; counts): {shown}")
    for name in names[1:]:
        for k in ("server", "start", "calls", "tail", "calls main thread", "calls other threads"):
            diffs = [a[k] - b[k] for a, b in zip(results[name], results[names[0]], strict=True)]
            print(f"{name} - {names[0]}, {k}: median {statistics.median(diffs):+.3f} ({', '.join(f'{d:+.3f}' for d in diffs)})")


if __name__ == "__main__":
    main()
