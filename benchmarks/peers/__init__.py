"""Runners of peer systems (nano-graphrag, LightRAG) for benchmarks.podcast_indexing.

They run in their own virtual environment (`.venv-peers`, see requirements.txt), one process per system and
phase, and import the peer libraries only at run time, so this package type-checks and lints without them.
"""
