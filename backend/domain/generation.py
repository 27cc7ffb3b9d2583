"""What the answer generator produces."""

from __future__ import annotations

from enum import StrEnum


class GenerationMode(StrEnum):
    """Which generator wrote an answer; every answer records it."""

    LLM = "llm"
    EXTRACTIVE = "extractive"
