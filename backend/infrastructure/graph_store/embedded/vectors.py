"""Brute-force cosine search over in-memory float32 matrices, one per (KB, kind), cached per revision.

The revision lives in the database and every write that changes a KB's vectors bumps it, so a matrix
cached by this process is rebuilt after writes by any process.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from backend.domain.errors import InvalidRequest
from backend.graphrag_agent.ports import Vector
from backend.infrastructure.graph_store.embedded.schema import revision

RowIds = npt.NDArray[np.int64]

# kind → the rows that have an embedding, with the level (communities) or 0. Constants, never caller input.
_MATRIX_SQL = {
    "chunks": "SELECT id, embedding, 0, chunk_id FROM chunks WHERE kb = ?",
    "entities": "SELECT id, embedding, 0, entity_id FROM entities WHERE kb = ? AND embedding IS NOT NULL",
    "communities": "SELECT id, embedding, level, community_id FROM communities WHERE kb = ? AND embedding IS NOT NULL",
}


@dataclass(frozen=True, slots=True)
class Matrix:
    """Unit-length rows (a zero vector stays zero) and, per row, its table row id, level and record id."""

    revision: int
    row_ids: RowIds
    levels: RowIds
    keys: npt.NDArray[np.str_]
    rows: npt.NDArray[np.float32]


class VectorCache:
    """The matrices of the (KB, kind)s searched lately. Shared by the worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], Matrix] = {}

    def matrix(self, raw: sqlite3.Connection, kb: str, kind: str) -> Matrix:
        """The current matrix; call inside a read transaction so that it matches the rows read next."""
        current = revision(raw, kb, kind)
        with self._lock:
            cached = self._entries.get((kb, kind))
        if cached is not None and cached.revision == current:
            return cached
        loaded = _load(raw, kb, kind, current)
        with self._lock:
            self._entries[(kb, kind)] = loaded
        return loaded

    def drop(self, kb: str, kinds: tuple[str, ...]) -> None:
        """Free matrices a write made stale now (the revision check alone would also keep results right)."""
        with self._lock:
            for kind in kinds:
                self._entries.pop((kb, kind), None)


def _load(raw: sqlite3.Connection, kb: str, kind: str, current: int) -> Matrix:
    found = raw.execute(_MATRIX_SQL[kind], (kb,)).fetchall()
    row_ids = np.fromiter((r[0] for r in found), dtype=np.int64, count=len(found))
    levels = np.fromiter((r[2] for r in found), dtype=np.int64, count=len(found))
    keys = np.asarray([r[3] for r in found], dtype=np.str_)
    return Matrix(current, row_ids, levels, keys, _unit_rows([r[1] for r in found], kb))


def _unit_rows(blobs: Sequence[bytes], kb: str) -> npt.NDArray[np.float32]:
    if not blobs:
        return np.zeros((0, 0), dtype=np.float32)
    width = len(blobs[0])
    if any(len(blob) != width for blob in blobs):
        raise InvalidRequest(f"KB {kb!r} holds embeddings of different dimensions: re-index it")
    rows = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), width // 4).astype(np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    unit: npt.NDArray[np.float32] = np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)
    return unit


def unit_query(embedding: Vector) -> Vector | None:
    """The query scaled to unit length; None when it has no direction (zero or not finite)."""
    query = np.asarray(embedding, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(query))
    if query.size == 0 or not np.isfinite(norm) or norm == 0.0:
        return None
    return query / np.float32(norm)


def top_rows(matrix: Matrix, query: Vector, limit: int, level: int | None = None) -> tuple[RowIds, Vector]:
    """Row ids and cosines of the `limit` best rows, best first; equal cosines by record id (as every store)."""
    if len(matrix.row_ids) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    if matrix.rows.shape[1] != query.shape[0]:
        raise InvalidRequest(
            f"the KB was indexed with {matrix.rows.shape[1]}-dimensional embeddings but the query has "
            f"{query.shape[0]}: re-index the KB with the current embedder"
        )
    row_ids, keys, rows = matrix.row_ids, matrix.keys, matrix.rows
    if level is not None:
        keep = matrix.levels == level
        row_ids, keys, rows = row_ids[keep], keys[keep], rows[keep]
    similarities = rows @ query
    best = _best_unordered(similarities, limit)
    order = best[np.lexsort((keys[best], -similarities[best]))][:limit]
    return row_ids[order], similarities[order]


def _best_unordered(similarities: Vector, limit: int) -> npt.NDArray[np.intp]:
    """The positions of the `limit` best scores and of every score tied with the last of them."""
    if len(similarities) <= limit:
        return np.arange(len(similarities))
    threshold = np.partition(similarities, len(similarities) - limit)[len(similarities) - limit]
    return np.flatnonzero(similarities >= threshold)
