"""What a misrouted request costs with `llmc serve --workers 2`: the same session's tools/call
sent through the worker that holds the session and through the other one (which relays it over
its private Unix socket, gateway/forward.py), alternating blocks in one run: the sequential
median of each, and the gateway's CPU per call (both workers and the supervisor; the upstream
not counted).

    .venv/bin/python bench/workers_relay.py [--calls 600] [--blocks 6]

Upstream: @modelcontextprotocol/server-everything over stdio (as gateway_bench.py's stdio
scenario), tool `echo`; audit on, the same policy as gateway_bench.py.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gateway_bench import EVERYTHING, VERSION, cpu_seconds, llmc_gateway, reply_of, workers_of  # noqa: E402


def connection_to(port: int, worker: int) -> http.client.HTTPConnection:
    for _ in range(200):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("GET", "/healthz")
        response = conn.getresponse()
        response.read()
        if response.getheader("llmc-worker") == str(worker):
            return conn
        conn.close()
    raise SystemExit(f"no connection reached worker {worker}")


def post(conn: http.client.HTTPConnection, message: dict[str, object], session: str | None) -> tuple[dict[str, object], str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if session:
        headers.update({"Mcp-Session-Id": session, "MCP-Protocol-Version": VERSION})
    conn.request("POST", "/mcp", body=json.dumps(message), headers=headers)
    response = conn.getresponse()
    data = response.read()
    if "id" not in message:
        return {}, response.getheader("Mcp-Session-Id", "")
    return reply_of(data, response.getheader("Content-Type", ""), int(message["id"])), response.getheader("Mcp-Session-Id", "")  # type: ignore[call-overload]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=600, help="calls per path")
    parser.add_argument("--blocks", type=int, default=6, help="alternating blocks per path")
    args = parser.parse_args()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        target = llmc_gateway(tmp, "relay", f'command = "{EVERYTHING}"\nargs = ["stdio"]\n', stack, [], 2)
        assert target.proc is not None
        pids = [target.proc.pid, *workers_of(target.proc.pid)]
        owner_conn = connection_to(target.port, 0)
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}
        _, session = post(owner_conn, init, None)
        assert session.endswith(".0"), session
        post(owner_conn, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        other_conn = connection_to(target.port, 1)
        paths = {"owner (worker 0)": owner_conn, "relayed (through worker 1)": other_conn}
        latency: dict[str, list[float]] = {name: [] for name in paths}
        cpu: dict[str, float] = dict.fromkeys(paths, 0.0)
        ids = 0
        per_block = max(1, args.calls // args.blocks)
        for block in range(args.blocks + 1):  # block 0 warms both paths, untimed
            for name, conn in paths.items():
                before = sum(cpu_seconds(pid) for pid in pids)
                for _ in range(per_block):
                    ids += 1
                    call = {"jsonrpc": "2.0", "id": ids, "method": "tools/call",
                            "params": {"name": "up.echo", "arguments": {"message": "hi"}}}
                    started = time.perf_counter()
                    reply, _ = post(conn, call, session)
                    elapsed = time.perf_counter() - started
                    assert isinstance(reply.get("result"), dict), reply
                    if block:
                        latency[name].append(elapsed)
                if block:
                    cpu[name] += sum(cpu_seconds(pid) for pid in pids) - before
        print(f"load at the start: {load}; {os.cpu_count()} CPUs; {per_block * args.blocks} sequential calls per path "
              f"in {args.blocks} alternating blocks\n")
        print("| path | sequential median | p90 | gateway CPU/call (all workers) |")
        print("|---|---|---|---|")
        for name in paths:
            times = sorted(latency[name])
            print(f"| {name} | {statistics.median(times) * 1000:.2f} ms | {times[int(len(times) * 0.9)] * 1000:.2f} ms "
                  f"| {cpu[name] / len(times) * 1e6:.0f} µs |")
        print(f"\nload after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
