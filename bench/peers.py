"""llmc against its peers on the same server and the same operations, in one alternating run.

    .venv/bin/python bench/peers.py [--runs N] [--out bench/RESULTS.md]

Server: npm server-everything over stdio. Operations: list tools; one call (echo); ten calls,
each through the tool's keep-alive mechanism where it has one (llmc: one `call --batch` of ten;
mcp SDK: ten calls on one session; Inspector CLI: none, ten processes; mcporter: ten processes,
its keep-alive daemon is not wired in yet).
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
import json, sys, anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main() -> None:
    op, calls = sys.argv[1], int(sys.argv[2])
    params = StdioServerParameters(command=sys.argv[3], args=sys.argv[4:])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        if op == "list":
            print(len((await session.list_tools()).tools))
        for i in range(calls):
            print((await session.call_tool("echo", {"message": f"m{i}"})).content[0].text)

anyio.run(main)
"""


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


def cases(server: str) -> dict[tuple[str, str], Case]:
    sdk = [PY, "-c", SDK_CLIENT]
    batch = "".join(json.dumps({"id": i, "tool": "echo", "arguments": {"message": f"m{i}"}}) + "\n"
                    for i in range(10)).encode()
    table: dict[tuple[str, str], Case] = {
        ("llmc", "list tools"): [([LLMC, "tools", "list", "--stdio", server], b"")],
        ("llmc", "one call"): [([LLMC, "call", "--stdio", server, "echo", "message=hi"], b"")],
        ("llmc", "ten calls"): [([LLMC, "call", "--stdio", server, "--batch", "-"], batch)],
        ("mcp SDK client", "list tools"): [(sdk + ["list", "0", server], b"")],
        ("mcp SDK client", "one call"): [(sdk + ["call", "1", server], b"")],
        ("mcp SDK client", "ten calls"): [(sdk + ["call", "10", server], b"")],
    }
    inspector = node_bin("mcp-inspector")
    if inspector:
        base = [inspector, "--cli", server]
        one = base + ["--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=hi"]
        table[("Inspector CLI", "list tools")] = [(base + ["--method", "tools/list"], b"")]
        table[("Inspector CLI", "one call")] = [(one, b"")]
        table[("Inspector CLI", "ten calls")] = [(one, b"")] * 10  # no keep-alive mechanism
    mcporter = node_bin("mcporter")
    if mcporter:
        table[("mcporter", "list tools")] = [([mcporter, "list", "--stdio", server], b"")]
        one = [mcporter, "call", "--stdio", server, "echo", "message=hi"]
        table[("mcporter", "one call")] = [(one, b"")]
        table[("mcporter", "ten calls")] = [(one, b"")] * 10
    return table


def measure(case: Case, env: dict[str, str]) -> float:
    return sum(run(argv, env, stdin) for argv, stdin in case)


def render(medians: dict[tuple[str, str], float], failures: dict[tuple[str, str], str], runs: int) -> str:
    ops = ["list tools", "one call", "ten calls"]
    peers = list(dict.fromkeys(peer for peer, _ in [*medians, *failures]))
    lines = [f"| client | {' | '.join(ops)} |", "|---|" + "---|" * len(ops)]
    for peer in peers:
        cells = []
        for op in ops:
            key = (peer, op)
            if key in failures:
                cells.append(f"failed: {failures[key]}")
            elif key in medians:
                ratio = medians[key] / medians[("llmc", op)] if ("llmc", op) in medians else float("nan")
                cells.append(f"{medians[key] * 1000:.0f} ms ({ratio:.2f}x)")
            else:
                cells.append("n/a")
        lines.append(f"| {peer} | {' | '.join(cells)} |")
    versions = (f"llmc {version('llmc-cli')}, mcp SDK {version('mcp')}, "
                f"Inspector {package_version('@modelcontextprotocol/inspector')}, "
                f"mcporter {package_version('mcporter')}, "
                f"server-everything {package_version('@modelcontextprotocol/server-everything')}, "
                f"node {subprocess.run(['node', '--version'], capture_output=True, text=True).stdout.strip()}")
    machine = f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    return "\n".join([
        "# llmc and its peers", "",
        f"Medians of {runs} alternating rounds, stdio server-everything; in brackets the ratio to llmc "
        "(above 1 means slower than llmc). `ten calls` uses each client's keep-alive where it has one.", "",
        *lines, "",
        f"Machine: {machine}. Versions: {versions}.", "",
        "Reproduce: `(cd bench/node && npm install) && .venv/bin/python bench/peers.py --runs 10`.", ""])


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
    env = {**os.environ, "LLMC_STATE_DIR": state, "LLMC_CONFIG_DIR": state}
    # Users run with bytecode caches; without them every run compiles every module again.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PATH"] = f"{Path(node).parent}{os.pathsep}{env['PATH']}"
    table = cases(server)
    times: dict[tuple[str, str], list[float]] = {key: [] for key in table}
    failures: dict[tuple[str, str], str] = {}
    for round_ in range(args.runs + 1):  # round 0 warms caches and is not counted
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
    medians = {key: statistics.median(ts) for key, ts in times.items() if ts and key not in failures}
    report = render(medians, failures, args.runs)
    if args.note:
        report += f"\n{args.note}\n"
    args.out.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
