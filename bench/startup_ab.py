"""`llmc tools list` (the built-in server) and `llmc --help` against `python -c "import click"`,
for one or more source trees in the same run, alternating, by the CPU time (user + system) of
each child process (load barely moves it; wall time is printed beside it).

    .venv/bin/python bench/startup_ab.py [TREE ...] [--runs 9]

Each TREE (default: this checkout) runs as `python -P -m llmc_cli` with PYTHONPATH=TREE, so the
tree under test is imported, not the installed one. Bytecode caches are written and used, as
users have them; the first run of each is a warm-up and is not counted.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=120)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("trees", nargs="*", default=[str(ROOT)])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    state = tempfile.mkdtemp(prefix="llmc-bench-")
    env = {**os.environ, "LLMC_STATE_DIR": state, "LLMC_CONFIG_DIR": state}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for name in ("LLMC_PROFILE", "LLMC_OTEL", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        env.pop(name, None)
    commands: dict[str, tuple[list[str], dict[str, str]]] = {"import click": ([sys.executable, "-c", "import click"], env)}
    for tree in args.trees:
        tree_env = {**env, "PYTHONPATH": tree}
        base = [sys.executable, "-P", "-m", "llmc_cli"]
        commands[f"{tree}: tools list"] = ([*base, "tools", "list"], tree_env)
        commands[f"{tree}: --help"] = ([*base, "--help"], tree_env)
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    wall: dict[str, list[float]] = {name: [] for name in commands}
    for i in range(args.runs + 1):
        for name, (argv, run_env) in commands.items():
            c, w = run(argv, run_env)
            if i:
                cpu[name].append(c)
                wall[name].append(w)
    floor = statistics.median(cpu["import click"])
    for name in commands:
        c, w = statistics.median(cpu[name]), statistics.median(wall[name])
        print(f"{name:60} CPU median {c * 1e3:6.1f} ms ({c / floor:.2f}x import click), wall median {w * 1e3:6.1f} ms")


if __name__ == "__main__":
    main()
