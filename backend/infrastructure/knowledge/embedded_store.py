"""The embedded knowledge store: one SQLite file, no server, works offline.

- documents, chunks (with float32 embeddings) and an FTS5 index over pre-tokenised chunk text
  (`index_terms`, so CJK is searchable: unicode61 sees the unigrams and bigrams as words);
- vector search is brute-force cosine over the KB's chunk matrix, cached in memory per KB and
  keyed by a per-KB revision that every write bumps (so writes by another process are seen too);
- every statement filters by KB through a bound parameter; user text is never formatted into SQL;
- SQLite runs in worker threads; when the awaiting task is cancelled the running statement is
  interrupted and the call returns only after the thread has stopped;
- WAL mode: readers see whole committed documents only (each write is one transaction).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from backend.domain.errors import InvalidRequest, StoreUnavailable
from backend.graphrag_agent.chunking import TextChunk
from backend.graphrag_agent.ports import ChunkHit, Vector
from backend.graphrag_agent.text import content_terms, index_terms

logger = logging.getLogger(__name__)

T = TypeVar("T")

SCHEMA_VERSION = 1
_MAX_QUERY_TERMS = 64  # bounds the cost of one fulltext search
_MAX_LIMIT = 1000
_BUSY_TIMEOUT_S = 10.0
_PROGRESS_EVERY = 1000  # VM instructions between checks of the cancel flag

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS documents (
        kb TEXT NOT NULL, doc_id TEXT NOT NULL, title TEXT NOT NULL, metadata TEXT NOT NULL,
        created_at TEXT NOT NULL, PRIMARY KEY (kb, doc_id))""",
    """CREATE TABLE IF NOT EXISTS chunks (
        id INTEGER PRIMARY KEY, kb TEXT NOT NULL, chunk_id TEXT NOT NULL, doc_id TEXT NOT NULL,
        ordinal INTEGER NOT NULL, text TEXT NOT NULL, start_char INTEGER NOT NULL, end_char INTEGER NOT NULL,
        embedding BLOB NOT NULL, UNIQUE (kb, chunk_id),
        FOREIGN KEY (kb, doc_id) REFERENCES documents (kb, doc_id))""",
    "CREATE INDEX IF NOT EXISTS chunks_by_document ON chunks (kb, doc_id, ordinal)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(terms, kb UNINDEXED, tokenize = 'unicode61')",
    "CREATE TABLE IF NOT EXISTS kb_revisions (kb TEXT PRIMARY KEY, revision INTEGER NOT NULL)",
)

_FULLTEXT_SQL = """
SELECT c.chunk_id, c.doc_id, d.title, c.text, c.ordinal, -bm25(chunks_fts) AS relevance
FROM chunks_fts
JOIN chunks AS c ON c.id = chunks_fts.rowid
JOIN documents AS d ON d.kb = c.kb AND d.doc_id = c.doc_id
WHERE chunks_fts MATCH ? AND chunks_fts.kb = ? AND c.kb = ?
ORDER BY bm25(chunks_fts), c.id
LIMIT ?"""

_ROWS_BY_ID_SQL = """
SELECT c.id, c.chunk_id, c.doc_id, d.title, c.text, c.ordinal
FROM chunks AS c JOIN documents AS d ON d.kb = c.kb AND d.doc_id = c.doc_id
WHERE c.kb = ? AND c.id IN (SELECT value FROM json_each(?))"""


@dataclass(frozen=True, slots=True)
class StoredDocument:
    doc_id: str
    title: str
    metadata: dict[str, Any]
    created_at: str
    chunk_count: int


def chunk_id_for(doc_id: str, ordinal: int) -> str:
    """Stable chunk id: the same document always yields the same chunk ids."""
    return hashlib.sha256(f"{doc_id}:{ordinal}".encode()).hexdigest()


def fulltext_match_expression(query: str) -> str | None:
    """An FTS5 query that ORs the query's content terms, each quoted as an FTS5 string.

    Quoting makes every operator (`OR`, `NEAR(`, `*`, `:`, `^`, quotes) plain text; the result is
    passed to SQLite as a bound parameter. None when the query has no searchable term.
    """
    terms = content_terms(query)[:_MAX_QUERY_TERMS]
    if not terms:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


class _Connection:
    """One SQLite connection, used by one worker thread at a time, whose work can be cancelled."""

    def __init__(self, raw: sqlite3.Connection) -> None:
        self.raw = raw
        self._cancelled = threading.Event()
        # The flag covers a cancel that lands before the statement starts (interrupt() alone would miss it).
        raw.set_progress_handler(self._should_abort, _PROGRESS_EVERY)

    def _should_abort(self) -> int:
        return 1 if self._cancelled.is_set() else 0

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        self._cancelled.clear()
        task = asyncio.ensure_future(asyncio.to_thread(work, self.raw))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            self._cancelled.set()
            self.raw.interrupt()
            await _wait_for_thread(task)
            raise

    def close(self) -> None:
        self.raw.close()


async def _wait_for_thread(task: asyncio.Future[Any]) -> None:
    """Wait until the (interrupted) worker thread has returned, even if cancelled again meanwhile."""
    while not task.done():
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:
            continue
    if not task.cancelled() and task.exception() is not None:
        logger.debug("knowledge store query ended after cancellation: %r", task.exception())


class _VectorCache:
    """Per-KB chunk matrices, valid for one revision of that KB. Shared by the worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[int, npt.NDArray[np.int64], npt.NDArray[np.float32]]] = {}

    def get(self, kb: str, revision: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]] | None:
        with self._lock:
            entry = self._entries.get(kb)
        if entry is None or entry[0] != revision:
            return None
        return entry[1], entry[2]

    def put(self, kb: str, revision: int, ids: npt.NDArray[np.int64], matrix: npt.NDArray[np.float32]) -> None:
        with self._lock:
            self._entries[kb] = (revision, ids, matrix)

    def drop(self, kb: str) -> None:
        with self._lock:
            self._entries.pop(kb, None)


class EmbeddedKnowledgeStore:
    """Documents, chunks, fulltext and vector search for every KB, in one SQLite file.

    Implements the core's `ChunkIndex`. Open with `await EmbeddedKnowledgeStore.open(path)`.
    """

    def __init__(self, path: Path, writer: _Connection, readers: Sequence[_Connection]) -> None:
        self._path = path
        self._writer = writer
        self._write_lock = asyncio.Lock()
        self._all_readers = tuple(readers)
        self._readers: asyncio.Queue[_Connection] = asyncio.Queue()
        for reader in readers:
            self._readers.put_nowait(reader)
        self._vectors = _VectorCache()
        self._closed = False

    @classmethod
    async def open(cls, path: Path, readers: int = 2) -> EmbeddedKnowledgeStore:
        """Open (creating it and its schema if needed) the store file at `path`."""
        if readers < 1:
            raise ValueError("readers must be at least 1")
        try:
            connections = await asyncio.to_thread(_open_connections, path, readers)
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(f"cannot open the knowledge store at {path}: {exc}") from exc
        return cls(path, _Connection(connections[0]), [_Connection(raw) for raw in connections[1:]])

    @property
    def path(self) -> Path:
        return self._path

    async def close(self) -> None:
        """Close the file once the operations in flight have finished."""
        if self._closed:
            return
        self._closed = True
        async with self._write_lock:
            self._writer.close()
        for _ in self._all_readers:
            (await self._readers.get()).close()

    async def ping(self) -> None:
        """Readiness: returns when the file answers a query, raises StoreUnavailable otherwise."""
        await self._read("ping", lambda raw: raw.execute("SELECT 1").fetchone())

    # --- documents -------------------------------------------------------------------------------

    async def has_document(self, kb: str, doc_id: str) -> bool:
        sql = "SELECT 1 FROM documents WHERE kb = ? AND doc_id = ?"
        return await self._read("has_document", lambda raw: raw.execute(sql, (kb, doc_id)).fetchone() is not None)

    async def upsert_document(
        self,
        kb: str,
        doc_id: str,
        title: str,
        metadata: dict[str, Any],
        chunks_with_embeddings: Sequence[tuple[TextChunk, Vector]],
    ) -> int:
        """Write a document and all its chunks in one transaction, replacing an earlier copy.

        Returns the number of chunks written. Readers see either the old or the new document, never a mix.
        """
        rows = _chunk_rows(kb, doc_id, chunks_with_embeddings)
        metadata_json = json.dumps(metadata, ensure_ascii=False, sort_keys=True, default=str)
        created_at = datetime.now(UTC).isoformat()

        def write(raw: sqlite3.Connection) -> int:
            _check_dimension(raw, kb, doc_id, rows)
            _delete_chunks(raw, kb, doc_id)
            raw.execute(
                """INSERT INTO documents (kb, doc_id, title, metadata, created_at) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (kb, doc_id)
                DO UPDATE SET title = excluded.title, metadata = excluded.metadata""",
                (kb, doc_id, title, metadata_json, created_at),
            )
            for row in rows:
                _insert_chunk(raw, row, title)
            _bump_revision(raw, kb)
            return len(rows)

        return await self._write("upsert_document", kb, write)

    async def delete_document(self, kb: str, doc_id: str) -> bool:
        """Remove a document and its chunks; False when it was not there."""

        def delete(raw: sqlite3.Connection) -> bool:
            _delete_chunks(raw, kb, doc_id)
            deleted = raw.execute("DELETE FROM documents WHERE kb = ? AND doc_id = ?", (kb, doc_id)).rowcount > 0
            if deleted:
                _bump_revision(raw, kb)
            return deleted

        return await self._write("delete_document", kb, delete)

    async def list_documents(self, kb: str) -> list[StoredDocument]:
        sql = """SELECT d.doc_id, d.title, d.metadata, d.created_at,
                        (SELECT count(*) FROM chunks AS c WHERE c.kb = d.kb AND c.doc_id = d.doc_id)
                 FROM documents AS d WHERE d.kb = ? ORDER BY d.title, d.doc_id"""
        rows = await self._read("list_documents", lambda raw: raw.execute(sql, (kb,)).fetchall())
        return [StoredDocument(r[0], r[1], json.loads(r[2]), r[3], int(r[4])) for r in rows]

    async def count_chunks(self, kb: str) -> int:
        sql = "SELECT count(*) FROM chunks WHERE kb = ?"
        return int(await self._read("count_chunks", lambda raw: raw.execute(sql, (kb,)).fetchone()[0]))

    # --- ChunkIndex --------------------------------------------------------------------------------

    async def search_chunks_fulltext(self, kb: str, query: str, limit: int) -> list[ChunkHit]:
        """BM25-ranked chunks containing any content term of `query`; score = -bm25 (higher is better)."""
        expression = fulltext_match_expression(query)
        if expression is None or limit <= 0:
            return []
        params = (expression, kb, kb, min(limit, _MAX_LIMIT))
        rows = await self._read("fulltext search", lambda raw: raw.execute(_FULLTEXT_SQL, params).fetchall())
        return [ChunkHit(r[0], r[1], r[2], r[3], int(r[4]), float(r[5])) for r in rows]

    async def search_chunks_vector(self, kb: str, embedding: Vector, limit: int) -> list[ChunkHit]:
        """The `limit` chunks of `kb` with the highest cosine similarity to `embedding`."""
        if limit <= 0:
            return []
        query = np.asarray(embedding, dtype=np.float32).reshape(-1)
        norm = float(np.linalg.norm(query))
        if not np.isfinite(norm) or norm == 0.0:
            return []
        query = query / np.float32(norm)
        limit = min(limit, _MAX_LIMIT)

        def search(raw: sqlite3.Connection) -> list[ChunkHit]:
            return _in_transaction(raw, lambda r: self._vector_search(r, kb, query, limit), "BEGIN")

        return await self._read("vector search", search)

    def _vector_search(self, raw: sqlite3.Connection, kb: str, query: Vector, limit: int) -> list[ChunkHit]:
        # One read transaction: the revision, the matrix and the rows come from the same snapshot.
        ids, matrix = self._matrix(raw, kb)
        if len(ids) == 0:
            return []
        if matrix.shape[1] != query.shape[0]:
            raise InvalidRequest(
                f"KB {kb!r} was indexed with {matrix.shape[1]}-dimensional embeddings but the query "
                f"embedding has {query.shape[0]}: re-index the KB with the current embedder"
            )
        top_ids, similarities = _top_k(ids, matrix @ query, limit)
        rows = raw.execute(_ROWS_BY_ID_SQL, (kb, json.dumps([int(i) for i in top_ids]))).fetchall()
        by_id = {int(r[0]): r for r in rows}
        return [
            ChunkHit(r[1], r[2], r[3], r[4], int(r[5]), float(score))
            for row_id, score in zip(top_ids, similarities, strict=True)
            if (r := by_id.get(int(row_id))) is not None
        ]

    def _matrix(self, raw: sqlite3.Connection, kb: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        revision = _revision(raw, kb)
        cached = self._vectors.get(kb, revision)
        if cached is not None:
            return cached
        rows = raw.execute("SELECT id, embedding FROM chunks WHERE kb = ? ORDER BY id", (kb,)).fetchall()
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        matrix = _stack_embeddings([r[1] for r in rows])
        self._vectors.put(kb, revision, ids, matrix)
        return ids, matrix

    # --- plumbing ------------------------------------------------------------------------------------

    async def _read(self, what: str, work: Callable[[sqlite3.Connection], T]) -> T:
        async with self._reader() as connection:
            return await self._guarded(what, connection, work)

    async def _write(self, what: str, kb: str, work: Callable[[sqlite3.Connection], T]) -> T:
        self._check_open()
        async with self._write_lock:
            self._check_open()
            try:
                return await self._guarded(what, self._writer, lambda raw: _in_transaction(raw, work))
            finally:
                self._vectors.drop(kb)  # free the memory now; the revision check alone would also do

    @asynccontextmanager
    async def _reader(self) -> AsyncIterator[_Connection]:
        self._check_open()
        connection = await self._readers.get()
        try:
            yield connection
        finally:
            self._readers.put_nowait(connection)

    async def _guarded(self, what: str, connection: _Connection, work: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return await connection.run(work)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"knowledge store {self._path}: {what} failed: {exc}") from exc

    def _check_open(self) -> None:
        if self._closed:
            raise StoreUnavailable(f"knowledge store {self._path} is closed")


@dataclass(frozen=True, slots=True)
class _ChunkRow:
    kb: str
    chunk_id: str
    doc_id: str
    chunk: TextChunk
    embedding: bytes
    dimension: int


def _chunk_rows(kb: str, doc_id: str, chunks: Sequence[tuple[TextChunk, Vector]]) -> list[_ChunkRow]:
    rows: list[_ChunkRow] = []
    for chunk, embedding in chunks:
        vector = np.asarray(embedding, dtype="<f4").reshape(-1)
        if vector.size == 0 or not np.all(np.isfinite(vector)):
            raise InvalidRequest(f"chunk {chunk.ordinal} of document {doc_id} has an empty or non-finite embedding")
        rows.append(_ChunkRow(kb, chunk_id_for(doc_id, chunk.ordinal), doc_id, chunk, vector.tobytes(), vector.size))
    if len({row.dimension for row in rows}) > 1:
        raise InvalidRequest(f"the chunks of document {doc_id} have embeddings of different dimensions")
    return rows


def _check_dimension(raw: sqlite3.Connection, kb: str, doc_id: str, rows: Sequence[_ChunkRow]) -> None:
    """A KB holds one embedding dimension: vector search multiplies one matrix."""
    if not rows:
        return
    found = raw.execute(
        "SELECT length(embedding) / 4 FROM chunks WHERE kb = ? AND doc_id != ? LIMIT 1", (kb, doc_id)
    ).fetchone()
    if found is not None and int(found[0]) != rows[0].dimension:
        raise InvalidRequest(
            f"KB {kb!r} holds {found[0]}-dimensional embeddings, this document has {rows[0].dimension}: "
            "re-index the whole KB after changing the embedding model"
        )


def _insert_chunk(raw: sqlite3.Connection, row: _ChunkRow, title: str) -> None:
    cursor = raw.execute(
        """INSERT INTO chunks (kb, chunk_id, doc_id, ordinal, text, start_char, end_char, embedding)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
        (
            row.kb,
            row.chunk_id,
            row.doc_id,
            row.chunk.ordinal,
            row.chunk.text,
            row.chunk.start,
            row.chunk.end,
            row.embedding,
        ),
    )
    # The title's terms go with every chunk so a question naming the document finds its chunks.
    terms = " ".join(index_terms(f"{title}\n{row.chunk.text}"))
    raw.execute("INSERT INTO chunks_fts (rowid, terms, kb) VALUES (?, ?, ?)", (cursor.lastrowid, terms, row.kb))


def _delete_chunks(raw: sqlite3.Connection, kb: str, doc_id: str) -> None:
    raw.execute(
        "DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE kb = ? AND doc_id = ?)",
        (kb, doc_id),
    )
    raw.execute("DELETE FROM chunks WHERE kb = ? AND doc_id = ?", (kb, doc_id))


def _bump_revision(raw: sqlite3.Connection, kb: str) -> None:
    raw.execute(
        """INSERT INTO kb_revisions (kb, revision) VALUES (?, 1)
        ON CONFLICT (kb) DO UPDATE SET revision = revision + 1""",
        (kb,),
    )


def _revision(raw: sqlite3.Connection, kb: str) -> int:
    row = raw.execute("SELECT revision FROM kb_revisions WHERE kb = ?", (kb,)).fetchone()
    return int(row[0]) if row is not None else 0


def _stack_embeddings(blobs: Sequence[bytes]) -> npt.NDArray[np.float32]:
    if not blobs:
        return np.zeros((0, 0), dtype=np.float32)
    width = len(blobs[0])
    if any(len(blob) != width for blob in blobs):
        raise InvalidRequest("the KB holds embeddings of different dimensions: re-index it")
    flat = np.frombuffer(b"".join(blobs), dtype="<f4")
    return flat.reshape(len(blobs), width // 4).astype(np.float32)


def _top_k(
    ids: npt.NDArray[np.int64], similarities: npt.NDArray[np.float32], limit: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """The `limit` best rows, best first; equal scores in row order, so results are deterministic."""
    candidates = _best_unordered(similarities, limit)
    order = candidates[np.lexsort((ids[candidates], -similarities[candidates]))]
    return ids[order], similarities[order]


def _best_unordered(similarities: npt.NDArray[np.float32], limit: int) -> npt.NDArray[np.intp]:
    if len(similarities) <= limit:
        return np.arange(len(similarities))
    return np.argpartition(-similarities, limit - 1)[:limit]


def _in_transaction(
    raw: sqlite3.Connection, work: Callable[[sqlite3.Connection], T], begin: str = "BEGIN IMMEDIATE"
) -> T:
    """Run `work` in one transaction: committed whole or rolled back whole."""
    if raw.in_transaction:  # left over by a failed rollback; never build on it
        raw.execute("ROLLBACK")
    raw.execute(begin)
    try:
        result = work(raw)
        raw.execute("COMMIT")
    except BaseException:
        # An interrupted statement may already have rolled the transaction back.
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise
    return result


def _connect(path: Path) -> sqlite3.Connection:
    raw = sqlite3.connect(str(path), timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    raw.execute("PRAGMA foreign_keys = ON")
    raw.execute("PRAGMA synchronous = NORMAL")
    return raw


def _open_connections(path: Path, readers: int) -> list[sqlite3.Connection]:
    """The writer (first, after creating the schema) and the readers; all closed again on failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    opened: list[sqlite3.Connection] = []
    try:
        opened.append(_connect(path))
        opened[0].execute("PRAGMA journal_mode = WAL")
        _in_transaction(opened[0], _create_schema)
        opened.extend(_connect(path) for _ in range(readers))
    except BaseException:
        for raw in opened:
            raw.close()
        raise
    return opened


def _create_schema(raw: sqlite3.Connection) -> None:
    for statement in _SCHEMA:
        raw.execute(statement)
    row = raw.execute("SELECT value FROM store_meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        raw.execute("INSERT INTO store_meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
    elif int(row[0]) > SCHEMA_VERSION:
        raise sqlite3.DatabaseError(
            f"schema version {row[0]} is newer than this program understands ({SCHEMA_VERSION}); upgrade it"
        )
