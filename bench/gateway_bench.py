"""tools/call through the gateway (`llmc serve -p P --http`) against the same calls made directly
to the same upstream, in one run; throughput with concurrent clients; memory per idle session.

    .venv/bin/python bench/gateway_bench.py [--calls 300] [--clients 16] [--concurrent-calls 1600] [--rounds 3]
                                            [--sessions 200]

The upstream is the SDK test server (tests/peers/sdk_server.py) over Streamable HTTP, stateless,
JSON replies, tool `echo`. The gateway fronts it over HTTP too, audit on (two fsync'd records
per call), policy evaluated. Both are driven by the same stdlib client: keep-alive HTTP/1.1,
2026-07-28 requests (no session), JSON replies. Memory: the gateway's RSS before and after
opening N initialize-era sessions, divided by N, before the timed calls (after them the sessions
fill memory the calls freed).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
LLMC = str(Path(sys.executable).parent / "llmc")
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(port: int, path: str, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(240):
        if proc.poll() is not None:
            sys.exit(f"server exited {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path)
            conn.getresponse().read()
            return
        except OSError:
            time.sleep(0.25)
    sys.exit("server did not come up")


class Caller:
    """One keep-alive connection making modern tools/call requests."""

    def __init__(self, port: int, tool: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.tool = tool
        self.ids = 0

    def call(self) -> float:
        self.ids += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.ids, "method": "tools/call",
                           "params": {"name": self.tool, "arguments": {"message": "hi"}, "_meta": META}})
        started = time.perf_counter()
        self.conn.request("POST", "/mcp", body=body, headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": self.tool})
        response = self.conn.getresponse()
        data = response.read()
        elapsed = time.perf_counter() - started
        if response.getheader("Content-Type", "").startswith("text/event-stream"):
            data = [line[6:] for line in data.splitlines() if line.startswith(b"data: ")][-1]
        reply = json.loads(data)
        assert "result" in reply and not reply["result"].get("isError"), reply
        return elapsed


def sequential(port: int, tool: str, calls: int) -> list[float]:
    caller = Caller(port, tool)
    caller.call()  # connect, warm caches
    return [caller.call() for _ in range(calls)]


def concurrent(port: int, tool: str, clients: int, calls: int) -> tuple[float, list[str]]:
    per_client = max(1, calls // clients)
    callers = [Caller(port, tool) for _ in range(clients)]
    for caller in callers:
        caller.call()
    barrier = threading.Barrier(clients + 1)
    errors: list[str] = []

    def work(caller: Caller) -> None:
        barrier.wait()
        for _ in range(per_client):
            try:
                caller.call()
            except (OSError, http.client.HTTPException) as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                caller.conn.close()  # http.client reconnects on the next request

    threads = [threading.Thread(target=work, args=(c,)) for c in callers]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return (per_client * clients - len(errors)) / (time.perf_counter() - started), errors


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fsync_floor(directory: str, writes: int = 50) -> float:
    """Median seconds of appending one audit-sized line and fsyncing it, in this directory: the
    least a durable decision record costs on this disk, whoever writes it."""
    path = Path(directory) / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    times = []
    try:
        for _ in range(writes):
            started = time.perf_counter()
            os.write(fd, b"x" * 400 + b"\n")
            os.fsync(fd)
            times.append(time.perf_counter() - started)
    finally:
        os.close(fd)
        path.unlink()
    return statistics.median(times)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def idle_sessions(port: int, pid: int, sessions: int) -> float:
    init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
    before = rss_kib(pid)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for _ in range(sessions):
        conn.request("POST", "/mcp", body=init, headers={"Content-Type": "application/json",
                                                         "Accept": "application/json, text/event-stream"})
        response = conn.getresponse()
        response.read()
        assert response.getheader("Mcp-Session-Id")
    time.sleep(0.5)
    return (rss_kib(pid) - before) / sessions


@contextmanager
def upstream_and_gateway(tmp: str, env: dict[str, str],
                         *gateway_options: str) -> Iterator[tuple[int, int, subprocess.Popen[bytes]]]:
    """The SDK server over Streamable HTTP and `llmc serve` in front of it (a profile that marks
    up.echo read-only): (upstream port, gateway port, gateway process). Both stop on leaving; a
    traceback the gateway wrote is printed."""
    up_port, gw_port = free_port(), free_port()
    upstream = subprocess.Popen([sys.executable, str(ROOT / "tests" / "peers" / "sdk_server.py"),
                                 "streamable-http", "--port", str(up_port), "--stateless", "--json"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    profile = Path(tmp) / "bench.toml"
    profile.write_text(f'[servers.up]\nurl = "http://127.0.0.1:{up_port}/mcp"\n\n'
                       '[policy.hints."up.echo"]\nreadOnly = true\n')
    errors = Path(tmp) / "gateway.err"
    gateway = None
    try:
        wait_up(up_port, "/mcp", upstream)
        with open(errors, "w") as err:
            gateway = subprocess.Popen([LLMC, "serve", "-p", str(profile), "--http", f"127.0.0.1:{gw_port}",
                                        *gateway_options], env=env, stdout=subprocess.DEVNULL, stderr=err)
        wait_up(gw_port, "/healthz", gateway)
        yield up_port, gw_port, gateway
    finally:
        if errors.exists() and "Traceback" in errors.read_text():
            print("gateway stderr:\n" + errors.read_text()[-3000:])
        for proc in (gateway, upstream):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--concurrent-calls", type=int, default=1600)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="concurrent rounds, alternating direct and gateway")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "LLMC_CONFIG_DIR": f"{tmp}/config", "LLMC_STATE_DIR": f"{tmp}/state"}
        with upstream_and_gateway(tmp, env, "--idle-timeout", "3600") as (up_port, gw_port, gateway):
            # Memory first, after a few calls: measured after the busy rounds, new sessions fill
            # memory those rounds freed and the difference is noise (it came out negative).
            sequential(gw_port, "up.echo", 20)
            per_session = idle_sessions(gw_port, gateway.pid, args.sessions)
            direct = sequential(up_port, "echo", args.calls)
            through = sequential(gw_port, "up.echo", args.calls)
            d_med, g_med = statistics.median(direct) * 1000, statistics.median(through) * 1000
            print(f"sequential, {args.calls} calls each")
            print(f"  direct  median {d_med:.2f} ms   p90 {statistics.quantiles(direct, n=10)[-1] * 1000:.2f} ms")
            print(f"  gateway median {g_med:.2f} ms   p90 {statistics.quantiles(through, n=10)[-1] * 1000:.2f} ms")
            print(f"  added by the gateway (median): {g_med - d_med:.2f} ms "
                  f"(target <= 2 ms, audit on: one write+fsync here takes {fsync_floor(tmp) * 1000:.2f} ms)")
            direct_rates, gateway_rates, cpu_per_call = [], [], []
            direct_errors: list[str] = []
            gateway_errors: list[str] = []
            for _ in range(args.rounds):  # alternating: a busy moment of the machine hits both alike
                rate, errors = concurrent(up_port, "echo", args.clients, args.concurrent_calls)
                direct_rates.append(rate)
                direct_errors += errors
                cpu_before = cpu_seconds(gateway.pid)
                rate, errors = concurrent(gw_port, "up.echo", args.clients, args.concurrent_calls)
                cpu_per_call.append((cpu_seconds(gateway.pid) - cpu_before) / args.concurrent_calls)
                gateway_rates.append(rate)
                gateway_errors += errors
            print(f"{args.clients} concurrent clients, {args.concurrent_calls} calls, median of {args.rounds} rounds "
                  f"(each: {' '.join(f'{r:.0f}' for r in gateway_rates)})")
            print(f"  direct  {statistics.median(direct_rates):.0f} calls/s, {len(direct_errors)} failed "
                  f"{sorted(set(direct_errors))[:3]}")
            print(f"  gateway {statistics.median(gateway_rates):.0f} calls/s, {len(gateway_errors)} failed "
                  f"{sorted(set(gateway_errors))[:3]} (target >= 500; the gateway's CPU per call "
                  f"{statistics.median(cpu_per_call) * 1000:.2f} ms, {os.cpu_count()} cores shared with the upstream "
                  "and these clients)")
            print(f"memory per idle initialize-era session ({args.sessions} sessions): {per_session:.1f} KiB")
            audit = Path(tmp) / "state" / "audit.jsonl"
            print(f"audit records written by the gateway: {len(audit.read_text().splitlines())}")


if __name__ == "__main__":
    main()
