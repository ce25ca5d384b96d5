"""Tool search on public tool-retrieval data (bench/public_tools.py: BFCL and NESTFUL, about 2,000
tools, 3,500 labelled requests) beside the team's own 50 queries (bench/tool_search_queries.json),
llmc's ranker and its peers in one run: top-1, top-3, top-10, MRR (of the first right tool in the
top 10), median query time and index time.

    .venv/bin/python bench/tool_retrieval_bench.py [--half report|tune|all] [--peers] [--team]
        [--semantic [--vectors DIR]] [--misses N] [--json FILE]

--half tune is what the ranker is tuned on; report (the default) is the held-out half the
figures in bench/RESULTS.md come from. --peers installs rank_bm25, ratel-ai, dehydrator,
mcp-orchestrator and graph-tool-call (pinned) into bench/.cache/peers-venv on first use and runs
them on the same tools and requests. --team adds the team's 50 queries over the four reference
servers (listed live: needs tests/node and tests/node-dc) and the generated SaaS server.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import public_tools  # noqa: E402

from llmc_cli.model import Tool  # noqa: E402

PEER_PINS = ["rank_bm25==0.2.2", "ratel-ai==0.12.0", "dehydrator==0.3.1", "mcp-orchestrator==0.1.2", "graph-tool-call==0.47.0"]
TOP = 10


def metrics(ranked: list[list[str]], expects: list[list[str]]) -> dict[str, float]:
    n = len(expects) or 1
    out = {"top1": 0.0, "top3": 0.0, "top10": 0.0, "mrr": 0.0}
    for found, expect in zip(ranked, expects):
        ranks = [i for i, name in enumerate(found[:TOP]) if name in expect]
        if ranks:
            first = ranks[0]
            out["top1"] += first < 1
            out["top3"] += first < 3
            out["top10"] += 1
            out["mrr"] += 1.0 / (first + 1)
    return {k: 100 * v / n if k != "mrr" else v / n for k, v in out.items()}


def peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def llmc_run(tools: list[Tool], queries: list[str], index_class: Any = None) -> dict[str, Any]:
    from llmc_cli.services.search import ToolIndex

    started = time.perf_counter()
    index = (index_class or ToolIndex)(tools)
    index_ms = (time.perf_counter() - started) * 1000
    ranked, times = [], []
    for q in queries:
        t0 = time.perf_counter()
        found = index.search(q, TOP)
        times.append((time.perf_counter() - t0) * 1000)
        ranked.append([m.tool.qualified_name for m in found])
    return {"ranked": ranked, "index_ms": index_ms, "query_ms": statistics.median(times), "peak_rss_mb": peak_rss_mb()}


def semantic_run(tools: list[Tool], queries: list[str], vectors: Path | None = None) -> dict[str, Any]:
    """llmc with the semantic stage: the model loaded once, the tools' vectors computed into an
    empty cache (cold: wall and CPU time), then a fresh ranker reading them back (warm); the index
    time shown is the lexical index plus the warm vectors, the model's load apart. Query time is
    wall time and, beside it, the process's CPU time (what a query costs on an idle core); each
    request is encoded afresh (the stage's cache of recent requests is emptied before each)."""
    import tempfile

    from llmc_cli.services import semantic as sem
    from llmc_cli.services.search import ToolIndex

    t0 = time.perf_counter()
    model = sem.SemanticRanker.load(None).model
    load_ms = (time.perf_counter() - t0) * 1000
    with tempfile.TemporaryDirectory() as cache_dir:
        cache = vectors or Path(cache_dir)  # --vectors: kept between runs (cold only on the first)
        t0, c0 = time.perf_counter(), time.process_time()
        sem.SemanticRanker(model, cache).prepare(tools)
        cold_ms, cold_cpu_ms = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
        t0 = time.perf_counter()
        index = ToolIndex(tools)
        ranker = sem.SemanticRanker(model, cache)
        ranker.prepare(tools)
        index_ms = (time.perf_counter() - t0) * 1000
    ranked, times, cpu = [], [], []
    for q in queries:
        model._queries.clear()
        t0, c0 = time.perf_counter(), time.process_time()
        found = sem.fused_search(index, ranker, q, TOP)
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
        ranked.append([m.tool.qualified_name for m in found])
    return {
        "ranked": ranked,
        "index_ms": index_ms,
        "query_ms": statistics.median(times),
        "query_cpu_ms": statistics.median(cpu),
        "query_p95_ms": sorted(times)[int(0.95 * (len(times) - 1))],
        "model_load_ms": load_ms,
        "vectors_cold_ms": cold_ms,
        "vectors_cold_cpu_ms": cold_cpu_ms,
        "index_warm_ms": index_ms,
        "peak_rss_mb": peak_rss_mb(),
    }


def peers_python() -> Path:
    venv = public_tools.CACHE / "peers-venv"
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    if not marker.exists() or marker.read_text() != "\n".join(PEER_PINS):
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *PEER_PINS], check=True)
        marker.write_text("\n".join(PEER_PINS))
    return python


def peers_run(sets: dict[str, dict[str, Any]], budget: float) -> dict[str, Any]:
    payload = {"budget": budget, "sets": {name: {"tools": s["tools"], "queries": s["queries"]} for name, s in sets.items()}}
    proc = subprocess.run(
        [str(peers_python()), str(ROOT / "bench" / "tool_retrieval_peers.py")],
        input=json.dumps(payload),
        stdout=subprocess.PIPE,
        text=True,
        check=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def public_set(half: str) -> dict[str, Any]:
    pool = public_tools.load()
    queries = [q for q in pool.queries if half == "all" or q.half == half]
    queries.sort(key=lambda q: hashlib.sha256(f"order:{q.id}".encode()).digest())  # a prefix is a random sample
    tools = list(pool.tools.values())
    return {
        "label": f"public ({half} half)",
        "llmc_tools": [Tool(t.server, t.name, t.input_schema, description=t.description) for t in tools],
        "tools": [
            {"server": t.server, "name": t.name, "description": t.description, "input_schema": t.input_schema} for t in tools
        ],
        "queries": [q.text for q in queries],
        "expects": [q.expect for q in queries],
        "sources": [q.source for q in queries],
    }


def team_set() -> dict[str, Any]:
    import tool_search_bench as team

    tools = team.reference_tools() + team.saas_server()
    labelled = team.queries()
    return {
        "label": "team's 50",
        "llmc_tools": tools,
        "tools": [
            {"server": t.server, "name": t.name, "description": t.description or "", "input_schema": t.input_schema}
            for t in tools
        ],
        "queries": [q["query"] for q in labelled],
        "expects": [q["expect"] for q in labelled],
        "sources": ["team"] * len(labelled),
    }


def row(name: str, m: dict[str, float], run: dict[str, Any]) -> str:
    return (
        f"| {name} | {m['top1']:.1f}% | {m['top3']:.1f}% | {m['top10']:.1f}% | {m['mrr']:.3f} | "
        f"{run['query_ms']:.2f} ms | {run['index_ms']:.0f} ms |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--half", choices=["report", "tune", "all"], default="report")
    parser.add_argument("--peers", action="store_true", help="Also run the peers (installed into bench/.cache).")
    parser.add_argument("--team", action="store_true", help="Also the team's 50 queries (needs tests/node).")
    parser.add_argument("--semantic", action="store_true", help="Also llmc with the semantic stage (needs the extra).")
    parser.add_argument("--vectors", type=Path, help="Keep the semantic stage's tool vectors in this directory.")
    parser.add_argument("--misses", type=int, default=0, help="Print this many requests llmc misses at top 3.")
    parser.add_argument("--by-source", action="store_true", help="llmc's top-3 per source of the requests.")
    parser.add_argument("--json", type=Path, help="Write every figure to this file.")
    parser.add_argument(
        "--peer-budget",
        type=float,
        default=600.0,
        help="Seconds of queries per peer and set; a slower peer is measured on the random "
        "sample it answered, and llmc on the same sample beside it.",
    )
    args = parser.parse_args()
    sets = {"public": public_set(args.half)}
    if args.team:
        sets["team"] = team_set()
    peers = peers_run(sets, args.peer_budget) if args.peers else {}
    report: dict[str, Any] = {}
    for key, s in sets.items():
        print(f"\n### {s['label']}: {len(s['tools'])} tools, {len(s['queries'])} requests\n")
        print("| ranker | top-1 | top-3 | top-10 | MRR | query (median) | index |")
        print("|---|---|---|---|---|---|---|")
        runs = {"llmc": llmc_run(s["llmc_tools"], s["queries"])}
        if args.semantic:
            runs["llmc + semantic"] = semantic_run(s["llmc_tools"], s["queries"], args.vectors)
        runs |= peers.get(key, {})
        report[key] = {}
        for name, run in runs.items():
            if "error" in run:
                print(f"| {name} | did not run: {run['error']} |")
                report[key][name] = run
                continue
            n = len(run["ranked"])
            m = metrics(run["ranked"], s["expects"][:n])
            extra = {k: v for k, v in run.items() if k not in ("ranked", "error")}
            report[key][name] = {**m, **extra, "requests": n}
            if n < len(s["queries"]):
                mine = metrics(runs["llmc"]["ranked"][:n], s["expects"][:n])
                print(row(f"{name} (on {n} of them)", m, run))
                print(row(f"llmc on the same {n}", mine, runs["llmc"]))
            else:
                print(row(name, m, run))
        if "llmc + semantic" in runs:
            sr = runs["llmc + semantic"]
            print(
                f"\nsemantic stage: model load {sr['model_load_ms']:.0f} ms; tool vectors cold (computed) "
                f"{sr['vectors_cold_ms']:.0f} ms wall, {sr['vectors_cold_cpu_ms']:.0f} ms CPU; index warm (lexical + vectors from the cache) "
                f"{sr['index_warm_ms']:.0f} ms; query p95 {sr['query_p95_ms']:.2f} ms, CPU time median "
                f"{sr['query_cpu_ms']:.2f} ms; peak RSS "
                f"{runs['llmc']['peak_rss_mb']:.0f} MB after the lexical run, {sr['peak_rss_mb']:.0f} MB after the semantic one"
            )
        if args.by_source:
            llmc = runs["llmc"]["ranked"]
            totals, hits = Counter(s["sources"]), Counter()
            for found, expect, src in zip(llmc, s["expects"], s["sources"]):
                hits[src] += any(f in expect for f in found[:3])
            print("\nllmc top-3 by source: " + ", ".join(f"{k} {100 * hits[k] / v:.0f}% of {v}" for k, v in totals.items()))
        if args.misses and key == "public":
            shown = 0
            for q, found, expect in zip(s["queries"], runs["llmc"]["ranked"], s["expects"]):
                if not any(f in expect for f in found[:3]) and shown < args.misses:
                    shown += 1
                    print(f"miss: {q[:160]!r}\n  want {expect[:3]} got {found[:3]}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
