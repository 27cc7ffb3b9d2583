"""Chat model adapter for any OpenAI-compatible `/v1/chat/completions` endpoint.

`complete()` goes through langchain-openai. `stream()` serves every chat answer, so it posts the request
with httpx itself and parses the raw SSE lines: the openai SDK's typed chunks cost several times more CPU
per token (benchmarks/llm_token_parse.py), and its request path (typed-parameter transform, request
options, wrappers) costs several times the CPU of the same POST through httpx, which decides how many streams
a core can start at once (benchmarks/concurrency.py). Both share one connection
pool. A stream is retried only before it starts (`retry_policy`, with tenacity); once a token has been
yielded a failure ends it.

Timeouts: `timeout_s` bounds connecting and sending (and, for `complete()`, the wait for the answer);
`stream_idle_timeout_s` bounds every silence of a stream, including the wait for the response headers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, Final, cast
from urllib.parse import urlsplit

import httpx
import httpx2
import openai
import orjson
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from backend.application.ports.chat_model import ModelDelta
from backend.domain.conversation import Message, Role
from backend.domain.errors import ModelError
from backend.domain.tokens import TokenUsage
from backend.infrastructure.llm.retry_policy import ServerRefusal, tenacity_wait

if TYPE_CHECKING:
    from langchain_openai import ChatOpenAI

_log = logging.getLogger(__name__)

_MAX_SERVER_MESSAGE_CHARS: Final = 500
_MAX_ERROR_BODY_BYTES: Final = 64 * 1024
_DRAIN_S: Final = 0.1
# Many concurrent answers each hold a connection for as long as they stream (the SDK's 1,000). Idle
# connections are kept as httpx does by default (20), not as the SDK does (100): httpcore probes the socket
# of every idle connection each time a request starts or a response closes, so a burst of N streams over a
# large idle pool costs O(N x idle) probes (benchmarks/concurrency.py measures it under many streams).
# Streams beyond 20 open new connections, which costs less than the probes on loopback and little next to a
# stream's length.
_POOL_LIMITS: Final = httpx2.Limits(max_connections=1000, max_keepalive_connections=20)
# Both httpx generations: the SDK runs on httpx2, a caller-supplied legacy client would raise httpx errors.
_STALL_ERRORS: Final = (httpx2.ReadTimeout, httpx.ReadTimeout)
_TRANSPORT_ERRORS: Final = (
    httpx2.TransportError,
    httpx.TransportError,
    httpx2.DecodingError,
    httpx.DecodingError,
)


class OpenAICompatibleChatModel:
    """`ChatModel` over HTTP. Every failure is raised as `ModelError`; the API key never appears in one."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        temperature: float = 0.2,
        timeout_s: float = 60.0,
        stream_idle_timeout_s: float = 30.0,
        max_retries: int = 2,
        max_tokens: int | None = None,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._model = model
        self._temperature = temperature
        self._timeout_s = timeout_s
        self._idle_s = stream_idle_timeout_s
        self._max_retries = max_retries
        self._max_tokens = max_tokens
        # httpx's read timeout is "no bytes for this long", which is exactly a stall, and it costs
        # nothing per token (httpcore arms a deadline around every socket read anyway).
        self._stream_timeout = httpx2.Timeout(timeout_s, read=stream_idle_timeout_s)
        # The same for every stream: built once, not per request.
        self._completions_url = f"{self._base_url}/chat/completions"
        self._stream_headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if api_key:
            self._stream_headers["Authorization"] = f"Bearer {api_key}"
        self._http: httpx2.AsyncClient | None = None
        self._client: openai.AsyncOpenAI | None = None
        self._chat: ChatOpenAI | None = None

    def __repr__(self) -> str:
        return f"OpenAICompatibleChatModel(base_url={_safe_url(self._base_url)!r}, model={self._model!r})"

    @property
    def model_name(self) -> str:
        return self._model

    async def complete(self, messages: Sequence[Message]) -> str:
        chat, wire = self._chat_model(), _wire_messages(messages)
        try:
            reply = await chat.ainvoke(wire)
        except Exception as exc:
            raise self._translate(exc) from _safe_cause(exc)
        return str(reply.text)  # a plain str, not langchain's str subclass

    async def stream(self, messages: Sequence[Message]) -> AsyncGenerator[ModelDelta, None]:
        body = orjson.dumps(self._stream_body(messages))
        finished = False
        try:
            response = await self._open_stream(body)
            try:
                lines = response.aiter_lines()
                async for line in lines:
                    # Comments (": ping"), blank separators and `event:` lines carry no data.
                    if line[:5] != "data:":
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        await _drain(lines)
                        return
                    delta, done = self._parse_chunk(payload)
                    finished = finished or done
                    if delta is not None:
                        yield delta
            finally:
                # Every exit closes the response: end, error, consumer gone, cancellation.
                await response.aclose()
        except ModelError:
            raise
        except Exception as exc:
            raise self._translate(exc) from _safe_cause(exc)
        if not finished:
            # The body ended cleanly but the model never said it was done: the answer is truncated.
            raise ModelError("model stream ended before the model finished its answer")

    async def aclose(self) -> None:
        client, http, self._client, self._http, self._chat = self._client, self._http, None, None, None
        if client is not None:
            await client.close()
        if http is not None:
            await http.aclose()

    # -- helpers -------------------------------------------------------------------------------------

    def _http_client(self) -> httpx2.AsyncClient:
        # Created on first use so the adapter can be built outside a running event loop.
        if self._http is None:
            self._http = httpx2.AsyncClient(limits=_POOL_LIMITS, timeout=self._timeout_s, follow_redirects=True)
        return self._http

    def _openai(self) -> openai.AsyncOpenAI:
        if self._client is None:
            self._client = openai.AsyncOpenAI(
                base_url=self._base_url,
                api_key=self._api_key or "unused",  # the SDK refuses an empty key; local servers ignore it
                timeout=self._timeout_s,
                max_retries=self._max_retries,
                http_client=self._http_client(),
            )
        return self._client

    def _stream_body(self, messages: Sequence[Message]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._model,
            "messages": _wire_messages(messages),
            "temperature": self._temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self._max_tokens is not None:
            body["max_tokens"] = self._max_tokens
        return body

    async def _open_stream(self, body: bytes) -> httpx2.Response:
        """POST the request until the server answers 2xx (retrying what `retry_policy` allows) and return
        the open response; what is left after the last attempt is raised as `ModelError`."""
        client = self._http_client()
        attempts = AsyncRetrying(
            stop=stop_after_attempt(self._max_retries + 1),
            wait=tenacity_wait,
            retry=retry_if_exception(_worth_retrying),
            before_sleep=self._log_retry,
            reraise=True,
        )
        try:
            async for attempt in attempts:
                with attempt:
                    request = client.build_request(
                        "POST",
                        self._completions_url,
                        content=body,
                        headers=self._stream_headers,
                        timeout=self._stream_timeout,
                    )
                    response = await client.send(request, stream=True)
                    if response.is_success:
                        return response
                    raise await self._refusal(response)
        except ServerRefusal as refusal:
            raise ModelError(f"model server returned {refusal}") from None  # its body may echo the key
        except (httpx2.TimeoutException, httpx.TimeoutException):
            raise ModelError(f"model request to {_safe_url(self._base_url)} timed out") from None
        except (httpx2.TransportError, httpx.TransportError) as exc:
            cause = _root_cause(exc)  # e.g. ConnectionRefusedError, not the client's wrapper
            raise ModelError(
                f"cannot reach the model server at {_safe_url(self._base_url)}: {self._describe(cause)}"
            ) from None
        raise AssertionError("unreachable: tenacity either returns an attempt's result or raises")

    async def _refusal(self, response: httpx2.Response) -> ServerRefusal:
        """A non-2xx response, read (bounded) and closed, as the refusal it carries."""
        try:
            raw = bytearray()
            async for piece in response.aiter_bytes():
                raw += piece
                if len(raw) >= _MAX_ERROR_BODY_BYTES:
                    break
        finally:
            await response.aclose()
        try:
            body: object = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = raw.decode("utf-8", "replace").strip()
        message = self._server_message(body) or response.reason_phrase
        return ServerRefusal(response.status_code, message, response.headers)

    def _log_retry(self, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        wait_s = state.next_action.sleep if state.next_action is not None else 0.0
        _log.info(
            "model request to %s failed (%s); attempt %d of %d in %.2f s",
            _safe_url(self._base_url),
            self._describe(error) if error is not None else "unknown",
            state.attempt_number + 1,
            self._max_retries + 1,
            wait_s,
        )

    def _chat_model(self) -> ChatOpenAI:
        if self._chat is None:
            from langchain_openai import ChatOpenAI  # heavy import, only paid when complete() is used

            client = self._openai()
            # Sharing our SDK client gives complete() the same base URL, key, timeout, retries and pool,
            # and lets aclose() release it.
            self._chat = ChatOpenAI(
                model=self._model,
                base_url=self._base_url,
                api_key=self._api_key or "unused",
                timeout=self._timeout_s,
                max_retries=self._max_retries,
                temperature=self._temperature,
                max_tokens=self._max_tokens,
                root_async_client=client,
                async_client=client.chat.completions,
                use_responses_api=False,
                disable_streaming=True,
            )
        return self._chat

    def _parse_chunk(self, payload: str) -> tuple[ModelDelta | None, bool]:
        """One SSE `data:` payload → (the delta it carries or None, whether a finish_reason was seen)."""
        try:
            chunk = orjson.loads(payload)
        except orjson.JSONDecodeError:
            raise ModelError(f"model stream sent malformed JSON: {self._redact(payload[:80])!r}") from None
        if not isinstance(chunk, dict):
            raise ModelError("model stream sent a data line that is not a JSON object")
        error = chunk.get("error")
        if error is not None:
            raise ModelError(f"model stream reported an error: {self._server_message(error)}")
        content = reasoning = ""
        done = False
        choices = chunk.get("choices")
        if choices:
            choice = choices[0]
            done = choice.get("finish_reason") is not None
            delta = choice.get("delta")
            if delta:
                content = delta.get("content") or ""
                reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
        usage = _usage_of(chunk.get("usage"))
        if content or reasoning or usage is not None:
            return ModelDelta(content, reasoning, usage), done
        return None, done  # role-only first chunk, empty finish chunk

    def _translate(self, exc: BaseException) -> ModelError:
        """Driver error → `ModelError` with a short message that names the cause but no secret."""
        if isinstance(exc, ModelError):
            return exc
        if isinstance(exc, openai.APIStatusError):
            detail = self._server_message(exc.body) or exc.response.reason_phrase
            return ModelError(f"model server returned HTTP {exc.status_code}: {detail}")
        if isinstance(exc, openai.APITimeoutError):
            return ModelError(f"model request to {_safe_url(self._base_url)} timed out")
        if isinstance(exc, openai.APIConnectionError):
            cause = _root_cause(exc)  # e.g. ConnectionRefusedError, not the SDK's generic "Connection error."
            return ModelError(f"cannot reach the model server at {_safe_url(self._base_url)}: {self._describe(cause)}")
        if isinstance(exc, _STALL_ERRORS):
            return ModelError(f"model stream stalled for {self._idle_s:g} s")
        if isinstance(exc, _TRANSPORT_ERRORS):
            return ModelError(f"model stream interrupted: {self._describe(exc)}")
        if isinstance(exc, openai.OpenAIError):
            return ModelError(f"model call failed: {self._describe(exc)}")
        _log.exception("unexpected error from the model client")
        return ModelError(f"model call failed: {type(exc).__name__}")

    def _server_message(self, body: object) -> str:
        """The human-readable part of an OpenAI-shaped error body, redacted and bounded."""
        if isinstance(body, dict):
            inner = body.get("error", body)
            message = inner.get("message") if isinstance(inner, dict) else inner
            text = str(message) if message is not None else ""
        else:
            text = "" if body is None else str(body)
        return self._redact(text)[:_MAX_SERVER_MESSAGE_CHARS]

    def _describe(self, exc: BaseException) -> str:
        text = self._redact(str(exc))
        return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

    def _redact(self, text: str) -> str:
        # Some servers echo the key they rejected; it must not travel further in our errors or logs.
        return text.replace(self._api_key, "***") if self._api_key else text


async def _drain(lines: AsyncIterator[str]) -> None:
    """Read what follows `[DONE]` (the body's end, normally already here) so that closing the response
    returns its connection to the pool; one left unread would be closed, and the next answer would
    wait for a new TCP connection. The answer is complete, so a server that keeps sending is cut off."""
    with contextlib.suppress(TimeoutError, httpx2.HTTPError, httpx.HTTPError):
        async with asyncio.timeout(_DRAIN_S):
            async for _ in lines:
                pass


def _worth_retrying(error: BaseException) -> bool:
    # Before the first byte of the answer every transport failure may be passing: the SDK retries them too.
    if isinstance(error, ServerRefusal):
        return error.retryable
    return isinstance(error, (httpx2.TransportError, httpx.TransportError))


def _wire_messages(messages: Sequence[Message]) -> list[dict[str, str]]:
    # `Role(...)` still refuses a role that is no `Role` member, should an untyped caller pass a plain string.
    return [{"role": Role(message.role).value, "content": message.content} for message in messages]


def _usage_of(usage: Any) -> TokenUsage | None:
    """The call's prompt and completion tokens, when the server reported both (details vary between servers)."""
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if type(prompt) is not int or type(completion) is not int:
        return None
    return TokenUsage(prompt, completion)


def _root_cause(exc: BaseException) -> BaseException:
    seen = 0
    while seen < 10 and (exc.__cause__ or exc.__context__) is not None:
        exc = cast(BaseException, exc.__cause__ or exc.__context__)
        seen += 1
    return exc


def _safe_cause(exc: BaseException) -> BaseException | None:
    # Status errors carry the server's body (which may echo the key): do not chain them into tracebacks.
    return None if isinstance(exc, openai.APIStatusError) else exc


def _safe_url(url: str) -> str:
    """scheme://host[:port]/path without credentials or query (which could hold a key)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"
