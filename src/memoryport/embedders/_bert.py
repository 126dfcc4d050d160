"""A BERT encoder in numpy, float32 throughout, for sentence-embedding models.

This module holds the arithmetic only; :mod:`memoryport.embedders.local` reads
the model folder and tokenises. Three things make it fast without changing the
result beyond float32 rounding:

* **No padding in the dense layers.** The tokens of all texts of a batch are
  packed into one ``(tokens, hidden)`` matrix: the projections, the
  feed-forward block and the layer norms (over 80% of the work) never see a
  padding position. Only attention is computed per text, on padded blocks of
  texts of similar length (the batch is sorted by length first).
* **Constants folded into weights.** The attention scale ``1/sqrt(d)`` is
  folded into the query projection; the ``1/sqrt(2)`` inside GELU's ``erf``
  into the first feed-forward layer and its inverse into the second, so GELU
  becomes ``u + u*erf(u)``. Query, key and value are one fused projection.
* **Exact GELU.** ``erf`` comes from Abramowitz & Stegun 7.1.26 (absolute
  error below 1.5e-7, the size of float32 rounding), not the tanh
  approximation, so the vectors match the reference implementation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

__all__ = ["BertConfig", "BertEncoder"]

_SQRT_HALF = np.float32(1.0 / math.sqrt(2.0))
_P = np.float32(0.3275911)
_A1, _A2, _A3, _A4, _A5 = (
    np.float32(0.254829592),
    np.float32(-0.284496736),
    np.float32(1.421413741),
    np.float32(-1.453152027),
    np.float32(1.061405429),
)
# Rows of the (tokens, intermediate) activation processed at a time by GELU, so
# that its dozen elementwise passes run on a block that stays in cache.
_GELU_ROWS = 64


@dataclass(frozen=True)
class BertConfig:
    """The parts of a Hugging Face ``config.json`` that the encoder needs."""

    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_positions: int
    layer_norm_eps: float
    hidden_act: str
    type_vocab_size: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BertConfig:
        """Read a ``config.json`` mapping; raises ``ValueError`` for what this encoder cannot run."""
        model_type = data.get("model_type", "bert")
        if model_type not in ("bert",):
            raise ValueError(f"model_type {model_type!r} is not supported (BERT-family models only)")
        if data.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("only absolute position embeddings are supported")
        act = data.get("hidden_act", "gelu")
        if act not in ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu"):
            raise ValueError(f"hidden_act {act!r} is not supported")
        cfg = cls(
            hidden_size=int(data["hidden_size"]),
            num_layers=int(data["num_hidden_layers"]),
            num_heads=int(data["num_attention_heads"]),
            intermediate_size=int(data["intermediate_size"]),
            max_positions=int(data.get("max_position_embeddings", 512)),
            layer_norm_eps=float(data.get("layer_norm_eps", 1e-12)),
            hidden_act=act,
            type_vocab_size=int(data.get("type_vocab_size", 2)),
        )
        if cfg.hidden_size % cfg.num_heads:
            raise ValueError("hidden_size is not a multiple of num_attention_heads")
        return cfg


@dataclass
class _Layer:
    qkv_w: F32  # (H, 3H), query part pre-scaled by 1/sqrt(head_dim)
    qkv_b: F32
    out_w: F32  # (H, H)
    out_b: F32
    ln1_w: F32
    ln1_b: F32
    up_w: F32  # (H, I), pre-scaled by 1/sqrt(2) for erf GELU
    up_b: F32
    down_w: F32  # (I, H), pre-scaled by 1/sqrt(2) for erf GELU
    down_b: F32
    ln2_w: F32
    ln2_b: F32


def _strip_prefix(weights: Mapping[str, Any]) -> dict[str, Any]:
    """Accept both ``embeddings.*`` and ``bert.embeddings.*`` style checkpoints."""
    for prefix in ("", "bert.", "model."):
        if f"{prefix}embeddings.word_embeddings.weight" in weights:
            return {k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)}
    raise ValueError("no BERT embedding weights (embeddings.word_embeddings.weight) in the checkpoint")


def _f32(a: Any) -> F32:
    return np.ascontiguousarray(np.asarray(a, dtype=np.float32))


class BertEncoder:
    """A BERT encoder over numpy arrays, returning the last hidden states per text.

    Args:
        config: the model's shape.
        weights: tensor name -> array, as in the checkpoint (``safetensors``).
    """

    def __init__(self, config: BertConfig, weights: Mapping[str, Any]) -> None:
        w = _strip_prefix(weights)
        c = config
        self.config = c
        head_dim = c.hidden_size // c.num_heads
        self._head_dim = head_dim
        self._erf_gelu = c.hidden_act == "gelu"
        try:
            self.word = _f32(w["embeddings.word_embeddings.weight"])
            self.position = _f32(w["embeddings.position_embeddings.weight"])
            types = w.get("embeddings.token_type_embeddings.weight")
            self.token_type = _f32(types) if types is not None else np.zeros((1, c.hidden_size), np.float32)
            self.emb_ln_w = _f32(w["embeddings.LayerNorm.weight"])
            self.emb_ln_b = _f32(w["embeddings.LayerNorm.bias"])
            scale = np.float32(1.0 / math.sqrt(head_dim))
            act_in = _SQRT_HALF if self._erf_gelu else np.float32(1.0)
            self.layers: list[_Layer] = []
            for i in range(c.num_layers):
                p = f"encoder.layer.{i}."
                q_w = np.asarray(w[p + "attention.self.query.weight"], np.float32) * scale
                q_b = np.asarray(w[p + "attention.self.query.bias"], np.float32) * scale
                self.layers.append(
                    _Layer(
                        qkv_w=_f32(
                            np.concatenate(
                                [q_w, w[p + "attention.self.key.weight"], w[p + "attention.self.value.weight"]]
                            ).T
                        ),
                        qkv_b=_f32(
                            np.concatenate(
                                [q_b, w[p + "attention.self.key.bias"], w[p + "attention.self.value.bias"]]
                            )
                        ),
                        out_w=_f32(np.asarray(w[p + "attention.output.dense.weight"]).T),
                        out_b=_f32(w[p + "attention.output.dense.bias"]),
                        ln1_w=_f32(w[p + "attention.output.LayerNorm.weight"]),
                        ln1_b=_f32(w[p + "attention.output.LayerNorm.bias"]),
                        up_w=_f32(np.asarray(w[p + "intermediate.dense.weight"], np.float32).T * act_in),
                        up_b=_f32(np.asarray(w[p + "intermediate.dense.bias"], np.float32) * act_in),
                        down_w=_f32(np.asarray(w[p + "output.dense.weight"], np.float32).T * act_in),
                        down_b=_f32(w[p + "output.dense.bias"]),
                        ln2_w=_f32(w[p + "output.LayerNorm.weight"]),
                        ln2_b=_f32(w[p + "output.LayerNorm.bias"]),
                    )
                )
        except KeyError as exc:
            raise ValueError(f"the checkpoint lacks tensor {exc.args[0]!r}") from exc
        if self.word.shape[1] != c.hidden_size:
            raise ValueError("word embeddings do not match hidden_size")

    # -- elementwise pieces -------------------------------------------------

    def _layer_norm(self, x: F32, weight: F32, bias: F32) -> F32:
        """LayerNorm in place over the last axis."""
        # What x.mean gives (a pairwise sum, then one division), without its Python wrapper.
        mean = np.add.reduce(x, axis=1, keepdims=True)
        mean /= np.float32(x.shape[1])
        x -= mean
        var = np.einsum("ij,ij->i", x, x)[:, None]
        var *= np.float32(1.0 / x.shape[1])
        var += np.float32(self.config.layer_norm_eps)
        np.sqrt(var, out=var)
        np.reciprocal(var, out=var)
        x *= var
        x *= weight
        x += bias
        return x

    def _activation(self, h: F32) -> None:
        """The feed-forward activation, in place, block by block."""
        act = self.config.hidden_act
        if act == "relu":
            np.maximum(h, 0, out=h)
            return
        for start in range(0, h.shape[0], _GELU_ROWS):
            block = h[start : start + _GELU_ROWS]
            if self._erf_gelu:
                _gelu_erf_scaled(block)
            else:
                _gelu_tanh(block)

    # -- the model ----------------------------------------------------------

    def forward(self, ids: list[I64], type_ids: list[I64] | None = None) -> list[F32]:
        """Encode texts given as token-id arrays; returns each text's ``(length, hidden)`` states.

        All texts are packed into one matrix for the dense layers; attention
        runs on blocks of texts padded to their longest member.
        """
        c = self.config
        lengths = [len(t) for t in ids]
        if min(lengths, default=1) < 1 or max(lengths, default=0) > c.max_positions:
            raise ValueError("token sequences must have 1..max_position_embeddings tokens")
        if len(ids) == 1:  # one text (a query): the same sums, without packing
            x = self.word[ids[0]]
            x += self.position[: lengths[0]]
        else:
            x = self.word[np.concatenate(ids)]
            x += self.position[np.concatenate([np.arange(n) for n in lengths])]
        if type_ids is None:
            x += self.token_type[0]
        else:
            x += self.token_type[type_ids[0] if len(type_ids) == 1 else np.concatenate(type_ids)]
        x = self._layer_norm(x, self.emb_ln_w, self.emb_ln_b)
        blocks = _attention_blocks(lengths)
        for layer in self.layers:
            qkv: F32 = x @ layer.qkv_w
            qkv += layer.qkv_b
            ctx = self._attention(qkv, lengths, blocks)
            attn: F32 = ctx @ layer.out_w
            attn += layer.out_b
            attn += x
            x = self._layer_norm(attn, layer.ln1_w, layer.ln1_b)
            h: F32 = x @ layer.up_w
            h += layer.up_b
            self._activation(h)
            out: F32 = h @ layer.down_w
            out += layer.down_b
            out += x
            x = self._layer_norm(out, layer.ln2_w, layer.ln2_b)
        if len(lengths) == 1:
            return [x]
        offsets = np.cumsum([0, *lengths])
        return [x[offsets[i] : offsets[i + 1]] for i in range(len(lengths))]

    def _attention(self, qkv: F32, lengths: list[int], blocks: list[tuple[int, int]]) -> F32:
        """Multi-head self-attention over packed tokens; returns packed context vectors."""
        c = self.config
        hs, nh, hd = c.hidden_size, c.num_heads, self._head_dim
        ctx = np.empty((qkv.shape[0], hs), np.float32)
        offsets = np.cumsum([0, *lengths])
        for first, last in blocks:
            block_lengths = lengths[first:last]
            longest = max(block_lengths)
            n = last - first
            start, stop = int(offsets[first]), int(offsets[last])
            if all(m == longest for m in block_lengths):
                padded = qkv[start:stop].reshape(n, longest, 3, nh, hd)
                mask = None
            else:
                padded = np.zeros((n, longest, 3 * hs), np.float32)
                for j, m in enumerate(block_lengths):
                    s = int(offsets[first + j])
                    padded[j, :m] = qkv[s : s + m]
                padded = padded.reshape(n, longest, 3, nh, hd)
                keep = np.arange(longest)[None, :] < np.asarray(block_lengths)[:, None]
                mask = np.where(keep, np.float32(0.0), np.float32(-np.inf)).astype(np.float32)[:, None, None, :]
            q = padded[:, :, 0].transpose(0, 2, 1, 3)  # (n, heads, L, hd)
            k = padded[:, :, 1].transpose(0, 2, 3, 1)  # (n, heads, hd, L)
            v = padded[:, :, 2].transpose(0, 2, 1, 3)
            scores = q @ k  # (n, heads, L, L)
            if mask is not None:
                scores += mask
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            out = (scores @ v).transpose(0, 2, 1, 3).reshape(n, longest, hs)
            if len(blocks) == 1 and mask is None:
                packed: F32 = out.reshape(-1, hs)  # one block, no padding: already the packed context (a copy)
                return packed
            if mask is None:
                ctx[start:stop] = out.reshape(-1, hs)
            else:
                for j, m in enumerate(block_lengths):
                    s = int(offsets[first + j])
                    ctx[s : s + m] = out[j, :m]
        return ctx


def _attention_blocks(lengths: list[int], waste: float = 0.25, max_texts: int = 64) -> list[tuple[int, int]]:
    """Group consecutive texts so that padding adds at most ``waste`` of a block's tokens.

    Callers sort texts by length first, so neighbours are of similar length.
    """
    blocks: list[tuple[int, int]] = []
    first = 0
    while first < len(lengths):
        last = first + 1
        longest = lengths[first]
        total = lengths[first]
        while last < len(lengths) and last - first < max_texts:
            new_longest = max(longest, lengths[last])
            new_total = total + lengths[last]
            if new_longest * (last + 1 - first) > (1 + waste) * new_total:
                break
            longest, total = new_longest, new_total
            last += 1
        blocks.append((first, last))
        first = last
    return blocks


def _gelu_erf_scaled(u: F32) -> None:
    """``u + u*erf(u)`` in place: exact GELU once the 1/sqrt(2) factors are folded into the weights."""
    ax = np.abs(u)
    t = ax * _P
    t += 1
    np.reciprocal(t, out=t)
    poly = t * _A5
    poly += _A4
    poly *= t
    poly += _A3
    poly *= t
    poly += _A2
    poly *= t
    poly += _A1
    poly *= t
    np.square(ax, out=t)  # t is free again
    np.negative(t, out=t)
    np.exp(t, out=t)
    poly *= t  # 1 - erf(|u|)
    np.subtract(1, poly, out=poly)  # erf(|u|)
    # u*erf(u) = |u|*erf(|u|): the same bits as copysign then times u (IEEE products are sign-symmetric).
    poly *= ax
    u += poly


def _gelu_tanh(x: F32) -> None:
    """The tanh approximation of GELU, in place, for models defined with it (``gelu_new``)."""
    y = x * x
    y *= x
    y *= np.float32(0.044715)
    y += x
    y *= np.float32(math.sqrt(2.0 / math.pi))
    np.tanh(y, out=y)
    y += 1
    y *= np.float32(0.5)
    x *= y
