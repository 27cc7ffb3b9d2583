"""Entity and relation extraction: the builder of an `Extraction`, the tuple-format parser, the LLM prompt and the
model-free `OfflineExtractor`. The LLM-backed extractor lives in `backend.infrastructure.extraction`."""

from backend.graphrag_agent.extraction.base import ENTITY_TYPES, ExtractionBuilder
from backend.graphrag_agent.extraction.offline import OfflineExtractor
from backend.graphrag_agent.extraction.tuples import ParsedTuples, TupleEntity, TupleRelationship, parse_tuples

__all__ = [
    "ENTITY_TYPES",
    "ExtractionBuilder",
    "OfflineExtractor",
    "ParsedTuples",
    "TupleEntity",
    "TupleRelationship",
    "parse_tuples",
]
