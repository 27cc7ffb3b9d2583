"""The scripted OpenAI-compatible model as a benchmark process whose answer length is set per request.

`tests.support.scripted_llm` streams a fixed number of tokens per answer. Benchmarks that need long
answers (per-token cost) and short ones (time to first token) from the same model process put
`[tokens=N]` in the last user message; without it the answer has `--tokens` tokens. The tokens are
`benchmark_tokens(N)` (" The", " quick", ...), sent at 0 ms unless `--delay` is given.

Run:  python -m benchmarks.scripted_model --port 0 [--tokens 2000] [--delay 0]   # prints "READY <base_url>"
"""

from __future__ import annotations

import argparse
import re
import signal
import threading
from typing import Any

from tests.support.scripted_llm import Reply, ScriptedLLM, benchmark_tokens

TOKENS_MARK = re.compile(r"\[tokens=(\d+)\]")


def tokens_requested(body: dict[str, Any], default: int) -> int:
    """N from `[tokens=N]` in the last user message, else `default`."""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            found = TOKENS_MARK.search(str(message.get("content") or ""))
            return int(found.group(1)) if found else default
    return default


def tagged(message: str, tokens: int) -> str:
    """A user message that asks this server for an answer of `tokens` tokens."""
    return f"{message} [tokens={tokens}]"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--tokens", type=int, default=2000, help="tokens when the message names no count")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each token")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    replies: dict[int, Reply] = {}

    def respond(body: dict[str, Any]) -> Reply:
        count = tokens_requested(body, args.tokens)
        if count not in replies:
            replies[count] = Reply(tokens=benchmark_tokens(count), delay_s=args.delay)
        return replies[count]

    with ScriptedLLM(host=args.host, port=args.port) as llm:
        llm.responder = respond
        print(f"READY {llm.base_url}", flush=True)
        while not stop.wait(0.5):
            pass


if __name__ == "__main__":
    main()
