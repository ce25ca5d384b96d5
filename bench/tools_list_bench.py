"""Time `llmc tools list` against the same stdio server-everything, in one run, with:
(a) the floor: a standard-library-only client (bench/floor_tools_list.py),
(b) the official `mcp` SDK client (bench/sdk_tools_list.py),
(c) the MCP Inspector CLI (`inspector --cli --method tools/list`),
and `llmc --help` / `llmc --version` against `python -c "import click"`.

    .venv/bin/python bench/tools_list_bench.py [--runs N] [--json]

Reports the median wall time of N runs of each, and ratios to the floor. The cases run in
rounds, one run of each a round, the order reversed every other round (drift reaches all alike);
a first round warms up (llmc caches the server's era on its first contact) and is not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from peers import node_bin  # bench/ is on sys.path when a benchmark runs as a script

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PY = sys.executable
LLMC = str(Path(PY).parent / "llmc")


def ensure_peers() -> None:
    if not node_bin("mcp-inspector") or not node_bin("mcp-server-everything"):
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"],
                       cwd=BENCH / "node", check=True)


def run_once(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, env=env, timeout=120)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:3]} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    return elapsed


def timed(cases: dict[str, list[str]], runs: int, env: dict[str, str]) -> dict[str, list[float]]:
    """Each case run once a round, `runs` rounds after a warm-up round (llmc caches the server's
    era on first contact), the order reversed every other round: the machine's drift during the
    run reaches every case alike, so the ratios of one run compare like with like."""
    for argv in cases.values():
        run_once(argv, env)
    times: dict[str, list[float]] = {name: [] for name in cases}
    order = list(cases)
    for round_ in range(runs):
        for name in order if round_ % 2 == 0 else reversed(order):
            times[name].append(run_once(cases[name], env))
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ensure_peers()
    server = node_bin("mcp-server-everything")
    node = node_bin("node") or shutil.which("node") or "node"
    state = tempfile.mkdtemp(prefix="llmc-bench-")
    env = {**os.environ, "LLMC_STATE_DIR": state, "LLMC_CONFIG_DIR": state}
    # Users run with bytecode caches; without them every run compiles every module again.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PATH"] = f"{Path(node).parent}{os.pathsep}{env['PATH']}"
    cases = {
        "floor (stdlib client)": [PY, str(BENCH / "floor_tools_list.py"), server],
        "llmc tools list": [LLMC, "tools", "list", "--stdio", server],
        "mcp SDK client": [PY, str(BENCH / "sdk_tools_list.py"), server],
        "Inspector CLI": [node_bin("mcp-inspector"), "--cli", server, "--method", "tools/list"],
        "python -c 'import click'": [PY, "-c", "import click"],
        "llmc --help": [LLMC, "--help"],
        "llmc --version": [LLMC, "--version"],
    }
    medians = {name: statistics.median(seconds) for name, seconds in timed(cases, args.runs, env).items()}
    floor, click_floor = medians["floor (stdlib client)"], medians["python -c 'import click'"]
    rows = []
    for name, seconds in medians.items():
        base = click_floor if name.startswith(("llmc --", "python -c")) else floor
        rows.append({"case": name, "median_s": round(seconds, 3), "ratio": round(seconds / base, 2)})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{'case':30} {'median s':>9} {'ratio':>6}   (tools/list rows: x floor; start-up rows: x import click)")
        for row in rows:
            print(f"{row['case']:30} {row['median_s']:9.3f} {row['ratio']:6.2f}")
    shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
