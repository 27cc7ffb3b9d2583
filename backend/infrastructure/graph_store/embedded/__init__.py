"""The embedded GraphStore adapter: one SQLite file, no server (SPEC §8)."""

from backend.infrastructure.graph_store.embedded.store import EmbeddedGraphStore

__all__ = ["EmbeddedGraphStore"]
