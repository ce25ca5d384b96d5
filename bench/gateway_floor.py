"""How low can a gateway in this stack go? Sequential calls, interleaved call by call (gateway_seq_ab's
method), through: the direct pipes; three minimal Python proxies on the gateway's own stack (uvicorn,
httptools, uvloop) in front of one stdio server-everything, doing nothing but forward the body
(no policy, no audit, no session checks); supergateway `--stateful`; and llmc's gateway of each TREE
(gateway_bench's profile: policy and audit on). The proxies:

- `loop`: the upstream's pipes read and written on the event loop thread (no thread hop at all;
  a slow call would stall every other host: the floor, not a design).
- `hop`: the upstream exchange in one worker thread (`run_in_executor`), as llmc's gateway does:
  what the loop -> worker -> loop hand-offs cost.
- `hop+sync`: the same, and a record appended and fdatasynced before each call is sent: the floor
  of a gateway that keeps llmc's audit guarantee (a decision durable before the call runs).
- `hop+overlap`: the record appended before the call is sent and fdatasynced while the upstream
  works (durable before the reply, not before the call).

    .venv/bin/python bench/gateway_floor.py [--peers] [TREE ...] CALLS
"""

import json
import os
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gateway_bench as gb

PROXY = r'''
import asyncio, json, os, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
import uvicorn

mode, port, log, everything = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
node = subprocess.Popen([everything, "stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL)
fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
pool = ThreadPoolExecutor(1)
RECORD = json.dumps({"event": "decision", "tool": "echo", "allowed": True, "pad": "x" * 300}).encode() + b"\n"


def exchange(body, overlap=False):
    want = json.loads(body)["id"]
    node.stdin.write(body + b"\n")
    node.stdin.flush()
    if overlap:  # the record's sync while the upstream works (llmc's [audit] sync = "before_reply")
        os.fdatasync(fd)
    while True:
        line = node.stdout.readline()
        if json.loads(line).get("id") == want:
            return line.rstrip(b"\n")


def work(body):
    if mode in ("hop+sync", "hop+overlap"):
        os.write(fd, RECORD)
    if mode == "hop+sync":
        os.fdatasync(fd)
    return exchange(body, overlap=mode == "hop+overlap")


exchange(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "floor", "version": "1"}}}).encode())
node.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
node.stdin.flush()


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    headers = [(b"content-type", b"application/json")]
    if scope["method"] != "POST":
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"{}"})
        return
    request = json.loads(body)
    if "id" not in request:
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    if request["method"] == "initialize":
        headers.append((b"mcp-session-id", b"s1"))
        reply = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {
            "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "floor", "version": "1"}}}).encode()
    elif mode == "loop":
        reply = exchange(body)
    else:
        reply = await asyncio.get_running_loop().run_in_executor(pool, work, body)
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": reply})


uvicorn.run(app, host="127.0.0.1", port=port, loop="uvloop", http="httptools", lifespan="off",
            log_level="error", access_log=False)
'''


def proxy(tmp: str, mode: str, stack: ExitStack) -> gb.Target:
    script = Path(tmp) / "floor_proxy.py"
    script.write_text(PROXY)
    port = gb.free_port()
    proc = gb.start([sys.executable, str(script), mode, str(port), f"{tmp}/{mode}.log", str(gb.EVERYTHING)],
                    stack, log=Path(tmp) / f"{mode}.err")
    gb.wait_up(port, "/mcp", proc)
    return gb.Target(f"proxy `{mode}`", "stdio", port, "echo", proc)


def main() -> None:
    args = sys.argv[1:]
    peers = "--peers" in args
    args = [a for a in args if a != "--peers"]
    if not args or not args[-1].isdigit() or any(a.startswith("-") for a in args):
        sys.exit(__doc__.strip().splitlines()[-1].strip().replace(".venv/bin/python ", "usage: "))
    trees, n = args[:-1], int(args[-1])
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        direct = gb.StdioCaller([str(gb.EVERYTHING), "stdio"])
        stack.callback(direct.close)
        callers: dict[str, gb.Caller | gb.StdioCaller] = {"direct (pipes)": direct}
        pids: dict[str, int] = {}  # the proxy's process, whose CPU a call is counted (upstream not)
        for mode in ("loop", "hop", "hop+sync", "hop+overlap"):
            t = proxy(tmp, mode, stack)
            callers[t.name] = t.caller()
            pids[t.name] = t.proc.pid  # type: ignore[union-attr]
        if peers:
            port = gb.free_port()
            proc = gb.start([str(gb.install_supergateway()), "--stdio", f"{gb.EVERYTHING} stdio", "--outputTransport",
                             "streamableHttp", "--stateful", "--sessionTimeout", "3600000", "--port", str(port),
                             "--logLevel", "none"], stack)
            gb.wait_up(port, "/mcp", proc)
            callers["supergateway --stateful"] = gb.Caller(port, "echo")
            pids["supergateway --stateful"] = proc.pid
        for i, tree in enumerate(trees or [""]):
            if tree:
                os.environ["PYTHONPATH"] = str(Path(tree).resolve())
            t = gb.llmc_gateway(tmp, f"t{i}", gb.STDIO_UP, stack, [])
            os.environ.pop("PYTHONPATH", None)
            callers[f"llmc {tree or '(installed)'}"] = t.caller()
            pids[f"llmc {tree or '(installed)'}"] = t.proc.pid  # type: ignore[union-attr]
        for c in callers.values():
            for _ in range(50):
                c.call()
        lat: dict[str, list[float]] = {k: [] for k in callers}
        load = os.getloadavg()
        cpu = {k: gb.cpu_seconds(pid) for k, pid in pids.items()}
        for _ in range(n):
            for k, c in callers.items():
                lat[k].append(c.call())
        cpu = {k: (gb.cpu_seconds(pid) - cpu[k]) / n for k, pid in pids.items()}

        def q(xs: list[float], p: float) -> float:
            return sorted(xs)[int(len(xs) * p)] * 1e3

        floor = {p: q(lat["direct (pipes)"], p) for p in (0.1, 0.25, 0.5)}
        print(f"load {load} -> {os.getloadavg()}; {n} sequential calls each, interleaved call by call")
        print("| target | p10 | p25 | median | mean | added at p10 / p25 / median | proxy CPU a call |")
        print("|---|---|---|---|---|---|---|")
        for k, xs in lat.items():
            v = {p: q(xs, p) for p in (0.1, 0.25, 0.5)}
            print(f"| {k} | {v[0.1]:.2f} ms | {v[0.25]:.2f} ms | {v[0.5]:.2f} ms | {statistics.mean(xs) * 1e3:.2f} ms | "
                  f"+{v[0.1] - floor[0.1]:.2f} / +{v[0.25] - floor[0.25]:.2f} / +{v[0.5] - floor[0.5]:.2f} ms | "
                  + (f"{cpu[k] * 1e6:.0f} µs |" if k in cpu else "|"))


if __name__ == "__main__":
    main()
