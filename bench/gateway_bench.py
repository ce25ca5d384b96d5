"""The gateway against its peers, side by side in one run, driven by the same stdlib client:
throughput with concurrent clients, sequential added latency, the gateway's CPU per call and
memory per idle session.

    .venv/bin/python bench/gateway_bench.py [--rounds 3] [--calls 300] [--clients 16] [--concurrent-calls 1600]
                                            [--sessions 200] [--only stdio|http] [--no-peers]
                                            [--llmc-workers 1,2]

Two upstreams, each fronted by the gateways that can front it:

- stdio: @modelcontextprotocol/server-everything (tests/node/node_modules), tool `echo`.
  Direct: the same stdlib client on the server's pipes (sequential only). Gateways: llmc
  (`llmc serve -p P --http`, audit on, a policy in the profile: default deny, the tool allowed
  and marked read-only) and supergateway `--stateful` (npm package `supergateway`, one upstream
  child per session; installed on first run into bench/.cache/supergateway, never committed).
- HTTP: the SDK test server (tests/peers/sdk_server.py) over Streamable HTTP, stateless, JSON
  replies, tool `echo`. Direct: the client on it. Gateways: llmc (as above) and FastMCP's proxy
  (PyPI package `fastmcp`, installed on first run into its own venv under bench/.cache):
  `create_proxy(url)` (the default: a new upstream session per request) and `create_proxy(client)`
  with a connected Client (one upstream session shared by every host).

Every gateway is driven the same way: initialize-era sessions (2025-06-18; the peers speak no
2026-07-28), one per client, keep-alive HTTP/1.1, JSON or SSE replies as the server chooses.
Rounds alternate over the targets, so a busy moment of the shared machine hits each alike:
compare the ratios. CPU per call is the gateway process's own (user + system; its upstream
children not counted; with `--workers`, the supervisor's and its workers').
`--llmc-workers 1,2` runs one llmc gateway per count (`llmc serve --workers N`) side by side in
the same rounds; each is compared with the peers. Memory per idle session: RSS of the gateway and its children before and
after opening N sessions, divided by N (supergateway starts a child per session: fewer of them). FastMCP's default proxy (a new upstream
session per request, ~15 calls/s here) gets a fifth of the sequential and an eighth of the
concurrent calls, so a run ends in minutes.
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
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(__file__).resolve().parent / ".cache"
LLMC = str(Path(sys.executable).parent / "llmc")
EVERYTHING = ROOT / "tests" / "node" / "node_modules" / ".bin" / "mcp-server-everything"
# The [servers.up] body of server-everything on stdio, and the policy of every llmc gateway benched:
# deny by default, the echo tool allowed and read-only, one other tool denied.
STDIO_UP = f'command = "{EVERYTHING}"\nargs = ["stdio"]\n'
POLICY = '[policy]\ndefault = "deny"\nallow = ["up.echo"]\ndeny = ["up.get-env"]\n\n[policy.hints."up.echo"]\nreadOnly = true\n'
SUPERGATEWAY_PIN = "supergateway@4.0.0"
FASTMCP_PIN = "fastmcp==4.2.3"
VERSION = "2025-06-18"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}}

FASTMCP_PROXY = """
import asyncio, sys
from fastmcp import Client
from fastmcp.server import create_proxy

async def main(mode, url, port):
    if mode == "shared":
        async with Client(url) as client:
            await create_proxy(client, name="proxy").run_http_async(host="127.0.0.1", port=port, log_level="error",
                                                                    show_banner=False)
    else:
        await create_proxy(url, name="proxy").run_http_async(host="127.0.0.1", port=port, log_level="error",
                                                             show_banner=False)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(port: int, path: str, proc: subprocess.Popen[bytes], method: str = "GET") -> None:
    for _ in range(240):
        if proc.poll() is not None:
            sys.exit(f"server on {port} exited {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request(method, path)
            conn.getresponse().read()
            return
        except OSError:
            time.sleep(0.25)
    sys.exit(f"server on {port} did not come up")


def reply_of(data: bytes, content_type: str, msg_id: int) -> dict[str, object]:
    """The JSON-RPC reply to msg_id in a JSON body or an SSE stream."""
    if content_type.startswith("text/event-stream"):
        for line in data.splitlines():
            if line.startswith(b"data:"):
                message = json.loads(line[5:])
                if message.get("id") == msg_id:
                    return message  # type: ignore[no-any-return]
        raise AssertionError(f"no reply to {msg_id} in {data[:300]!r}")
    return json.loads(data)  # type: ignore[no-any-return]


class Caller:
    """One keep-alive connection making tools/call requests: in an initialize-era session by
    default, or as 2026-07-28 requests without one (`modern`)."""

    def __init__(self, port: int, tool: str, *, modern: bool = False) -> None:
        self.port, self.tool, self.modern = port, tool, modern
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.ids = 0
        self.session: str | None = None
        if not modern:
            self.open()

    def post(self, message: dict[str, object], headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
        base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.session:
            base.update({"Mcp-Session-Id": self.session, "MCP-Protocol-Version": VERSION})
        body, headers = json.dumps(message), {**base, **(headers or {})}
        try:
            self.conn.request("POST", "/mcp", body=body, headers=headers)
            return self.conn.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            self.conn.close()  # the server closed an idle keep-alive connection: once more, on a new one
            self.conn.request("POST", "/mcp", body=body, headers=headers)
            return self.conn.getresponse()

    def open(self) -> None:
        self.session = None
        response = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        response.read()
        self.session = response.getheader("Mcp-Session-Id")
        assert response.status == 200, (response.status, response.headers)  # a stateless server: no session
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}).read()

    def call(self) -> float:
        self.ids += 1
        params: dict[str, object] = {"name": self.tool, "arguments": {"message": "hi"}}
        headers = {}
        if self.modern:
            params["_meta"] = META
            headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": self.tool}
        started = time.perf_counter()
        response = self.post({"jsonrpc": "2.0", "id": self.ids, "method": "tools/call", "params": params}, headers)
        data = response.read()
        elapsed = time.perf_counter() - started
        reply = reply_of(data, response.getheader("Content-Type", ""), self.ids)
        result = reply.get("result")
        assert isinstance(result, dict) and not result.get("isError"), reply
        return elapsed


class StdioCaller:
    """The same calls on a stdio server's pipes: what the upstream costs without a gateway."""

    def __init__(self, command: list[str]) -> None:
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.ids = 0
        self.exchange({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, object]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def exchange(self, message: dict[str, object]) -> dict[str, object]:
        assert self.proc.stdout is not None
        self.send(message)
        while True:
            reply = json.loads(self.proc.stdout.readline())
            if reply.get("id") == message["id"]:
                return reply  # type: ignore[no-any-return]

    def call(self) -> float:
        self.ids += 1
        started = time.perf_counter()
        reply = self.exchange({"jsonrpc": "2.0", "id": self.ids, "method": "tools/call",
                               "params": {"name": "echo", "arguments": {"message": "hi"}}})
        elapsed = time.perf_counter() - started
        assert "result" in reply, reply
        return elapsed

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def concurrent(make: Callable[[], Caller], clients: int, calls: int) -> tuple[float, list[str]]:
    per_client = max(1, calls // clients)
    callers = [make() for _ in range(clients)]
    for _ in range(10):  # warm: a peer's new session (supergateway: a new child) is not timed cold
        for caller in callers:
            caller.call()
    barrier = threading.Barrier(clients + 1)
    errors: list[str] = []

    def work(caller: Caller) -> None:
        barrier.wait()
        for _ in range(per_client):
            try:
                caller.call()
            except (OSError, http.client.HTTPException, AssertionError) as exc:
                errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
                caller.conn.close()  # http.client reconnects on the next request

    threads = [threading.Thread(target=work, args=(c,)) for c in callers]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    rate = (per_client * clients - len(errors)) / (time.perf_counter() - started)
    for caller in callers:
        close_session(caller)
    return rate, errors


def close_session(caller: Caller) -> None:
    if caller.session:
        try:
            caller.conn.request("DELETE", "/mcp", headers={"Mcp-Session-Id": caller.session,
                                                           "MCP-Protocol-Version": VERSION})
            caller.conn.getresponse().read()
        except (OSError, http.client.HTTPException):
            pass
    caller.conn.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (its children not counted)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree(pid: int) -> list[int]:
    """pid and its descendants."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo.extend(parents.get(current, []))
    return out


def rss_kib(pid: int) -> int:
    total = 0
    for member in tree(pid):
        try:
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def fsync_floor(directory: str, writes: int = 50) -> float:
    """Median seconds of appending one audit-sized line and fsyncing it, in this directory."""
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


@dataclass
class Target:
    name: str
    scenario: str  # "stdio" or "HTTP"
    port: int = 0
    tool: str = "echo"
    proc: subprocess.Popen[bytes] | None = None  # the gateway (None: direct)
    stdio: list[str] | None = None  # direct stdio upstream command
    modern: bool = False
    workers: int = 1  # llmc serve --workers
    sessions: int = 0  # idle sessions opened for the memory figure
    rates: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    latency: list[float] = field(default_factory=list)
    per_session: float | None = None

    def caller(self) -> Caller:
        return Caller(self.port, self.tool, modern=self.modern)


def start(command: list[str], stack: ExitStack, env: dict[str, str] | None = None,
          log: Path | None = None) -> subprocess.Popen[bytes]:
    err = open(log, "w") if log else subprocess.DEVNULL  # noqa: SIM115 - closed by the stack
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)

    def stop() -> None:
        for member in reversed(tree(proc.pid)):
            try:
                os.kill(member, 15)
            except OSError:
                pass
        proc.wait(timeout=30)
        if log is not None:
            err.close()  # type: ignore[union-attr]
            if "Traceback" in log.read_text():
                print(f"{command[0]} stderr:\n" + log.read_text()[-3000:])

    stack.callback(stop)
    return proc


def install_supergateway() -> Path:
    target = CACHE / "supergateway"
    binary = target / "node_modules" / ".bin" / "supergateway"
    if not binary.exists():
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(target), SUPERGATEWAY_PIN],
                       check=True, stdout=subprocess.DEVNULL)
    return binary


def install_fastmcp() -> Path:
    venv = CACHE / "fastmcp-venv"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    if subprocess.run([str(python), "-c", "import fastmcp"], capture_output=True).returncode:
        subprocess.run([str(python), "-m", "pip", "install", "-q", FASTMCP_PIN], check=True)
    script = CACHE / "fastmcp_proxy.py"
    script.write_text(FASTMCP_PROXY)
    return python


def llmc_gateway(tmp: str, name: str, server: str, stack: ExitStack, extra: list[str], workers: int = 1,
                 sync: str | None = None) -> Target:
    """`llmc serve` in front of `server` (a [servers.up] table's body), audit on, policy: deny by
    default, the echo tool allowed and marked read-only, one other tool denied. `sync`: the
    profile's [audit] sync ("before_call", "before_reply"; None: no [audit] table, the default)."""
    port = free_port()
    profile = Path(tmp) / f"{name}.toml"
    audit = f'\n[audit]\nsync = "{sync}"\n' if sync else ""
    profile.write_text(f"[servers.up]\n{server}\n{POLICY}{audit}")
    env = {**os.environ, "LLMC_CONFIG_DIR": f"{tmp}/{name}-config", "LLMC_STATE_DIR": f"{tmp}/{name}-state"}
    proc = start([LLMC, "serve", "-p", str(profile), "--http", f"127.0.0.1:{port}", "--idle-timeout", "3600",
                  "--workers", str(workers), *extra], stack, env, Path(tmp) / f"{name}.err")
    wait_up(port, "/healthz", proc)
    for _ in range(100):  # every worker up (a connection may reach any of them)
        if len(workers_of(proc.pid)) >= workers or workers == 1:
            break
        time.sleep(0.1)
    time.sleep(1.0 if workers > 1 else 0)
    return Target(name, "", port, "up.echo", proc, workers=workers)


def workers_of(pid: int) -> list[int]:
    """The direct children of a process (`llmc serve --workers N`: its workers)."""
    return [member for member in tree(pid) if member != pid and _ppid(member) == pid]


def _ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def gateway_cpu(target: "Target") -> float:
    """CPU seconds of the gateway: its process, and with workers theirs (not the upstreams')."""
    assert target.proc is not None
    pids = [target.proc.pid, *(workers_of(target.proc.pid) if target.workers > 1 else [])]
    total = 0.0
    for pid in pids:
        try:
            total += cpu_seconds(pid)
        except OSError:
            pass
    return total


def targets(tmp: str, stack: ExitStack, args: argparse.Namespace) -> list[Target]:
    out: list[Target] = []
    llmc_extra: list[str] = []
    if args.only in (None, "stdio"):
        everything = [str(EVERYTHING), "stdio"]
        out.append(Target("direct (pipes)", "stdio", stdio=everything))
        for workers in args.llmc_workers:
            gw = llmc_gateway(tmp, f"llmc-stdio-{workers}", STDIO_UP, stack,
                              llmc_extra, workers, args.audit_sync)
            gw.scenario, gw.name, gw.sessions = "stdio", llmc_name(workers, args), args.sessions
            out.append(gw)
        if args.modern:
            out.append(Target("llmc, 2026-07-28 requests", "stdio", gw.port, gw.tool, gw.proc, modern=True))
        if args.peers:
            port = free_port()
            proc = start([str(install_supergateway()), "--stdio", " ".join(everything), "--outputTransport",
                          "streamableHttp", "--stateful", "--sessionTimeout", "3600000", "--port", str(port),
                          "--logLevel", "none"], stack)
            wait_up(port, "/mcp", proc)
            out.append(Target("supergateway --stateful", "stdio", port, "echo", proc, sessions=args.sg_sessions))
    if args.only in (None, "http"):
        up_port = free_port()
        upstream = start([sys.executable, str(ROOT / "tests" / "peers" / "sdk_server.py"), "streamable-http",
                          "--port", str(up_port), "--stateless", "--json"], stack)
        wait_up(up_port, "/mcp", upstream)
        url = f"http://127.0.0.1:{up_port}/mcp"
        out.append(Target("direct", "HTTP", up_port))
        for workers in args.llmc_workers:
            gw = llmc_gateway(tmp, f"llmc-http-{workers}", f'url = "{url}"\n', stack, llmc_extra, workers,
                              args.audit_sync)
            gw.scenario, gw.name, gw.sessions = "HTTP", llmc_name(workers, args), args.sessions
            out.append(gw)
        if args.modern:
            out.append(Target("llmc, 2026-07-28 requests", "HTTP", gw.port, gw.tool, gw.proc, modern=True))
        if args.peers:
            python = install_fastmcp()
            for mode, label in (("default", "FastMCP proxy (default)"), ("shared", "FastMCP proxy (shared client)")):
                port = free_port()
                proc = start([str(python), str(CACHE / "fastmcp_proxy.py"), mode, url, str(port)], stack)
                wait_up(port, "/mcp", proc)
                out.append(Target(label, "HTTP", port, "echo", proc, sessions=args.sessions // 2))
    return out


def llmc_name(workers: int, args: argparse.Namespace) -> str:
    """"llmc" for the first count asked for (the one ratios are of), "llmc --workers N" for others."""
    return "llmc" if workers == args.llmc_workers[0] else f"llmc --workers {workers}"


def idle_sessions(target: Target) -> float:
    assert target.proc is not None
    before = rss_kib(target.proc.pid)
    callers = [target.caller() for _ in range(target.sessions)]
    time.sleep(1.0)
    per_session = (rss_kib(target.proc.pid) - before) / target.sessions
    for caller in callers:
        close_session(caller)
    return per_session


def sequential(target: Target, calls: int) -> list[float]:
    if target.stdio:
        caller: StdioCaller | Caller = StdioCaller(target.stdio)
    else:
        caller = target.caller()
    out: list[float] = []
    try:
        for _ in range(20 + calls):  # the first 20: connect, warm caches
            try:
                elapsed = caller.call()
            except AssertionError as exc:  # a peer's failed call is counted, not timed (the run goes on)
                target.errors.append(f"sequential: {str(exc)[:200]}")
                continue
            out.append(elapsed)
        return out[20:]
    finally:
        if isinstance(caller, StdioCaller):
            caller.close()
        else:
            close_session(caller)


def report(all_targets: list[Target], args: argparse.Namespace, tmp: str, started_load: tuple[float, ...]) -> None:
    print(f"load at the start: {started_load}; {os.cpu_count()} CPUs; one fsync of an audit-sized line here "
          f"{fsync_floor(tmp) * 1000:.2f} ms")
    for scenario in ("stdio", "HTTP"):
        rows = [t for t in all_targets if t.scenario == scenario]
        if not rows:
            continue
        direct = statistics.median(rows[0].latency) * 1000
        llmc = next(t for t in rows if t.name == "llmc")
        llmc_rate = statistics.median(llmc.rates)
        print(f"\n### {scenario} upstream ({args.clients} clients x {args.concurrent_calls // args.clients} calls, "
              f"{args.rounds} alternating rounds; sequential: {args.calls} calls in those rounds)\n")
        print("| target | calls/s (rounds) | llmc's ratio to it | sequential median | added | gateway CPU/call "
              "| memory per idle session |")
        print("|---|---|---|---|---|---|---|")
        for t in rows:
            seq = statistics.median(t.latency) * 1000
            rate = f"{statistics.median(t.rates):.0f} ({' '.join(f'{r:.0f}' for r in t.rates)})" if t.rates else "n/a"
            ratio = f"{llmc_rate / statistics.median(t.rates):.2f}x" if t.rates and t is not llmc else ""
            added = f"{seq - direct:+.2f} ms" if t is not rows[0] else ""
            cpu = f"{statistics.median(t.cpu) * 1e6:.0f} µs" if t.cpu else ""
            mem = f"{t.per_session:.1f} KiB ({t.sessions})" if t.per_session is not None else ""
            print(f"| {t.name} | {rate} | {ratio} | {seq:.2f} ms | {added} | {cpu} | {mem} |")
            if t.errors:
                print(f"|   ({len(t.errors)} failed: {sorted(set(t.errors))[:2]}) |")
        mine = [t for t in rows if t.name.startswith("llmc") and t.rates and not t.modern]
        peers = [t for t in rows if not t.name.startswith("llmc") and t.rates]
        if len(mine) > 1:
            for t in mine:
                against = ", ".join(f"{statistics.median(t.rates) / statistics.median(p.rates):.2f}x {p.name}" for p in peers)
                print(f"\n{t.name}: {statistics.median(t.rates):.0f} calls/s; {against}")
    print(f"\nload after: {os.getloadavg()}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300, help="sequential calls per target")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--concurrent-calls", type=int, default=1600)
    parser.add_argument("--sessions", type=int, default=200, help="idle sessions opened on llmc (FastMCP: half)")
    parser.add_argument("--sg-sessions", type=int, default=10, help="idle sessions on supergateway (a child each)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=("stdio", "http"))
    parser.add_argument("--no-peers", dest="peers", action="store_false", help="llmc and direct only")
    parser.add_argument("--modern", action="store_true", help="also llmc driven with 2026-07-28 requests")
    parser.add_argument("--llmc-workers", default="1", help="llmc serve --workers: a count, or counts side by side (1,2)")
    parser.add_argument("--audit-sync", choices=("before_call", "before_reply"),
                        help="the benched profile's [audit] sync (default: none set, i.e. before_call)")
    args = parser.parse_args()
    args.llmc_workers = [int(n) for n in str(args.llmc_workers).split(",") if n.strip()]
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        all_targets = targets(tmp, stack, args)
        for target in all_targets:  # memory first: after the busy rounds new sessions fill freed memory
            if target.sessions and target.proc is not None and not target.modern:
                target.caller().call()
                target.per_session = idle_sessions(target)
        started_load = os.getloadavg()
        for _ in range(args.rounds):  # each round: every target's sequential share, then its concurrent round
            for target in all_targets:
                share = args.calls // args.rounds // (5 if "default" in target.name else 1)
                target.latency += sequential(target, max(10, share))
            for target in all_targets:
                if target.stdio:
                    continue
                print(f"round: {target.scenario} {target.name}", file=sys.stderr)
                cpu_before = gateway_cpu(target) if target.proc else 0.0
                calls = args.concurrent_calls // (8 if "default" in target.name else 1)  # 15 calls/s: bounded
                rate, errors = concurrent(target.caller, args.clients, calls)
                if target.proc:
                    target.cpu.append((gateway_cpu(target) - cpu_before) / calls)
                target.rates.append(rate)
                target.errors += errors
        report(all_targets, args, tmp, started_load)


@contextmanager
def upstream_and_gateway(tmp: str, env: dict[str, str],
                         *gateway_options: str) -> Iterator[tuple[int, int, subprocess.Popen[bytes]]]:
    """The SDK server over Streamable HTTP and `llmc serve` in front of it (for gateway_ab.py):
    (upstream port, gateway port, gateway process)."""
    with ExitStack() as stack:
        up_port = free_port()
        upstream = start([sys.executable, str(ROOT / "tests" / "peers" / "sdk_server.py"), "streamable-http",
                          "--port", str(up_port), "--stateless", "--json"], stack)
        wait_up(up_port, "/mcp", upstream)
        profile = Path(tmp) / "bench.toml"
        profile.write_text(f'[servers.up]\nurl = "http://127.0.0.1:{up_port}/mcp"\n\n'
                           '[policy.hints."up.echo"]\nreadOnly = true\n')
        gw_port = free_port()
        gateway = start([LLMC, "serve", "-p", str(profile), "--http", f"127.0.0.1:{gw_port}", *gateway_options],
                        stack, env, Path(tmp) / "gateway.err")
        wait_up(gw_port, "/healthz", gateway)
        yield up_port, gw_port, gateway


if __name__ == "__main__":
    main()
