"""The embedded knowledge store and the minimal ingestion pipeline that fills it."""

from backend.infrastructure.knowledge.embedded_store import EmbeddedKnowledgeStore, StoredDocument
from backend.infrastructure.knowledge.indexer import EmbeddedKnowledgeIndexer
from backend.infrastructure.knowledge.loaders import FileDocumentLoader, expand_paths

__all__ = [
    "EmbeddedKnowledgeIndexer",
    "EmbeddedKnowledgeStore",
    "FileDocumentLoader",
    "StoredDocument",
    "expand_paths",
]
