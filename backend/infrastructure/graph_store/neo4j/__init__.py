"""The Neo4j GraphStore adapter: the knowledge graph in a Neo4j 5 server (SPEC §8)."""

from backend.infrastructure.graph_store.neo4j.store import Neo4jGraphStore

__all__ = ["Neo4jGraphStore"]
