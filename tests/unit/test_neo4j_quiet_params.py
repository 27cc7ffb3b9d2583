"""Large query parameters reach the Neo4j driver as `QuietList`s: packed like lists, with a short repr."""

from __future__ import annotations

import numpy as np
from neo4j._codec.packstream.v1 import Packer

from backend.infrastructure.graph_store.neo4j.params import QuietList, quiet, stored_vector


class _Buffer:
    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, chunk: bytes) -> None:
        self.data += chunk


def _packed(value: object) -> bytes:
    buffer = _Buffer()
    Packer(buffer).pack(value)
    return bytes(buffer.data)


def test_a_quiet_list_is_packed_exactly_like_a_list() -> None:
    rows = [{"uid": f"u{i}", "embedding": [0.5 * i, -1.25, 3.0], "text": "a chunk"} for i in range(40)]
    assert _packed({"documents": QuietList(rows)}) == _packed({"documents": rows})
    assert _packed(QuietList([])) == _packed([])


def test_its_repr_does_not_grow_with_its_values() -> None:
    vector = stored_vector(np.linspace(-1.0, 1.0, 384, dtype=np.float32), "chunk c0")
    assert vector.values == [float(x) for x in np.linspace(-1.0, 1.0, 384, dtype=np.float32)]
    assert repr(QuietList(vector.values)) == "<384 values>"


def test_every_list_the_store_sends_is_quiet_and_nothing_else_changes() -> None:
    vector = stored_vector(np.linspace(-1.0, 1.0, 384, dtype=np.float32), "chunk c0").values
    # A read (a query vector) and a write (rows holding vectors), as the store hands them to the driver.
    read = quiet({"kb": "kb", "vector": vector, "limit": 5, "level": None})
    write = quiet({"documents": [{"embedding": vector}] * 500, "now": "2026-11-27T00:00:00Z"})
    assert repr(read) == "{'kb': 'kb', 'vector': <384 values>, 'limit': 5, 'level': None}"
    assert repr(write) == "{'documents': <500 values>, 'now': '2026-11-27T00:00:00Z'}"
    assert _packed(read) == _packed({"kb": "kb", "vector": vector, "limit": 5, "level": None})
    assert _packed(write) == _packed({"documents": [{"embedding": vector}] * 500, "now": "2026-11-27T00:00:00Z"})
