"""Run by bench/tool_retrieval_bench.py inside bench/.cache/peers-venv (the peers installed from
PyPI, pinned): reads {"sets": {name: {"tools": [...], "queries": [...]}}} on stdin, builds each
peer's index over each set's tools and writes each query's top 10 (qualified names) and the
times as JSON on stdout. A peer that cannot be imported is reported with the reason.

Each tool is given to a peer as an MCP tool definition whose name is `server__name` (the peers
key tools by a unique name; the server's words are in it, as llmc indexes its server field).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import statistics
import sys
import time
from typing import Any, Callable

logging.disable(logging.CRITICAL)
TOP = 10


def uid(tool: dict[str, Any]) -> str:
    return f"{tool['server']}__{tool['name']}"


def mcp_dict(tool: dict[str, Any]) -> dict[str, Any]:
    return {"name": uid(tool), "description": tool["description"], "inputSchema": tool["input_schema"]}


def rank_bm25_peer(tools: list[dict[str, Any]]) -> Callable[[str], list[str]]:
    from rank_bm25 import BM25Okapi

    def tokens(text: str) -> list[str]:
        return re.findall(r"\w+", re.sub(r"(?<=[a-z])(?=[A-Z])", " ", text).replace("_", " ").lower())

    def text(tool: dict[str, Any]) -> str:
        props = (tool["input_schema"] or {}).get("properties") or {}
        args = " ".join(f"{k} {v.get('description', '')}" for k, v in props.items() if isinstance(v, dict))
        return f"{tool['server']} {tool['name']} {tool['description']} {args}"

    bm25 = BM25Okapi([tokens(text(t)) for t in tools])
    ids = [uid(t) for t in tools]

    def search(query: str) -> list[str]:
        scores = bm25.get_scores(tokens(query))
        order = sorted(range(len(ids)), key=lambda i: -scores[i])
        return [ids[i] for i in order[:TOP] if scores[i] > 0]

    return search


def ratel_peer(tools: list[dict[str, Any]]) -> Callable[[str], list[str]]:
    from ratel_ai.catalog import Tool, ToolRegistry

    registry = ToolRegistry(method="bm25")
    pending = registry.register([Tool(uid(t), uid(t), t["description"], t["input_schema"] or {}) for t in tools])
    asyncio.run(_await(pending))

    def search(query: str) -> list[str]:
        return [hit.tool_id for hit in registry.search(query, TOP)]

    return search


async def _await(awaitable: Any) -> None:
    await awaitable


def dehydrator_peer(tools: list[dict[str, Any]]) -> Callable[[str], list[str]]:
    from dehydrator import ToolIndex

    index = ToolIndex(
        [{"name": uid(t), "description": t["description"], "input_schema": t["input_schema"] or {}} for t in tools], top_k=TOP
    )
    return index.search


def orchestrator_peer(tools: list[dict[str, Any]]) -> Callable[[str], list[str]]:
    from mcp_orchestrator.tools.search import ToolSearchService

    service = ToolSearchService()
    for t in tools:
        service.index_tool(
            t["server"], {"name": t["name"], "description": t["description"], "input_schema": t["input_schema"] or {}}
        )

    def search(query: str) -> list[str]:
        return [uid({"server": r.server_name, "name": r.tool_name}) for r in service.search(query, limit=TOP)]

    return search


def graph_tool_call_peer(tools: list[dict[str, Any]]) -> Callable[[str], list[str]]:
    from graph_tool_call import ToolGraph

    graph = ToolGraph()
    graph.ingest_mcp_tools([mcp_dict(t) for t in tools], detect_dependencies=False)

    def search(query: str) -> list[str]:
        return [s.name for s in graph.retrieve(query, top_k=TOP)]

    return search


PEERS = {
    "rank_bm25": rank_bm25_peer,
    "ratel-ai": ratel_peer,
    "dehydrator": dehydrator_peer,
    "mcp-orchestrator": orchestrator_peer,
    "graph-tool-call": graph_tool_call_peer,
}


def run(tools: list[dict[str, Any]], queries: list[str], budget: float) -> dict[str, Any]:
    """Each peer's rankings of the queries, in order, until it has spent `budget` seconds on
    them (the queries come in a random order, so the ones answered are a random sample)."""
    out: dict[str, Any] = {}
    back = {uid(t): f"{t['server']}.{t['name']}" for t in tools}
    for name, make in PEERS.items():
        try:
            started = time.perf_counter()
            search = make(tools)
            index_ms = (time.perf_counter() - started) * 1000
            ranked, times = [], []
            spent = 0.0
            for q in queries:
                if spent > budget:
                    break
                t0 = time.perf_counter()
                found = search(q)
                times.append(time.perf_counter() - t0)
                spent += times[-1]
                ranked.append([back.get(f, f) for f in found[:TOP]])
            median = statistics.median(times) * 1000 if times else 0.0
            out[name] = {"ranked": ranked, "index_ms": index_ms, "query_ms": median}
            print(f"{name}: {len(ranked)} queries, {median:.2f} ms median", file=sys.stderr, flush=True)
        except Exception as exc:  # a peer that does not run is reported, not fatal
            out[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            print(f"{name}: {out[name]['error']}", file=sys.stderr, flush=True)
    return out


def main() -> None:
    payload = json.load(sys.stdin)
    budget = float(payload.get("budget", 1e9))
    json.dump({name: run(s["tools"], s["queries"], budget) for name, s in payload["sets"].items()}, sys.stdout)


if __name__ == "__main__":
    main()
