"""Adapters that extract structure from text with a language model (or without one)."""

from backend.infrastructure.extraction.cache import ExtractionCache, cache_key
from backend.infrastructure.extraction.llm_extractor import ExtractionFailed, LlmExtractor

__all__ = ["ExtractionCache", "ExtractionFailed", "LlmExtractor", "cache_key"]
