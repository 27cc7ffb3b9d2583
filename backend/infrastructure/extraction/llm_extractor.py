"""Entity and relation extraction with a chat model: one call per chunk, answers cached by content hash.

Each chunk gets one prompt (`graphrag_agent.extraction.prompts`) with its document's title; the calls of
a document run concurrently, at most `max_concurrency` at a time across everything this extractor does.
The answer is cached under sha256(model name + messages), so extracting identical text again costs no
call, in this process or the next. A failed call is retried once; a second failure raises
`ExtractionFailed` (a `ModelError`) naming the chunk, and the caller decides what to do with the
document. The answer is parsed leniently (`tuples.parse_tuples`); relationship endpoints the model
did not list as entities become entities of type "other". A chunk whose answer holds nothing readable (no
record and no completion marker, or only records that do not parse) is extracted by the offline extractor
instead, and counted in `Extraction.fallbacks`: the ingestion report, a warning and the document's record say
how many, so a model that answers in another format never leaves a KB silently without entities.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

from backend.application.ports.chat_model import ChatModel
from backend.domain import ids
from backend.domain.conversation import Message, Role
from backend.domain.errors import ModelError
from backend.domain.graph import ChunkRecord, DocumentRecord, Extraction
from backend.graphrag_agent.extraction.base import OTHER, ExtractionBuilder
from backend.graphrag_agent.extraction.offline import OfflineExtractor
from backend.graphrag_agent.extraction.prompts import extraction_prompt
from backend.graphrag_agent.extraction.tuples import ParsedTuples, parse_tuples
from backend.infrastructure.extraction.cache import ExtractionCache, cache_key

_log = logging.getLogger(__name__)

ATTEMPTS = 2  # the first call and one retry


class ExtractionFailed(ModelError):
    """The model failed twice on one chunk."""

    def __init__(self, message: str, chunk_ordinal: int) -> None:
        super().__init__(message)
        self.chunk_ordinal = chunk_ordinal


@dataclass(frozen=True, slots=True)
class _Request:
    key: str
    turns: tuple[Message, ...]
    ordinal: int


@dataclass(frozen=True, slots=True)
class _Answer:
    text: str
    calls: int  # 0 when the cache answered


class LlmExtractor:
    """`Extractor` backed by a chat model and an `ExtractionCache`."""

    def __init__(
        self,
        model: ChatModel,
        cache: ExtractionCache,
        max_concurrency: int = 4,
        model_name: str | None = None,
        fallback: OfflineExtractor | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self._model = model
        self._cache = cache
        self._model_name = model_name or model.model_name
        self._slots = asyncio.Semaphore(max_concurrency)
        self._fallback = fallback or OfflineExtractor()

    async def extract(self, kb: str, document: DocumentRecord, chunks: Sequence[ChunkRecord]) -> Extraction:
        requests = [self._request(document.title, chunk) for chunk in chunks]
        unique: dict[str, _Request] = {}
        for request in requests:
            unique.setdefault(request.key, request)  # identical chunks (same text and title) share one call
        answers = await self._answer_all(document.title, list(unique.values()))
        builder = ExtractionBuilder(kb)
        unreadable: list[ChunkRecord] = []
        for chunk, request in zip(chunks, requests, strict=True):
            parsed = parse_tuples(answers[request.key].text)
            if parsed.skipped:
                _log.info("skipped %d unreadable records in the answer for chunk %d", parsed.skipped, chunk.ordinal)
            if _holds_nothing_readable(parsed):
                unreadable.append(chunk)
            _add_records(builder, chunk.chunk_id, parsed)
        calls = sum(answer.calls for answer in answers.values())
        fresh = sum(1 for answer in answers.values() if answer.calls)
        extraction = builder.build(model_calls=calls, cache_hits=len(chunks) - fresh)
        if not unreadable:
            return extraction
        _log.warning(
            "the model's extraction of %d of %d chunks of %r did not parse; they are extracted offline",
            len(unreadable),
            len(chunks),
            document.title,
        )
        offline = await self._fallback.extract(kb, document, unreadable)
        return replace(
            extraction,
            entity_mentions=extraction.entity_mentions + offline.entity_mentions,
            relation_mentions=extraction.relation_mentions + offline.relation_mentions,
            fallbacks=len(unreadable),
        )

    def _request(self, title: str, chunk: ChunkRecord) -> _Request:
        system, user = extraction_prompt(title, chunk.text)
        turns = (Message(Role.SYSTEM, system), Message(Role.USER, user))
        key = cache_key(self._model_name, [(turn.role.value, turn.content) for turn in turns])
        return _Request(key, turns, chunk.ordinal)

    async def _answer_all(self, title: str, requests: list[_Request]) -> dict[str, _Answer]:
        tasks = [asyncio.create_task(self._answer(title, request)) for request in requests]
        try:
            answers = await asyncio.gather(*tasks)
        except BaseException:
            # One chunk failed (or we were cancelled): the document is not extracted, stop the rest.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return {request.key: answer for request, answer in zip(requests, answers, strict=True)}

    async def _answer(self, title: str, request: _Request) -> _Answer:
        cached = await self._cache.get(request.key)
        if cached is not None:
            return _Answer(cached, 0)
        async with self._slots:
            text, calls = await self._call(title, request)
        await self._cache.put(request.key, text, self._model_name)
        return _Answer(text, calls)

    async def _call(self, title: str, request: _Request) -> tuple[str, int]:
        failure: ModelError | None = None
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return await self._model.complete(request.turns), attempt
            except ModelError as exc:
                failure = exc
                _log.warning("extraction call %d for chunk %d failed: %s", attempt, request.ordinal, exc.message)
        assert failure is not None  # the loop ran at least once
        raise ExtractionFailed(
            f"entity extraction failed for chunk {request.ordinal} of {title!r} after {ATTEMPTS} attempts: "
            f"{failure.message}",
            request.ordinal,
        ) from failure


def _holds_nothing_readable(parsed: ParsedTuples) -> bool:
    """No record read, and either records that did not parse or no completion marker: not an answer in the
    format asked for (a chunk the model found nothing in ends with the marker alone)."""
    return not parsed.entities and not parsed.relationships and (parsed.skipped > 0 or not parsed.complete)


def _add_records(builder: ExtractionBuilder, chunk_id: str, parsed: ParsedTuples) -> None:
    for entity in parsed.entities:
        builder.add_entity(chunk_id, entity.name, entity.type, entity.description)
    for relation in parsed.relationships:
        source = _endpoint(builder, chunk_id, relation.source, relation.description)
        target = _endpoint(builder, chunk_id, relation.target, relation.description)
        if source is None or target is None:
            continue
        strength = relation.strength if relation.strength is not None and relation.strength > 0 else 1.0
        builder.add_relation(chunk_id, source, target, relation.description, strength)


def _endpoint(builder: ExtractionBuilder, chunk_id: str, name: str, description: str) -> str | None:
    """The id of a relationship end, adding it as an "other" entity when the model did not list it."""
    if not ids.normalise_entity_name(name):
        return None
    entity_id = builder.entity_id(name)
    if builder.has_entity(chunk_id, entity_id):
        return entity_id
    return builder.add_entity(chunk_id, name, OTHER, description)
