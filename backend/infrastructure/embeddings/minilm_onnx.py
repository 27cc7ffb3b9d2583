"""The MiniLM encoder as an ONNX graph run by onnxruntime: the same weights and the same arithmetic as the
numpy forward pass, several times faster on a CPU (fused kernels, a thread pool, no Python between
operations).

The graph is built in memory from the safetensors weights at load time (well under a second), so no
model file is downloaded or converted ahead of time.

Precision "int8" quantises the weights of every linear layer per output column (symmetric, 8 bits) and runs
each as onnxruntime's DynamicQuantizeMatMul, which quantises its activations per call. The products then use
the CPU's integer dot-product instructions, faster than float32, with embeddings very close to the float32
ones (tests/integration/test_minilm_embedder.py bounds their cosine).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from backend.infrastructure.embeddings.minilm import FloatArray, IntArray, _Config, _Weights

_OPSET = 18
_IR_VERSION = 9
_CONTRIB_DOMAIN = "com.microsoft"  # onnxruntime's own operators (DynamicQuantizeMatMul)
PRECISIONS = ("float32", "int8")


def check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"unknown embedding precision {precision!r} (one of: {', '.join(PRECISIONS)})")


def onnx_available() -> bool:
    try:
        import onnx  # noqa: F401
        import onnxruntime  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        return False
    return True


class _GraphBuilder:
    """Collects nodes and initialisers; every node gets a fresh output name."""

    def __init__(self) -> None:
        from onnx import helper, numpy_helper

        self._helper = helper
        self._numpy_helper = numpy_helper
        self.nodes: list[Any] = []
        self.initialisers: list[Any] = []

    def const(self, name: str, value: Any) -> str:
        self.initialisers.append(self._numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, kind: str, *inputs: str, **attributes: Any) -> str:
        output = f"{kind.lower()}_{len(self.nodes)}"
        self.nodes.append(self._helper.make_node(kind, list(inputs), [output], **attributes))
        return output

    def linear(self, x: str, name: str, weight: FloatArray, bias: FloatArray, int8: bool) -> str:
        """x @ weight + bias; with `int8`, weights quantised per output column and activations per call."""
        if not int8:
            return self.op("Add", self.op("MatMul", x, self.const(name + ".w", weight)), self.const(name + ".b", bias))
        # Symmetric: zero points are 0, so the scale maps each column's largest magnitude to 127.
        scale = np.maximum(np.abs(weight).max(axis=0), np.float32(1e-12)) / np.float32(127.0)
        quantised = np.clip(np.rint(weight / scale), -127, 127).astype(np.int8)
        return self.op(
            "DynamicQuantizeMatMul",
            x,
            self.const(name + ".q", quantised),
            self.const(name + ".scale", scale.astype(np.float32)),
            self.const(name + ".zero", np.zeros(weight.shape[1], dtype=np.int8)),
            self.const(name + ".b", bias),
            domain=_CONTRIB_DOMAIN,
        )


def build_model_bytes(weights: _Weights, config: _Config, precision: str = "float32") -> bytes:
    """The serialised ONNX model: (input_ids, token_type_ids, attention_mask) → L2-normalised mean-pooled
    sentence embeddings, shape (batch, hidden). `precision`: "float32" (exact) or "int8" (see the module)."""
    from onnx import TensorProto, checker, helper

    check_precision(precision)
    int8 = precision == "int8"
    g = _GraphBuilder()
    hidden, heads = config.hidden, config.heads
    head_dim = hidden // heads
    eps = config.eps
    f32 = np.float32
    g.const("to_heads", np.array([0, 0, heads, head_dim], dtype=np.int64))
    g.const("to_hidden", np.array([0, 0, hidden], dtype=np.int64))
    g.const("one", f32(1.0))
    g.const("half", f32(0.5))
    g.const("inv_sqrt2", f32(1.0 / math.sqrt(2.0)))
    g.const("scale", f32(1.0 / math.sqrt(head_dim)))
    g.const("masked", f32(-1e9))
    g.const("axis1", np.array([1], dtype=np.int64))
    g.const("axes12", np.array([1, 2], dtype=np.int64))
    g.const("last_axis", np.array([-1], dtype=np.int64))
    g.const("zero", np.array(0, dtype=np.int64))
    g.const("step", np.array(1, dtype=np.int64))
    g.const("dim1", np.array([1], dtype=np.int64))

    length = g.op("Squeeze", g.op("Gather", g.op("Shape", "input_ids"), "dim1"))
    positions = g.op("Range", "zero", length, "step")
    x = g.op("Add", g.op("Gather", g.const("word", weights.word), "input_ids"),
             g.op("Gather", g.const("position", weights.position), positions))  # fmt: skip
    x = g.op("Add", x, g.op("Gather", g.const("token_type", weights.token_type), "token_type_ids"))
    x = g.op("LayerNormalization", x, g.const("ln_g", weights.ln_g), g.const("ln_b", weights.ln_b), epsilon=eps)
    # Padding positions get -1e9 added to their attention scores: (batch, 1, 1, length).
    bias = g.op("Unsqueeze", g.op("Mul", g.op("Sub", "one", "attention_mask"), "masked"), "axes12")

    for n, layer in enumerate(weights.layers):
        p = f"layer{n}."
        qkv = g.linear(x, p + "qkv", layer.qkv_w, layer.qkv_b, int8)
        q, k, v = (g.op("Slice", qkv, g.const(p + f"s{i}", np.array([i * hidden], dtype=np.int64)),
                        g.const(p + f"e{i}", np.array([(i + 1) * hidden], dtype=np.int64)), "last_axis")
                   for i in range(3))  # fmt: skip
        q_h = g.op("Transpose", g.op("Reshape", q, "to_heads"), perm=[0, 2, 1, 3])
        k_t = g.op("Transpose", g.op("Reshape", k, "to_heads"), perm=[0, 2, 3, 1])
        v_h = g.op("Transpose", g.op("Reshape", v, "to_heads"), perm=[0, 2, 1, 3])
        scores = g.op("Add", g.op("Mul", g.op("MatMul", q_h, k_t), "scale"), bias)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v_h)
        merged = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), "to_hidden")
        attended = g.op("Add", g.linear(merged, p + "out", layer.out_w, layer.out_b, int8), x)
        x = g.op("LayerNormalization", attended, g.const(p + "attn_ln.g", layer.attn_ln_g),
                 g.const(p + "attn_ln.b", layer.attn_ln_b), epsilon=eps)  # fmt: skip
        inner = g.linear(x, p + "ffn_in", layer.ffn_in_w, layer.ffn_in_b, int8)
        # BERT's exact GELU: 0.5 x (1 + erf(x / √2)).
        gelu = g.op("Mul", g.op("Mul", inner, g.op("Add", "one", g.op("Erf", g.op("Mul", inner, "inv_sqrt2")))), "half")
        out = g.op("Add", g.linear(gelu, p + "ffn_out", layer.ffn_out_w, layer.ffn_out_b, int8), x)
        x = g.op("LayerNormalization", out, g.const(p + "ffn_ln.g", layer.ffn_ln_g),
                 g.const(p + "ffn_ln.b", layer.ffn_ln_b), epsilon=eps)  # fmt: skip

    mask = g.op("Unsqueeze", "attention_mask", "last_axis")
    summed = g.op("ReduceSum", g.op("Mul", x, mask), "axis1", keepdims=0)
    pooled = g.op("Div", summed, g.op("Max", g.op("ReduceSum", mask, "axis1", keepdims=0), g.const("tiny", f32(1e-9))))
    g.nodes.append(helper.make_node("LpNormalization", [pooled], ["embedding"], axis=-1, p=2))

    graph = helper.make_graph(
        g.nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "length"]),
            helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, ["batch", "length"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.FLOAT, ["batch", "length"]),
        ],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", hidden])],
        g.initialisers,
    )
    opsets = [helper.make_opsetid("", _OPSET), helper.make_opsetid(_CONTRIB_DOMAIN, 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = _IR_VERSION
    checker.check_model(model)
    return bytes(model.SerializeToString())


def onnx_encoder(
    weights: _Weights, config: _Config, precision: str = "float32"
) -> Callable[[IntArray, IntArray, FloatArray], FloatArray]:
    """An encoder function backed by one onnxruntime session (thread-safe: `run` may be called concurrently)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # warnings about unused initialisers would be noise
    # The pool's threads sleep instead of spinning while they wait. A spinning thread keeps a core busy that the
    # rest of the process (or Neo4j) needs: beside a busy process, bulk embedding is faster and cheaper without
    # spinning, and a query's embedding no longer leaves a core spinning while the store's reads wait for it.
    # Alone, a bulk embedding is a little slower (benchmarks/REPORT.md, indexing).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    model = build_model_bytes(weights, config, precision)
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])

    def encode(ids: IntArray, type_ids: IntArray, mask: FloatArray) -> FloatArray:
        feeds = {"input_ids": ids, "token_type_ids": type_ids, "attention_mask": mask}
        return np.asarray(session.run(["embedding"], feeds)[0], dtype=np.float32)

    return encode
