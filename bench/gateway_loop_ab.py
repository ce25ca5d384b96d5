"""The gateway on asyncio's event loop against uvloop's (the `fast` extra), side by side in one
run: two gateways like gateway_tree_ab.py's (server-everything on stdio, policy and audit on),
LLMC_EVENT_LOOP choosing each one's loop; alternating rounds of 16 clients, then 200 sequential
calls; the event loop thread's CPU per call (its /proc/PID/task/PID/stat), the process's, calls/s.

    .venv/bin/python bench/gateway_loop_ab.py [ROUNDS] [CALLS]     # default 6 3200
"""
import sys, os, time, tempfile, statistics, threading
from contextlib import ExitStack
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gateway_bench as gb
def tcpu(pid, tid):
    f = open(f"/proc/{pid}/task/{tid}/stat").read().rpartition(")")[2].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
def pcpu(pid):
    return gb.cpu_seconds(pid)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 6
calls = int(sys.argv[2]) if len(sys.argv) > 2 else 3200
with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
    server = f'command = "{gb.EVERYTHING}"\nargs = ["stdio"]\n'
    ts = {}
    for mode in ("asyncio", "uvloop"):
        os.environ["LLMC_EVENT_LOOP"] = mode
        ts[mode] = gb.llmc_gateway(tmp, mode, server, stack, [])
    callers = {m: [t.caller() for _ in range(16)] for m, t in ts.items()}
    for g in callers.values():
        for c in g:
            for _ in range(10): c.call()
    res = {m: {"loop": [], "proc": [], "rate": [], "seq": []} for m in ts}
    print("load", os.getloadavg())
    for r in range(rounds):
        for m in (list(ts) if r % 2 == 0 else list(reversed(list(ts)))):
            pid = ts[m].proc.pid
            l0, p0, t0 = tcpu(pid, pid), pcpu(pid), time.perf_counter()
            th = [threading.Thread(target=lambda c=c: [c.call() for _ in range(calls // 16)]) for c in callers[m]]
            [t.start() for t in th]; [t.join() for t in th]
            el = time.perf_counter() - t0
            res[m]["loop"].append((tcpu(pid, pid) - l0) / calls * 1e6)
            res[m]["proc"].append((pcpu(pid) - p0) / calls * 1e6)
            res[m]["rate"].append(calls / el)
            res[m]["seq"] += [callers[m][0].call() for _ in range(200)]
    print("load", os.getloadavg())
    for m, d in res.items():
        print(f"{m:8s} loop thread {statistics.median(d['loop']):6.0f} us/call  process {statistics.median(d['proc']):6.0f} us/call  rate {statistics.median(d['rate']):6.0f}/s  seq median {statistics.median(d['seq'])*1e3:.2f} ms p10 {sorted(d['seq'])[len(d['seq'])//10]*1e3:.2f}")
    for g in callers.values():
        for c in g: gb.close_session(c)
