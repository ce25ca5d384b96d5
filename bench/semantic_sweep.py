"""Tune the semantic stage's fusion (services/semantic.py) on one half of the public data: each
request's lexical ranking and each text variant's cosine similarities are computed once, then
reciprocal rank fusion is replayed for every RRF k and semantic weight, printing top-1/top-3/MRR.

    .venv/bin/python bench/semantic_sweep.py [--half tune|report|all] [--variants]

Tune on `tune` only; bench/tool_retrieval_bench.py --semantic gives the report half's figures.
The shipped tool text's vectors are cached in bench/.cache/vectors (the first run embeds the
1,955 tools); --variants also embeds two shorter tool texts (uncached).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from tool_retrieval_bench import metrics, public_set  # noqa: E402

from llmc_cli.model import Tool  # noqa: E402
from llmc_cli.services import semantic as sem  # noqa: E402
from llmc_cli.services.search import ToolIndex  # noqa: E402
from llmc_cli.services.search_text import schema_text  # noqa: E402


def words(name: str) -> str:
    return " ".join(name.replace("_", " ").replace("-", " ").replace(".", " ").split())


def name_desc(t: Tool) -> str:
    return f"{words(t.name)}. {t.description or ''}"[: sem.MAX_TEXT]


def name_desc_args(t: Tool) -> str:
    names, _docs, _values = schema_text(t.input_schema)
    return f"{words(t.name)}. {t.description or ''}. arguments: {' '.join(dict.fromkeys(names))}"[: sem.MAX_TEXT]


VARIANTS: dict[str, Callable[[Tool], str]] = {
    "shipped (name, title, description, args, values)": sem.tool_text,
    "name + description": name_desc,
    "name + description + args": name_desc_args,
}


def fuse(lex: list[int], sem_rank: list[int], k: float, w: float, depth: int) -> list[int]:
    scores: dict[int, float] = {}
    for r, i in enumerate(lex[:depth], 1):
        scores[i] = 1.0 / (k + r)
    for r, i in enumerate(sem_rank[:depth], 1):
        scores[i] = scores.get(i, 0.0) + w / (k + r)
    return sorted(scores, key=lambda i: (-scores[i], i))[:10]


def main() -> None:
    import numpy as np

    parser = argparse.ArgumentParser()
    parser.add_argument("--half", choices=["tune", "report", "all"], default="tune")
    parser.add_argument("--variants", action="store_true", help="Also the two shorter tool texts.")
    args = parser.parse_args()
    s = public_set(args.half)
    tools: list[Tool] = s["llmc_tools"]
    names = [t.qualified_name for t in tools]
    index = ToolIndex(tools)
    position = {id(t): i for i, t in enumerate(index.tools)}
    lexical = [[position[id(m.tool)] for m in index.search(q, sem.CANDIDATES)] for q in s["queries"]]
    ranker = sem.SemanticRanker.load(ROOT / "bench" / ".cache" / "vectors" / sem.MODEL_ID)
    qv = ranker._encode(s["queries"])
    print(f"{args.half} half: {len(tools)} tools, {len(s['queries'])} requests")
    lex_only = metrics([[names[i] for i in lx[:10]] for lx in lexical], s["expects"])
    print(f"lexical alone: top1 {lex_only['top1']:.1f} top3 {lex_only['top3']:.1f} mrr {lex_only['mrr']:.3f}")
    for label, text in VARIANTS.items() if args.variants else list(VARIANTS.items())[:1]:
        if text is sem.tool_text:
            ranker.prepare(tools)  # from the cache after the first run
            tv = ranker.vectors
        else:
            tv = ranker._encode([text(t) for t in tools])
        sims = qv @ tv.T
        order = np.argsort(-sims, axis=1)[:, : sem.CANDIDATES].tolist()
        alone = metrics([[names[i] for i in o[:10]] for o in order], s["expects"])
        print(f"\n{label}: semantic alone top1 {alone['top1']:.1f} top3 {alone['top3']:.1f} mrr {alone['mrr']:.3f}")
        for k in (5, 10, 20, 30, 60, 100):
            cells = []
            for w in (0.5, 0.75, 1.0, 1.25, 1.5, 2.0):
                ranked = [[names[i] for i in fuse(lx, o, k, w, sem.CANDIDATES)] for lx, o in zip(lexical, order, strict=True)]
                m = metrics(ranked, s["expects"])
                cells.append(f"w{w}: {m['top1']:.1f}/{m['top3']:.1f}/{m['mrr']:.3f}")
            print(f"  k={k:<3} " + "  ".join(cells))


if __name__ == "__main__":
    main()
