"""Large query parameters reach the Neo4j driver as `QuietList`s: packed like lists, with a short repr."""

from __future__ import annotations

import numpy as np
from neo4j._codec.packstream.v1 import Packer

from backend.infrastructure.graph_store.neo4j.params import QuietList, stored_vector


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
    assert isinstance(vector.values, QuietList)
    assert vector.values == [float(x) for x in np.linspace(-1.0, 1.0, 384, dtype=np.float32)]
    assert repr(vector.values) == "<384 values>"
    assert repr({"documents": QuietList([{"embedding": vector.values}] * 500)}) == "{'documents': <500 values>}"
