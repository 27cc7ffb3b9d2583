"""Ingestion into the knowledge graph: loaders, the indexing pipeline and community maintenance."""
