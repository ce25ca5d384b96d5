"""llmc against its peers on the same server and the same operations, in one alternating run.

    .venv/bin/python bench/peers.py [--runs N] [--out bench/RESULTS.md]

Server: npm server-everything, over stdio and over Streamable HTTP (its `streamableHttp` mode on
a loopback port, started once for the run). Operations: list tools; one call (echo); ten calls
in one go (llmc: one `call --batch` of ten; mcp SDK: ten calls on one session; Inspector CLI
and mcporter: ten processes); and, over stdio, ten calls each in its own process with the
server kept warm by the client's keep-alive mechanism (llmc: a session keeper, `call
--session`; mcporter: its keep-alive daemon; the others have none).
Peers not installed (bench/node: `npm install`) are reported as such. Cases alternate within
each round so that load on a shared machine hits every peer alike; medians and ratios to
llmc are written as a Markdown table. Prints and exits 0 whatever the numbers are.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PY = sys.executable
LLMC = str(Path(PY).parent / "llmc")

SDK_CLIENT = r"""
import sys, anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

async def main() -> None:
    op, calls, target = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    if target[0].startswith("http"):
        opened = streamable_http_client(target[0])
    else:
        opened = stdio_client(StdioServerParameters(command=target[0], args=target[1:]))
    async with opened as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        if op == "list":
            print(len((await session.list_tools()).tools))
        for i in range(calls):
            print((await session.call_tool("echo", {"message": f"m{i}"})).content[0].text)

anyio.run(main)
"""

TRANSPORTS = ("stdio", "HTTP")
OPS = ("list tools", "one call", "ten calls", "ten calls, kept alive")


def node_bin(name: str) -> str:
    for base in (BENCH / "node", ROOT / "tests" / "node"):
        path = base / "node_modules" / ".bin" / name
        if path.exists():
            return str(path)
    return ""


def package_version(name: str) -> str:
    for base in (BENCH / "node", ROOT / "tests" / "node"):
        manifest = base / "node_modules" / name / "package.json"
        if manifest.exists():
            return str(json.loads(manifest.read_text())["version"])
    return "not installed"


def run(argv: list[str], env: dict[str, str], stdin: bytes = b"") -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, capture_output=True, env=env, timeout=120)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{Path(argv[0]).name} failed ({proc.returncode}): {proc.stderr.decode()[-300:]}")
    return elapsed


Case = list[tuple[list[str], bytes]]  # the processes one measurement runs, in order
Key = tuple[str, str, str]  # (client, transport, operation)


def cases(server: str, url: str, mcporter_config: str) -> dict[Key, Case]:
    """Every measurement: `server` is the stdio command, `url` the same server over HTTP (""
    when it could not start), `mcporter_config` names the stdio server as keep-alive."""
    sdk = [PY, "-c", SDK_CLIENT]
    batch = "".join(json.dumps({"id": i, "tool": "echo", "arguments": {"message": f"m{i}"}}) + "\n"
                    for i in range(10)).encode()
    table: dict[Key, Case] = {}
    targets = {"stdio": (["--stdio", server], [server]), "HTTP": (["--url", url], [url])}
    for transport, (llmc_target, sdk_target) in targets.items():
        if transport == "HTTP" and not url:
            continue
        table[("llmc", transport, "list tools")] = [([LLMC, "tools", "list", *llmc_target], b"")]
        table[("llmc", transport, "one call")] = [([LLMC, "call", *llmc_target, "echo", "message=hi"], b"")]
        table[("llmc", transport, "ten calls")] = [([LLMC, "call", *llmc_target, "--batch", "-"], batch)]
        table[("mcp SDK client", transport, "list tools")] = [(sdk + ["list", "0", *sdk_target], b"")]
        table[("mcp SDK client", transport, "one call")] = [(sdk + ["call", "1", *sdk_target], b"")]
        table[("mcp SDK client", transport, "ten calls")] = [(sdk + ["call", "10", *sdk_target], b"")]
    # llmc's keep-alive: the session keeper main() starts as "peers".
    kept = [LLMC, "call", "t.echo", "message=hi", "--session", "peers"]
    table[("llmc", "stdio", "ten calls, kept alive")] = [(kept, b"")] * 10
    inspector = node_bin("mcp-inspector")
    if inspector:
        for transport, base in (("stdio", [inspector, "--cli", server]),
                                ("HTTP", [inspector, "--cli", url, "--transport", "http"])):
            if transport == "HTTP" and not url:
                continue
            one = base + ["--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=hi"]
            table[("Inspector CLI", transport, "list tools")] = [(base + ["--method", "tools/list"], b"")]
            table[("Inspector CLI", transport, "one call")] = [(one, b"")]
            table[("Inspector CLI", transport, "ten calls")] = [(one, b"")] * 10  # no keep-alive mechanism
    mcporter = node_bin("mcporter")
    if mcporter:
        for transport, target in (("stdio", ["--stdio", server]), ("HTTP", ["--http-url", url, "--allow-http"])):
            if transport == "HTTP" and not url:
                continue
            table[("mcporter", transport, "list tools")] = [([mcporter, "list", *target], b"")]
            one = [mcporter, "call", *target, "echo", "message=hi"]
            table[("mcporter", transport, "one call")] = [(one, b"")]
            table[("mcporter", transport, "ten calls")] = [(one, b"")] * 10
        warm = [mcporter, "call", "--config", mcporter_config, "everything.echo", "message=hi"]
        table[("mcporter", "stdio", "ten calls, kept alive")] = [(warm, b"")] * 10
    return table


def measure(case: Case, env: dict[str, str]) -> float:
    return sum(run(argv, env, stdin) for argv, stdin in case)


def render(medians: dict[Key, float], failures: dict[Key, str], runs: int) -> str:
    lines = []
    for transport in TRANSPORTS:
        ops = [op for op in OPS if any(k[1:] == (transport, op) for k in [*medians, *failures])]
        peers = list(dict.fromkeys(k[0] for k in [*medians, *failures] if k[1] == transport))
        if not peers:
            continue
        lines += [f"### {transport}", "", f"| client | {' | '.join(ops)} |", "|---|" + "---|" * len(ops)]
        for peer in peers:
            cells = []
            for op in ops:
                key, base = (peer, transport, op), ("llmc", transport, op)
                if key in failures:
                    cells.append(f"failed: {failures[key]}")
                elif key in medians:
                    ratio = medians[key] / medians[base] if base in medians else float("nan")
                    cells.append(f"{medians[key] * 1000:.0f} ms ({ratio:.2f}x)")
                else:
                    cells.append("n/a")
            lines.append(f"| {peer} | {' | '.join(cells)} |")
        lines.append("")
    versions = (f"llmc {version('llmc-cli')}, mcp SDK {version('mcp')}, "
                f"Inspector {package_version('@modelcontextprotocol/inspector')}, "
                f"mcporter {package_version('mcporter')}, "
                f"server-everything {package_version('@modelcontextprotocol/server-everything')}, "
                f"node {subprocess.run(['node', '--version'], capture_output=True, text=True).stdout.strip()}")
    machine = (f"{platform.system()} {platform.release()} {platform.machine()}, {os.cpu_count()} CPUs, "
               f"Python {platform.python_version()}")
    return "\n".join([
        "# llmc and its peers", "",
        f"Medians of {runs} alternating rounds against server-everything; in brackets the ratio to llmc "
        "over the same transport (above 1 means slower than llmc). `ten calls`: each client's way of "
        "making ten calls in one go (llmc `call --batch`, one SDK session; the Inspector CLI and mcporter "
        "start ten processes). `ten calls, kept alive`: ten separate processes, each a single call, with "
        "the server kept running by the client's keep-alive mechanism (llmc `call --session`, mcporter's "
        "keep-alive daemon; the others have none: n/a).", "",
        *lines,
        f"Machine: {machine}. Versions: {versions}.", "",
        "Reproduce: `(cd bench/node && npm install) && .venv/bin/python bench/peers.py --runs 10`.", ""])


def start_http_server(server: str, env: dict[str, str]) -> tuple[subprocess.Popen[bytes] | None, str]:
    """server-everything in streamableHttp mode on a free loopback port: (process, URL), or
    (None, "") when it does not come up within 30 s."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([server, "streamableHttp"], env={**env, "PORT": str(port)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    proc.wait()
    return None, ""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--out", type=Path, default=BENCH / "RESULTS.md")
    parser.add_argument("--note", default="", help="a line added under the table (e.g. the machine's load)")
    args = parser.parse_args()
    server = node_bin("mcp-server-everything")
    if not server:
        print("bench/peers.py: server-everything is not installed (cd bench/node && npm install)", file=sys.stderr)
        return
    node = node_bin("node") or shutil.which("node") or "node"
    state = tempfile.mkdtemp(prefix="llmc-peers-")
    # HOME too: mcporter keeps its daemon's socket under it and reads configs from it.
    env = {**os.environ, "LLMC_STATE_DIR": state, "LLMC_CONFIG_DIR": state, "HOME": state}
    # Users run with bytecode caches; without them every run compiles every module again.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("LLMC_SESSION", None)
    env["PATH"] = f"{Path(node).parent}{os.pathsep}{env['PATH']}"
    mcporter_config = str(Path(state) / "mcporter.json")
    Path(mcporter_config).write_text(json.dumps(
        {"mcpServers": {"everything": {"command": server, "args": [], "lifecycle": "keep-alive"}}}))
    subprocess.run([LLMC, "servers", "add", "t", "--", server], env=env, capture_output=True)
    subprocess.run([LLMC, "session", "start", "peers", "-s", "t", "--idle", "0"], env=env, capture_output=True)
    http, url = start_http_server(server, env)
    table = cases(server, url, mcporter_config)
    times: dict[Key, list[float]] = {key: [] for key in table}
    failures: dict[Key, str] = {}
    try:
        for round_ in range(args.runs + 1):  # round 0 warms caches and starts the daemons: not counted
            for key, case in table.items():
                if key in failures:
                    continue
                try:
                    elapsed = measure(case, env)
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    failures[key] = str(exc).splitlines()[0][:120]
                    continue
                if round_:
                    times[key].append(elapsed)
            print(f"round {round_} of {args.runs} done", file=sys.stderr)
    finally:
        subprocess.run([LLMC, "session", "stop", "peers"], env=env, capture_output=True)
        mcporter = node_bin("mcporter")
        if mcporter:
            subprocess.run([mcporter, "daemon", "stop", "--config", mcporter_config], env=env, capture_output=True,
                           timeout=60)
        if http is not None:
            http.terminate()
            http.wait()
    medians = {key: statistics.median(ts) for key, ts in times.items() if ts and key not in failures}
    report = render(medians, failures, args.runs)
    if args.note:
        report += f"\n{args.note}\n"
    args.out.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
