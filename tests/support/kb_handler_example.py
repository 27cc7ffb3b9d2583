"""A KB-specific handler used by the tests: answers from a fixed table instead of retrieval."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from backend.application.ports.generation import GenerationRequest
from backend.domain.conversation import Citation
from backend.domain.events import SourcesEvent, StreamEvent, TokenEvent
from backend.domain.knowledge_base import KnowledgeBase

PRICES = {"mill tour": "£12"}
CITATION = Citation("table:prices", "Price table", "prices", "", "mill tour: £12")


class PriceTableHandler:
    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb

    def _answer(self, question: str) -> str:
        hits = [f"{item} costs {price} [1]" for item, price in PRICES.items() if item in question.lower()]
        return "; ".join(hits) or "not in the price table"

    async def stream(self, request: GenerationRequest) -> AsyncGenerator[StreamEvent, None]:
        yield SourcesEvent((CITATION,))
        for word in self._answer(request.message).split(" "):
            yield TokenEvent(word + " ")


def build(kb: KnowledgeBase) -> PriceTableHandler:
    return PriceTableHandler(kb)
