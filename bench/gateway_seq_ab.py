"""Sequential calls, one client per target, interleaved call by call (so the machine's load drifts
over all alike): the direct pipes floor, then each TREE's gateway (gateway_bench's setup: stdio
server-everything, policy and audit on). Prints p10/p25/median per target and the added latency
over the floor at each; on a loaded machine the lower percentiles say more than the median.
TREE@MODE benches that tree with [audit] sync = MODE (before_call, before_reply) in its profile;
a plain TREE's profile has no [audit] table (the default). A tree may be given more than once.

    .venv/bin/python bench/gateway_seq_ab.py TREE[@MODE] [TREE[@MODE] ...] CALLS
"""
import os, statistics, sys, tempfile
from contextlib import ExitStack
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
import gateway_bench as gb
if len(sys.argv) < 3 or not sys.argv[-1].isdigit() or any(a.startswith("-") for a in sys.argv[1:]):
    sys.exit(__doc__.strip().splitlines()[-1].strip().replace(".venv/bin/python ", "usage: "))
trees, n = sys.argv[1:-1], int(sys.argv[-1])
with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
    callers = {"direct (pipes)": gb.StdioCaller([str(gb.EVERYTHING), "stdio"])}
    stack.callback(callers["direct (pipes)"].close)
    for i, tree in enumerate(trees):
        path, _, mode = tree.partition("@")
        os.environ["PYTHONPATH"] = str(Path(path).resolve())
        t = gb.llmc_gateway(tmp, f"t{i}", gb.STDIO_UP, stack, [], sync=mode or None)
        del os.environ["PYTHONPATH"]
        callers[tree if tree not in callers else f"{tree} (#{i})"] = t.caller()
    for c in callers.values():
        for _ in range(50): c.call()
    lat = {k: [] for k in callers}
    load = os.getloadavg()
    for _ in range(n):
        for k, c in callers.items():
            lat[k].append(c.call())
    q = lambda xs, p: sorted(xs)[int(len(xs) * p)] * 1e3
    floor = {p: q(lat["direct (pipes)"], p) for p in (0.1, 0.25, 0.5)}
    print(f"load {load} -> {os.getloadavg()}; {n} sequential calls each, interleaved call by call")
    print("| target | p10 | p25 | median | added at p10 / p25 / median |")
    print("|---|---|---|---|---|")
    for k, xs in lat.items():
        v = {p: q(xs, p) for p in (0.1, 0.25, 0.5)}
        print(f"| {k} | {v[0.1]:.2f} ms | {v[0.25]:.2f} ms | {v[0.5]:.2f} ms | "
              f"+{v[0.1]-floor[0.1]:.2f} / +{v[0.25]-floor[0.25]:.2f} / +{v[0.5]-floor[0.5]:.2f} ms |")
    # On a loaded machine (2 cores shared) even p10 moves by a millisecond between two copies of a
    # tree: the lowest percentiles are the nearest to what each costs when it gets the CPU.
    low = {p: q(lat["direct (pipes)"], p) for p in (0.02, 0.05)}
    print("\n| target | p2 | p5 | added at p2 / p5 |")
    print("|---|---|---|---|")
    for k, xs in lat.items():
        v = {p: q(xs, p) for p in (0.02, 0.05)}
        print(f"| {k} | {v[0.02]:.2f} ms | {v[0.05]:.2f} ms | +{v[0.02]-low[0.02]:.2f} / +{v[0.05]-low[0.05]:.2f} ms |")
