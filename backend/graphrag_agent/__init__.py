"""The core: retrieval algorithms and the retrieve-only agents.

Imports nothing from server/, application/ or infrastructure/: what it needs from storage and
embeddings it declares as Protocols in `ports.py`, and the infrastructure layer supplies them.
"""
