"""The BERT encoder of :mod:`._bert` as an ONNX graph, run by ONNX Runtime.

The graph is built in memory from the weights :class:`~._bert.BertEncoder`
already holds (query scale and GELU's ``1/sqrt(2)`` folded in, query, key and
value fused), so both engines compute the same function; only the kernels
differ, by float32 rounding (about 1e-7 on the vectors). Nothing is
downloaded or exported and nothing is written to disk: the graph is
serialised with the few protobuf messages of the ONNX format written out
below (no ``onnx`` package needed; 12 kB, the weights stay out of it and are
handed over as arrays), then ONNX Runtime optimises it (``ORT_ENABLE_ALL``)
and packs the weight matrices once for its GEMM, where OpenBLAS packs them
again on every call: at a question's dozen tokens the 42 MB of weights are
the work, and packing them doubled it.

The dense layers see the tokens of all texts of a run one after the other
(a 2-D matrix, so each projection and its bias are one ``Gemm``); attention
sees them padded to the run's longest text, with ``-inf`` at the padding as in
:mod:`._bert`, so padding never changes a real position's result. A batch is
cut into runs of texts of similar length (the caller sorts by length), so
padding adds at most a quarter of a run's tokens.
"""

from __future__ import annotations

import math
import struct
import threading
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ._bert import _attention_blocks

if TYPE_CHECKING:
    from ._bert import BertEncoder

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

__all__ = ["OnnxEncoder", "build_model"]

_OPSET = 17  # LayerNormalization
_EXTERNAL_SIZE = 64  # constants of at least this many elements are handed over as arrays, not serialised
_IR_VERSION = 8

# -- a minimal protobuf writer for the ONNX messages -------------------------
# Field numbers from onnx/onnx.proto (ModelProto, GraphProto, NodeProto, ...).


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1  # negative int64 values are ten-byte varints
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _int(field: int, value: int) -> bytes:
    return _key(field, 0) + _varint(value)


def _bytes(field: int, value: bytes) -> bytes:
    return _key(field, 2) + _varint(len(value)) + value


def _str(field: int, value: str) -> bytes:
    return _bytes(field, value.encode())


def _float(field: int, value: float) -> bytes:
    return _key(field, 5) + struct.pack("<f", value)


_FLOAT, _INT64 = 1, 7  # TensorProto.DataType
_ATTR_FLOAT, _ATTR_INT, _ATTR_INTS = 1, 2, 7  # AttributeProto.AttributeType


def _tensor(name: str, array: npt.NDArray[Any], *, external: bool = False) -> bytes:
    """TensorProto: dims=1, data_type=2, name=8, raw_data=9 (little-endian).

    ``external``: no data, only a reference (external_data=13, data_location=14) that the
    session's ``add_external_initializers`` fills from the array itself, without a copy.
    """
    if array.dtype == np.float32:
        kind = _FLOAT
    elif array.dtype == np.int64:
        kind = _INT64
    else:  # pragma: no cover - only the two types above are built
        raise TypeError(array.dtype)
    dims = b"".join(_int(1, d) for d in array.shape)
    if external:
        where = _bytes(13, _str(1, "location") + _str(2, "memory"))
        return dims + _int(2, kind) + _str(8, name) + where + _int(14, 1)
    data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
    return dims + _int(2, kind) + _str(8, name) + _bytes(9, data)


def _attribute(name: str, value: float | int | Sequence[int]) -> bytes:
    """AttributeProto: name=1, f=2, i=3, ints=8, type=20."""
    if isinstance(value, float):
        return _str(1, name) + _float(2, value) + _int(20, _ATTR_FLOAT)
    if isinstance(value, int):
        return _str(1, name) + _int(3, value) + _int(20, _ATTR_INT)
    return _str(1, name) + b"".join(_int(8, v) for v in value) + _int(20, _ATTR_INTS)


def _value_info(name: str, elem_type: int, dims: Sequence[int | str]) -> bytes:
    """ValueInfoProto(name=1, type=2) -> TypeProto(tensor_type=1) -> (elem_type=1, shape=2) -> dim=1."""
    shape = b"".join(_bytes(1, _int(1, d) if isinstance(d, int) else _str(2, d)) for d in dims)
    return _str(1, name) + _bytes(2, _bytes(1, _int(1, elem_type) + _bytes(2, shape)))


class _Graph:
    """Nodes and initializers collected in order, serialised as a GraphProto."""

    def __init__(self) -> None:
        self.nodes: list[bytes] = []
        self.initializers: list[bytes] = []
        self.external: dict[str, npt.NDArray[Any]] = {}
        self._count = 0

    def const(self, name: str, array: npt.NDArray[Any]) -> str:
        """A constant; weights (not the small shape constants) stay in ``array``'s memory."""
        external = array.size >= _EXTERNAL_SIZE
        self.initializers.append(_tensor(name, array, external=external))
        if external:
            self.external[name] = array
        return name

    def op(self, op_type: str, inputs: Iterable[str], *, out: str | None = None,
           **attrs: float | int | Sequence[int]) -> str:
        """Add a node (NodeProto: input=1, output=2, name=3, op_type=4, attribute=5); returns its output's name."""
        self._count += 1
        name = out or f"{op_type.lower()}_{self._count}"
        body = b"".join(_str(1, i) for i in inputs) + _str(2, name)
        body += _str(3, f"n{self._count}") + _str(4, op_type)
        body += b"".join(_bytes(5, _attribute(k, v)) for k, v in attrs.items())
        self.nodes.append(body)
        return name

    def model(self, inputs: list[bytes], outputs: list[bytes]) -> bytes:
        """ModelProto: ir_version=1, producer_name=2, graph=7, opset_import=8 (domain=1, version=2)."""
        graph = b"".join(_bytes(1, n) for n in self.nodes) + _str(2, "memoryport-bert")
        graph += b"".join(_bytes(5, t) for t in self.initializers)
        graph += b"".join(_bytes(11, i) for i in inputs) + b"".join(_bytes(12, o) for o in outputs)
        opset = _bytes(8, _str(1, "") + _int(2, _OPSET))
        return _int(1, _IR_VERSION) + _str(2, "memoryport") + _bytes(7, graph) + opset


def build_model(encoder: BertEncoder) -> tuple[bytes, dict[str, npt.NDArray[Any]]]:
    """The serialised ONNX model of ``encoder`` and its weights by name (kept out of the bytes).

    Inputs: ``input_ids``, ``token_type_ids``, ``position_ids`` (tokens: texts padded to the
    longest, one after the other), ``mask`` (batch, 1, 1, length: 0, or -inf at padding),
    ``qkv_shape`` (batch, length, 3, heads, head size). Output: ``hidden`` (tokens, hidden size).

    Example:
        >>> data, weights = build_model(encoder)   # doctest: +SKIP
    """
    c = encoder.config
    g = _Graph()
    x = g.op("Gather", [g.const("word", encoder.word), "input_ids"])
    x = g.op("Add", [x, g.op("Gather", [g.const("position", encoder.position), "position_ids"])])
    x = g.op("Add", [x, g.op("Gather", [g.const("token_type", encoder.token_type), "token_type_ids"])])
    eps = float(c.layer_norm_eps)
    x = g.op("LayerNormalization", [x, g.const("emb_ln_w", encoder.emb_ln_w), g.const("emb_ln_b", encoder.emb_ln_b)],
             axis=-1, epsilon=eps)
    ctx_shape = g.const("ctx_shape", np.array([-1, c.hidden_size], np.int64))
    picks = [g.const(f"pick{i}", np.array(i, np.int64)) for i in range(3)]
    last = len(encoder.layers) - 1
    for i, layer in enumerate(encoder.layers):
        p = f"l{i}."
        qkv = g.op("Gemm", [x, g.const(p + "qkv_w", layer.qkv_w), g.const(p + "qkv_b", layer.qkv_b)])
        qkv = g.op("Reshape", [qkv, "qkv_shape"])  # (batch, length, 3, heads, head_dim)
        q = g.op("Transpose", [g.op("Gather", [qkv, picks[0]], axis=2)], perm=[0, 2, 1, 3])
        k = g.op("Transpose", [g.op("Gather", [qkv, picks[1]], axis=2)], perm=[0, 2, 3, 1])
        v = g.op("Transpose", [g.op("Gather", [qkv, picks[2]], axis=2)], perm=[0, 2, 1, 3])
        scores = g.op("Add", [g.op("MatMul", [q, k]), "mask"])
        probs = g.op("Softmax", [scores], axis=-1)
        ctx = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, ctx_shape])
        attn = g.op("Gemm", [ctx, g.const(p + "out_w", layer.out_w), g.const(p + "out_b", layer.out_b)])
        x = g.op("LayerNormalization", [g.op("Add", [attn, x]), g.const(p + "ln1_w", layer.ln1_w),
                                        g.const(p + "ln1_b", layer.ln1_b)], axis=-1, epsilon=eps)
        h = g.op("Gemm", [x, g.const(p + "up_w", layer.up_w), g.const(p + "up_b", layer.up_b)])
        h = _activation(g, h, c.hidden_act, p)
        out = g.op("Gemm", [h, g.const(p + "down_w", layer.down_w), g.const(p + "down_b", layer.down_b)])
        x = g.op("LayerNormalization", [g.op("Add", [out, x]), g.const(p + "ln2_w", layer.ln2_w),
                                        g.const(p + "ln2_b", layer.ln2_b)], axis=-1, epsilon=eps,
                 out="hidden" if i == last else None)
    if not encoder.layers:
        g.op("Identity", [x], out="hidden")
    inputs = [
        _value_info("input_ids", _INT64, ["tokens"]),
        _value_info("token_type_ids", _INT64, ["tokens"]),
        _value_info("position_ids", _INT64, ["tokens"]),
        _value_info("mask", _FLOAT, ["batch", 1, 1, "length"]),
        _value_info("qkv_shape", _INT64, [5]),
    ]
    return g.model(inputs, [_value_info("hidden", _FLOAT, ["tokens", c.hidden_size])]), g.external


def _activation(g: _Graph, h: str, act: str, prefix: str) -> str:
    """The feed-forward activation on ``h``, as in :mod:`._bert` (the weights already carry GELU's 1/sqrt(2))."""
    if act == "relu":
        return g.op("Relu", [h])
    if act == "gelu":  # u + u*erf(u)
        return g.op("Add", [h, g.op("Mul", [h, g.op("Erf", [h])])])
    # gelu_new / gelu_pytorch_tanh: 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3)))
    cube = g.op("Mul", [g.op("Mul", [h, h]), h])
    inner = g.op("Add", [h, g.op("Mul", [cube, g.const(prefix + "c0", np.array(0.044715, np.float32))])])
    inner = g.op("Mul", [inner, g.const(prefix + "c1", np.array(math.sqrt(2.0 / math.pi), np.float32))])
    one_plus = g.op("Add", [g.op("Tanh", [inner]), g.const(prefix + "one", np.array(1.0, np.float32))])
    half = g.op("Mul", [one_plus, g.const(prefix + "half", np.array(0.5, np.float32))])
    return g.op("Mul", [h, half])


class OnnxEncoder:
    """Runs :func:`build_model`'s graph with ONNX Runtime; the same ``forward`` as :class:`~._bert.BertEncoder`.

    One session per intra-op thread count, created on first use (ONNX Runtime
    cannot change a session's count): :class:`~.local.LocalEmbedder` runs a
    question on one thread and large batches on the default count. Each
    session copies the weights and packs its own (about 100 MB for
    all-MiniLM-L6-v2). Thread spinning is off, so an idle pool does not burn
    a core that the store's own threads need.

    Args:
        encoder: the numpy encoder whose weights the graph takes.
        ort: the imported ``onnxruntime`` module.
        counts: the thread counts that will be asked for. The weights are kept
            until each has its session, then let go (the sessions hold copies).

    Example:
        >>> OnnxEncoder(encoder, onnxruntime).forward([ids], threads=1)[0].shape   # doctest: +SKIP
        (13, 384)
    """

    def __init__(self, encoder: BertEncoder, ort: Any, counts: Collection[int] = (0, 1)) -> None:
        self.config = encoder.config
        self._ort = ort
        self._model, weights = build_model(encoder)
        # Handed to each new session, which copies them (OrtValues keep their arrays alive).
        self._names = list(weights)
        self._values: list[Any] | None = [ort.OrtValue.ortvalue_from_numpy(weights[n]) for n in self._names]
        self._counts = set(counts)
        self._sessions: dict[int, Any] = {}
        self._lock = threading.Lock()

    def session(self, threads: int) -> Any:
        """The session for ``threads`` intra-op threads (0: ONNX Runtime's default), created on first use."""
        with self._lock:
            found = self._sessions.get(threads)
            if found is None:
                if self._values is None:
                    raise ValueError(f"no session for {threads} threads: only {sorted(self._sessions)} were asked for")
                ort = self._ort
                opts = ort.SessionOptions()
                opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                opts.intra_op_num_threads = threads
                opts.inter_op_num_threads = 1
                opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
                opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
                opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
                opts.log_severity_level = 3
                opts.add_external_initializers(self._names, self._values)
                found = ort.InferenceSession(self._model, sess_options=opts, providers=["CPUExecutionProvider"])
                self._sessions[threads] = found
                if self._counts <= set(self._sessions):
                    self._values = None  # every session made: the weights may go
            return found

    def forward(self, ids: list[I64], type_ids: list[I64] | None = None, *, threads: int = 1) -> list[F32]:
        """Encode texts given as token-id arrays; returns each text's ``(length, hidden)`` states.

        ``threads``: the session's intra-op thread count (0: ONNX Runtime's default, one per core).
        """
        c = self.config
        lengths = [len(t) for t in ids]
        if min(lengths, default=1) < 1 or max(lengths, default=0) > c.max_positions:
            raise ValueError("token sequences must have 1..max_position_embeddings tokens")
        session = self.session(threads)
        out: list[F32] = []
        # One run per block of texts of similar length (callers sort by length): padding adds at most
        # a quarter of a block's tokens, where one long text would otherwise pad every short one.
        for first, last in _attention_blocks(lengths):
            out += self._run(session, ids[first:last], None if type_ids is None else type_ids[first:last])
        return out

    def _run(self, session: Any, ids: list[I64], type_ids: list[I64] | None) -> list[F32]:
        """One session run on texts padded to the longest of them."""
        c = self.config
        lengths = [len(t) for t in ids]
        longest = max(lengths)
        n = len(ids)
        input_ids = np.zeros((n, longest), np.int64)
        types = np.zeros((n, longest), np.int64)
        mask = np.zeros((n, 1, 1, longest), np.float32)
        for j, m in enumerate(lengths):
            input_ids[j, :m] = ids[j]
            if type_ids is not None:
                types[j, :m] = type_ids[j]
            mask[j, 0, 0, m:] = -np.inf
        feeds = {
            "input_ids": input_ids.reshape(-1),
            "token_type_ids": types.reshape(-1),
            "position_ids": np.tile(np.arange(longest, dtype=np.int64), n),
            "mask": mask,
            "qkv_shape": np.array([n, longest, 3, c.num_heads, c.hidden_size // c.num_heads], np.int64),
        }
        (hidden,) = session.run(["hidden"], feeds)
        hidden = hidden.reshape(n, longest, c.hidden_size)
        return [hidden[j, :m] for j, m in enumerate(lengths)]
