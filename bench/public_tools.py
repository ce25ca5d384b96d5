"""Public tool-retrieval data for bench/tool_retrieval_bench.py: tool lists with their docs and
requests labelled with the tool that answers them, from two packages that ship them, fetched at
run time into bench/.cache (never committed):

- PyPI package bfcl-eval (the Berkeley Function Calling Leaderboard's data): the AST sets
  (simple_python, multiple, parallel_multiple), the user-contributed "live" sets (live_simple,
  live_multiple, live_parallel_multiple) and the multi-turn set, whose tools are eight API suites
  (file system, messaging, trading, travel, vehicle, ...) whose descriptions all start with the
  same sentence about their suite: the case of a server's boilerplate.
- PyPI package nestful-wrapper (NESTFUL: RapidAPI endpoints, Glaive functions and the Schema-
  Guided Dialogue services, with enum-valued arguments).

Each source is one "server" of the pool; a tool is (server, name), the first definition of a name
kept. A request is labelled with every tool its answer calls; a hit is any of them at the rank.
Split: a request whose sha256(id) starts with an even byte is in the tuning half, an odd one in
the report half (stable across runs and machines; nothing about the ranking decides it).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CACHE = Path(__file__).resolve().parent / ".cache"
PACKAGES = {"bfcl-eval": "2026.3.23", "nestful-wrapper": "0.1.7"}

BFCL_SETS = {  # file stem -> server name in the pool
    "simple_python": "bfcl",
    "multiple": "bfcl",
    "parallel": "bfcl",
    "parallel_multiple": "bfcl",
    "simple_java": "bfcl-java",
    "simple_javascript": "bfcl-javascript",
    "live_simple": "bfcl-live",
    "live_multiple": "bfcl-live",
    "live_parallel": "bfcl-live",
    "live_parallel_multiple": "bfcl-live",
}
DISTRACTORS = {"irrelevance": "bfcl"}  # tools without a request that calls them
MORE_SUITES = ("memory_kv", "memory_vector", "memory_rec_sum", "web_search")  # likewise
MULTI_TURN = {  # the multi-turn set's class -> the file of its function docs
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}
NESTFUL = {
    "nestful-rapidapi": "executable/executable",
    "nestful-glaive": "non-executable/non-executable-glaive",
    "nestful-sgd": "non-executable/non-executable-sgd",
}
TYPES = {
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "list": "array",
    "str": "string",
    "int": "integer",
    "bool": "boolean",
    "any": "string",
    "long": "integer",
    "double": "number",
    "char": "string",
    "HashMap": "object",
    "ArrayList": "array",
    "Array": "array",
    "Boolean": "boolean",
    "String": "string",
}


@dataclass
class PublicTool:
    server: str
    name: str
    description: str
    input_schema: dict[str, Any]

    @property
    def qualified(self) -> str:
        return f"{self.server}.{self.name}"


@dataclass
class Query:
    id: str
    text: str
    expect: list[str]
    source: str
    half: str = field(init=False)

    def __post_init__(self) -> None:
        self.half = "tune" if hashlib.sha256(self.id.encode()).digest()[0] % 2 == 0 else "report"


def fetch() -> Path:
    """The two packages' data, unpacked under bench/.cache/data (downloaded once, no install)."""
    data = CACHE / "data"
    done = data / ".complete"
    if done.exists():
        return data
    wheels = CACHE / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    for name, version in PACKAGES.items():
        if not list(wheels.glob(f"{name.replace('-', '_')}-{version}-*.whl")):
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "-q",
                    "--no-deps",
                    "--only-binary",
                    ":all:",
                    "-d",
                    str(wheels),
                    f"{name}=={version}",
                ],
                check=True,
            )
    for wheel in wheels.glob("*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                if member.startswith(("bfcl_eval/data/", "data_v1/executable/", "data_v1/non-executable/")):
                    archive.extract(member, data)
    done.write_text("ok\n")
    return data


def _schema(node: Any) -> Any:
    """BFCL's Python-flavoured types as JSON Schema's (dict -> object, float -> number, ...)."""
    if isinstance(node, dict):
        out = {k: _schema(v) for k, v in node.items()}
        if isinstance(out.get("type"), str):
            out["type"] = TYPES.get(out["type"], out["type"])
        return out
    if isinstance(node, list):
        return [_schema(v) for v in node]
    return node


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _last_user(turn: list[dict[str, Any]]) -> str:
    texts = [m["content"] for m in turn if m.get("role") == "user" and isinstance(m.get("content"), str)]
    return texts[-1] if texts else ""


class Pool:
    def __init__(self) -> None:
        self.tools: dict[str, PublicTool] = {}
        self.queries: list[Query] = []

    def add_tool(self, server: str, name: str, description: str, schema: dict[str, Any]) -> None:
        self.tools.setdefault(f"{server}.{name}", PublicTool(server, name, description, _schema(schema)))

    def add_query(self, qid: str, text: str, server: str, names: list[str], source: str) -> None:
        expect = sorted({f"{server}.{n}" for n in names if f"{server}.{n}" in self.tools})
        if text.strip() and expect:
            self.queries.append(Query(qid, text.strip(), expect, source))


def _bfcl(pool: Pool, data: Path) -> None:
    root = data / "bfcl_eval" / "data"
    for stem, server in BFCL_SETS.items():
        answers = {a["id"]: a for a in _lines(root / "possible_answer" / f"BFCL_v4_{stem}.json")}
        for item in _lines(root / f"BFCL_v4_{stem}.json"):
            for fn in item["function"]:
                pool.add_tool(server, fn["name"], fn.get("description", ""), fn.get("parameters") or {})
            called = [name for call in answers[item["id"]]["ground_truth"] for name in call]
            pool.add_query(item["id"], _last_user(item["question"][0]), server, called, stem)
    for stem, server in DISTRACTORS.items():
        for item in _lines(root / f"BFCL_v4_{stem}.json"):
            for fn in item["function"]:
                pool.add_tool(server, fn["name"], fn.get("description", ""), fn.get("parameters") or {})
    for stem in MORE_SUITES:
        for fn in _lines(root / "multi_turn_func_doc" / f"{stem}.json"):
            pool.add_tool(stem, fn["name"], fn.get("description", ""), fn.get("parameters") or {})
    docs: dict[str, str] = {}
    for cls, stem in MULTI_TURN.items():
        for fn in _lines(root / "multi_turn_func_doc" / f"{stem}.json"):
            pool.add_tool(stem, fn["name"], fn.get("description", ""), fn.get("parameters") or {})
            docs.setdefault(fn["name"], stem)
    answers = {a["id"]: a for a in _lines(root / "possible_answer" / "BFCL_v4_multi_turn_base.json")}
    for item in _lines(root / "BFCL_v4_multi_turn_base.json"):
        for turn_no, (turn, calls) in enumerate(zip(item["question"], answers[item["id"]]["ground_truth"])):
            called = [m.group(1) for call in calls if (m := re.match(r"\s*([A-Za-z_][\w.]*)\s*\(", call))]
            by_server: dict[str, list[str]] = {}
            for name in called:
                if name in docs:
                    by_server.setdefault(docs[name], []).append(name)
            if len(by_server) == 1:  # a turn across suites has no one server to label it with
                ((server, names),) = by_server.items()
                pool.add_query(f"{item['id']}:{turn_no}", _last_user(turn), server, names, "multi_turn_base")


def _nestful_schema(params: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = {}
    required = []
    for name, spec in params.items():
        prop: dict[str, Any] = {"type": spec.get("type", "string"), "description": spec.get("description", "")}
        if spec.get("allowed_values"):
            prop["enum"] = spec["allowed_values"]
        if "default_value" in spec:
            prop["default"] = spec["default_value"]
        props[name] = prop
        if spec.get("required"):
            required.append(name)
    return {"type": "object", "properties": props, "required": required}


def _nestful(pool: Pool, data: Path) -> None:
    root = data / "data_v1"
    for server, stem in NESTFUL.items():
        for fn in json.loads((root / f"{stem}-spec.json").read_text()):
            pool.add_tool(server, fn["name"], fn.get("description", ""), _nestful_schema(fn.get("query_parameters") or {}))
        for n, item in enumerate(json.loads((root / f"{stem}-data.json").read_text())):
            pool.add_query(f"{server}:{n}", item["input"], server, [c["name"] for c in item["output"]], server)


def load() -> Pool:
    data = fetch()
    pool = Pool()
    _bfcl(pool, data)
    _nestful(pool, data)
    return pool


if __name__ == "__main__":
    p = load()
    from collections import Counter

    print(f"tools: {len(p.tools)}; queries: {len(p.queries)}")
    print("tools by server:", dict(Counter(t.server for t in p.tools.values())))
    print("queries by source:", dict(Counter(q.source for q in p.queries)))
    print("halves:", dict(Counter(q.half for q in p.queries)))
