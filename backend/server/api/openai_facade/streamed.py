"""What an encoder of the facade keeps of a stream for its last frames: the text sent, the route's KB, the sources,
the usage and the first error. Both wire formats (chat completion chunks, Responses API events) end a stream with
these, so they are kept the same way in one place."""

from __future__ import annotations

from backend.domain.conversation import Citation
from backend.domain.events import CitationsEvent, ErrorEvent, RoutedEvent, StreamEvent, UsageEvent
from backend.domain.tokens import TokenUsage
from backend.server.api.openai_facade.citations import annotations_for
from backend.server.api.openai_facade.models import Annotation


class StreamedAnswer:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.pieces: list[str] = []  # the encoder appends each token's text (the hot path: no call per token)
        self.kb_prefix = ""
        self.citations: tuple[Citation, ...] = ()
        self.consulted: tuple[Citation, ...] = ()
        self.usage: TokenUsage | None = None
        self.error: ErrorEvent | None = None

    def note(self, event: StreamEvent) -> None:
        """Keep what the last frames need of an event other than a token."""
        match event:
            case RoutedEvent(decision=decision):
                self.kb_prefix = decision.kb_prefix
            case CitationsEvent(citations=citations, consulted=consulted):
                self.citations, self.consulted = citations, consulted
            case UsageEvent(usage=usage):
                self.usage = usage
            case ErrorEvent() if self.error is None:  # the first says what failed
                self.error = event

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    def annotations(self) -> list[Annotation]:
        return annotations_for(self.text, self.citations, self.consulted, self.kb_prefix, self.base_url)
