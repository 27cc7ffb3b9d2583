"""What both peer runners share: the job file, an offline tiktoken stand-in, the embedder, the result file.

Runs in the peers' virtual environment, so it imports only the standard library, numpy and openai (both
dependencies of both peers) and, from this repository, `benchmarks.graph_probes` (standard library only).

tiktoken stand-in: tiktoken downloads its BPE files on first use, which fails offline. `WordEncoding` is a
word-level encoding with GPT-2's pre-tokenisation shape (an optional leading space plus a run of letters,
up to three digits, a run of punctuation, or whitespace), so its token counts are close to a BPE's for
English (it does not split rare words into pieces: somewhat fewer tokens). Ids come from a growing
vocabulary; decode is exact. `install_tiktoken_stand_in` makes `tiktoken.get_encoding` and
`tiktoken.encoding_for_model` return it, for every name.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks.graph_probes import spread_ms, status_kib

ROOT = Path(__file__).resolve().parents[2]
EMBEDDING_DIM = 384
MODEL_NAME = "scripted-model"

# -- the job ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Job:
    """What the parent hands a runner: documents as strings, the dev questions, where the model is."""

    podcast: list[str]
    wiki: list[str]
    questions: list[dict[str, Any]]
    model_url: str

    @classmethod
    def read(cls, path: Path) -> Job:
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(data["podcast"], data["wiki"], data["questions"], data["model_url"])

    def embedding(self) -> Embedder:
        return Embedder(self.model_url)


def arguments(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--phase", choices=("podcast", "wiki"), required=True)
    parser.add_argument("--job", type=Path, required=True)
    parser.add_argument("--workdir", type=Path, required=True, help="the peer's storage directory (fresh)")
    parser.add_argument("--output", type=Path, required=True)
    return parser.parse_args()


def log(name: str, message: str) -> None:
    print(f"[{name} {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Result:
    """The runner's figures, rewritten after each step so that a run that dies keeps what it measured."""

    def __init__(self, output: Path, peer: str, phase: str) -> None:
        self.output = output
        self.data: dict[str, Any] = {"peer": peer, "phase": phase, "steps_done": []}

    def save(self, step: str) -> None:
        self.data["steps_done"].append(step)
        self.data["peak_rss_mib_vmhwm"] = round(status_kib("self", "VmHWM") / 1024, 1)
        self.output.write_text(json.dumps(self.data, indent=2) + "\n", encoding="utf-8")


async def timed_queries(ask: Callable[[str], Any], questions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Each question once, one at a time; wall time of `await ask(question)`; context size in characters."""
    durations: list[float] = []
    sizes: list[int] = []
    empty = 0
    for question in questions:
        started = time.perf_counter()
        context = await ask(str(question["question"]))
        durations.append(time.perf_counter() - started)
        text = context if isinstance(context, str) else json.dumps(context, default=str)
        sizes.append(len(text))
        empty += not text.strip()
    return {
        "latency": spread_ms(durations),
        "context_chars_median": sorted(sizes)[len(sizes) // 2] if sizes else 0,
        "empty_contexts": empty,
    }


# -- tiktoken, offline -------------------------------------------------------------------------------------------

_PIECE = re.compile(r" ?[^\W\d_]+| ?\d{1,3}| ?[^\s\w]+| ?_+|\s+(?!\S)|\s+")


class WordEncoding:
    """A word-level stand-in for `tiktoken.Encoding` (the methods the peers call); thread-safe, shared on copy."""

    name = "word-level"

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._pieces: list[str] = []
        self._lock = threading.Lock()

    def __deepcopy__(self, memo: dict[int, Any]) -> WordEncoding:
        return self

    @property
    def n_vocab(self) -> int:
        return len(self._pieces)

    def encode(self, text: str, *args: Any, **kwargs: Any) -> list[int]:
        pieces = _PIECE.findall(text)
        with self._lock:
            ids = self._ids
            out = []
            for piece in pieces:
                token = ids.get(piece)
                if token is None:
                    token = ids[piece] = len(self._pieces)
                    self._pieces.append(piece)
                out.append(token)
        return out

    def encode_ordinary(self, text: str) -> list[int]:
        return self.encode(text)

    def decode(self, tokens: Sequence[int], *args: Any, **kwargs: Any) -> str:
        pieces = self._pieces
        return "".join(pieces[token] for token in tokens)

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]:
        offsets, position = [], 0
        for token in tokens:
            offsets.append(position)
            position += len(self._pieces[token])
        return self.decode(tokens), offsets

    def encode_batch(self, texts: Sequence[str], *args: Any, num_threads: int = 1, **kwargs: Any) -> list[list[int]]:
        return [self.encode(text) for text in texts]

    def decode_batch(
        self, batch: Sequence[Sequence[int]], *args: Any, num_threads: int = 1, **kwargs: Any
    ) -> list[str]:
        return [self.decode(tokens) for tokens in batch]


ENCODING = WordEncoding()


def install_tiktoken_stand_in() -> WordEncoding:
    """Make tiktoken hand out `ENCODING` for every encoding and model name (before the peers import it)."""
    import tiktoken  # the peers' dependency

    def get(*_: Any, **__: Any) -> WordEncoding:
        return ENCODING

    for module in (tiktoken, sys.modules.get("tiktoken.registry"), sys.modules.get("tiktoken.model")):
        if module is not None:
            for attribute in ("get_encoding", "encoding_for_model"):
                if hasattr(module, attribute):
                    setattr(module, attribute, get)
    return ENCODING


# -- embeddings --------------------------------------------------------------------------------------------------


class Embedder:
    """The peers' embedding function: the scripted model's /v1/embeddings (a signed hashed bag of words, 384
    dimensions) through the openai SDK, as a peer asks an embedding API. Calls, texts and busy time counted.

    Not our MiniLM: it would be feasible (the MiniLM module imports in this venv), but it dominates the cost
    (nano-graphrag on 30 2wiki passages: 132 s with it, 8 s without, on this machine) and would fit no time
    budget at the peers' embedding concurrency; compare the peers with our wall time minus its MiniLM time."""

    def __init__(self, model_url: str) -> None:
        client = importlib.import_module("openai").AsyncOpenAI(base_url=model_url, api_key="scripted")

        async def hashed(texts: list[str]) -> npt.NDArray[np.float32]:
            response = await client.embeddings.create(
                model="hashed-bag-of-words", input=texts, dimensions=EMBEDDING_DIM, encoding_format="float"
            )
            return np.array([item.embedding for item in response.data], dtype=np.float32)

        self._embed: Callable[[list[str]], Any] = hashed
        self.calls = 0
        self.texts = 0
        self._busy = 0
        self._busy_since = 0.0
        self.busy_s = 0.0  # wall time with at least one embed call in flight

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        self.texts += len(texts)
        if self._busy == 0:
            self._busy_since = time.perf_counter()
        self._busy += 1
        try:
            vectors: npt.NDArray[np.float32] = await self._embed(list(texts))
        finally:
            ended = time.perf_counter()
            self._busy -= 1
            if self._busy == 0:
                self.busy_s += ended - self._busy_since
        return vectors

    def figures(self) -> dict[str, Any]:
        figures = {"calls": self.calls, "texts": self.texts, "busy_wall_s": round(self.busy_s, 2)}
        return {"embedder": "hashed bag of words (scripted model)"} | figures


def environment_for_model(model_url: str) -> None:
    """The openai SDK's environment, for clients a peer builds itself."""
    os.environ["OPENAI_BASE_URL"] = model_url
    os.environ["OPENAI_API_KEY"] = "scripted"
