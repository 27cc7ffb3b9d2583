"""GraphRAG Router→Worker backend."""
