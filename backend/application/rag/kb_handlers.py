"""KB-specific handlers: a KB can replace the generic retrieve-then-generate path with its own.

For structured sources (a product catalogue, a SQL database) a handler that queries the source
directly answers better than chunk retrieval. A handler is named in the KB registry as
`handler = "package.module:factory"`; the factory receives the `KnowledgeBase` and returns an
object with the method below (its stream also answers the callers that want the answer whole). KBs
without a handler use the generic path.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from typing import Protocol, cast

from backend.application.ports.generation import GenerationRequest
from backend.domain.errors import InvalidRequest
from backend.domain.events import StreamEvent
from backend.domain.knowledge_base import KnowledgeBase


class KnowledgeBaseHandler(Protocol):
    def stream(self, request: GenerationRequest) -> AsyncGenerator[StreamEvent, None]:
        """Progress, the sources the answer cites by number (a `SourcesEvent`, before the first token), tokens
        and, when it knows them, the tokens the answer took (a `UsageEvent`); never `start`, `done` or
        `citations` (the stream sends those)."""
        ...


HandlerFactory = Callable[[KnowledgeBase], KnowledgeBaseHandler]


class KnowledgeBaseHandlerFactory:
    """The registry of KB-specific handlers, keyed by kb_prefix."""

    def __init__(self, handlers: Mapping[str, KnowledgeBaseHandler] | None = None) -> None:
        self._handlers = dict(handlers or {})

    @classmethod
    def from_knowledge_bases(cls, knowledge_bases: Iterable[KnowledgeBase]) -> KnowledgeBaseHandlerFactory:
        return cls({kb.kb_prefix: _load_factory(kb.handler)(kb) for kb in knowledge_bases if kb.handler})

    def get(self, kb_prefix: str) -> KnowledgeBaseHandler | None:
        return self._handlers.get(kb_prefix)


def _load_factory(path: str) -> HandlerFactory:
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise InvalidRequest(f"handler {path!r} must look like 'package.module:factory'")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise InvalidRequest(f"cannot load KB handler {path!r}: {error}") from error
    if not callable(factory):
        raise InvalidRequest(f"KB handler {path!r} is not callable")
    return cast(HandlerFactory, factory)
