"""CPU cost per streamed token of the ways to consume an OpenAI-compatible stream (SPEC §5 "Token hot path").

The scripted model server runs in a separate process, so only the consumer's CPU is counted
(`time.process_time` in this process). Each method streams the same N-token answer (0 ms delay):

  raw_httpx     httpx `aiter_lines` + orjson on each `data:` line (the floor)
  raw_httpx2    the same on httpx2, the HTTP client the openai SDK runs on
  sdk_typed     openai SDK `chat.completions.create(stream=True)` typed chunks
  langchain     langchain-openai `ChatOpenAI.astream`
  adapter       our `OpenAICompatibleChatModel.stream()`

Run:  python -m benchmarks.llm_token_parse [--tokens 5000] [--rounds 5]
Writes benchmarks/results/llm_token_parse.json. The adapter must stay within 1.5x of raw_httpx.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import httpx2
import openai
import orjson
from langchain_openai import ChatOpenAI

from backend.domain.conversation import Message, Role
from backend.infrastructure.llm import OpenAICompatibleChatModel
from benchmarks.graph_probes import rel

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "llm_token_parse.json"
MODEL = "scripted-model"
API_KEY = "bench-key"
QUESTION = "Stream a long answer."
MAX_RATIO = 1.5

Consumer = Callable[[], Awaitable[int]]  # streams one answer, returns the number of content tokens


@dataclass
class Result:
    method: str
    cpu_us_per_token_median: float
    cpu_us_per_token_min: float
    wall_s_median: float
    tokens_per_s_median: float


@asynccontextmanager
async def raw_httpx(base_url: str) -> AsyncIterator[Consumer]:
    async with httpx.AsyncClient(timeout=60) as client:
        yield lambda: _raw_parse(client.stream("POST", f"{base_url}/chat/completions", **_raw_request()))


@asynccontextmanager
async def raw_httpx2(base_url: str) -> AsyncIterator[Consumer]:
    async with httpx2.AsyncClient(timeout=60) as client:
        yield lambda: _raw_parse(client.stream("POST", f"{base_url}/chat/completions", **_raw_request()))


def _raw_request() -> dict[str, Any]:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": QUESTION}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    return {"json": body, "headers": {"authorization": f"Bearer {API_KEY}"}}


async def _raw_parse(stream: AbstractAsyncContextManager[Any]) -> int:
    count = 0
    async with stream as response:
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            payload = line[6:]
            if payload == "[DONE]":
                break
            choices = orjson.loads(payload)["choices"]
            if choices and choices[0]["delta"].get("content"):
                count += 1
    return count


@asynccontextmanager
async def sdk_typed(base_url: str) -> AsyncIterator[Consumer]:
    client = openai.AsyncOpenAI(base_url=base_url, api_key=API_KEY, timeout=60)

    async def consume() -> int:
        count = 0
        stream = await client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": QUESTION}],
            stream=True,
            stream_options={"include_usage": True},
        )
        async with stream:
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    count += 1
        return count

    try:
        yield consume
    finally:
        await client.close()


@asynccontextmanager
async def langchain(base_url: str) -> AsyncIterator[Consumer]:
    chat = ChatOpenAI(model=MODEL, base_url=base_url, api_key=API_KEY, timeout=60, stream_usage=True)

    async def consume() -> int:
        count = 0
        async for chunk in chat.astream([("user", QUESTION)]):
            if chunk.content:
                count += 1
        return count

    try:
        yield consume
    finally:
        await chat.root_async_client.close()


@asynccontextmanager
async def adapter(base_url: str) -> AsyncIterator[Consumer]:
    model = OpenAICompatibleChatModel(base_url, API_KEY, MODEL)
    turns = [Message(Role.USER, QUESTION)]

    async def consume() -> int:
        count = 0
        async for delta in model.stream(turns):
            if delta.content:
                count += 1
        return count

    try:
        yield consume
    finally:
        await model.aclose()


METHODS: dict[str, Callable[[str], AbstractAsyncContextManager[Consumer]]] = {
    "raw_httpx": raw_httpx,
    "raw_httpx2": raw_httpx2,
    "sdk_typed": sdk_typed,
    "langchain": langchain,
    "adapter": adapter,
}


async def measure(name: str, base_url: str, tokens: int, rounds: int) -> Result:
    cpu: list[float] = []
    wall: list[float] = []
    async with METHODS[name](base_url) as consume:
        await consume()  # warm-up: connection, imports, caches
        for _ in range(rounds):
            cpu_start, wall_start = time.process_time(), time.perf_counter()
            received = await consume()
            cpu.append(time.process_time() - cpu_start)
            wall.append(time.perf_counter() - wall_start)
            if received != tokens:
                raise RuntimeError(f"{name}: received {received} tokens, expected {tokens}")
    per_token = [seconds / tokens * 1e6 for seconds in cpu]
    return Result(
        method=name,
        cpu_us_per_token_median=round(statistics.median(per_token), 2),
        cpu_us_per_token_min=round(min(per_token), 2),
        wall_s_median=round(statistics.median(wall), 4),
        tokens_per_s_median=round(tokens / statistics.median(wall)),
    )


def start_server(tokens: int) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "tests.support.scripted_llm", "--port", "0", "--tokens", str(tokens)]
    server = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    line = server.stdout.readline().strip()
    if not line.startswith("READY "):
        server.kill()
        raise RuntimeError(f"scripted server did not start: {line!r}")
    return server, line.removeprefix("READY ")


async def run(tokens: int, rounds: int, base_url: str) -> list[Result]:
    return [await measure(name, base_url, tokens, rounds) for name in METHODS]


def report(results: list[Result], tokens: int, rounds: int) -> dict[str, Any]:
    by_name = {r.method: r for r in results}
    adapter, raw = by_name["adapter"], by_name["raw_httpx"]
    ratio = adapter.cpu_us_per_token_median / raw.cpu_us_per_token_median
    # The minimum is the least disturbed by other processes on a shared machine; shown alongside.
    ratio_min = adapter.cpu_us_per_token_min / raw.cpu_us_per_token_min
    print(f"\n{tokens} tokens per answer, {rounds} rounds, CPU of the consuming process only\n")
    print(f"{'method':<12} {'µs/token (median)':>18} {'µs/token (min)':>15} {'wall s':>8} {'tokens/s':>9}")
    for r in results:
        print(
            f"{r.method:<12} {r.cpu_us_per_token_median:>18.1f} {r.cpu_us_per_token_min:>15.1f}"
            f" {r.wall_s_median:>8.3f} {r.tokens_per_s_median:>9}"
        )
    verdict = "OK" if ratio <= MAX_RATIO else "TOO SLOW"
    print(f"\nadapter / raw_httpx = {ratio:.2f} (medians), {ratio_min:.2f} (minimums)")
    print(f"limit {MAX_RATIO}: {verdict}")
    return {
        "benchmark": "llm_token_parse",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "tokens": tokens,
        "rounds": rounds,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "results": [asdict(r) for r in results],
        "adapter_to_raw_ratio": round(ratio, 3),
        "adapter_to_raw_ratio_of_minimums": round(ratio_min, 3),
        "max_ratio": MAX_RATIO,
        "within_limit": ratio <= MAX_RATIO,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    server, base_url = start_server(args.tokens)
    try:
        results = asyncio.run(run(args.tokens, args.rounds, base_url))
    finally:
        server.terminate()
        server.wait(10)
    summary = report(results, args.tokens, args.rounds)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"wrote {rel(args.output)}")


if __name__ == "__main__":
    main()
