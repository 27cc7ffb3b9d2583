"""The Neo4j GraphStore: the knowledge graph of every KB in one Neo4j 5 database, via the async driver.

- `upsert_document`, `delete_document` and `replace_communities` are each one managed write transaction
  (the driver retries it whole on transient errors such as deadlocks); writes are batched with `UNWIND`;
- fulltext search queries Lucene through a whitespace analyzer over pre-tokenised terms, the query's
  content terms escaped, quoted and OR-ed, and the KB's token required (all in one `$query` parameter);
- vector search is exact (a cosine scan over the KB) while the KB is small, else the vector index with an
  oversampled k filtered to the KB, rescored exactly, with the scan as fallback when too few come back;
- driver errors surface as `StoreUnavailable`, malformed input as `InvalidRequest`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, Final, LiteralString, TypeVar
from urllib.parse import urlsplit

import numpy as np
from neo4j import (
    READ_ACCESS,
    WRITE_ACCESS,
    AsyncDriver,
    AsyncGraphDatabase,
    AsyncManagedTransaction,
    AsyncSession,
    NotificationMinimumSeverity,
    Query,
    Record,
)
from neo4j.exceptions import ConstraintError, DriverError, Neo4jError
from tenacity import AsyncRetrying, retry_if_exception, stop_after_delay, wait_exponential_jitter

from backend.application.ports.graph_store import BulkLoad, DocumentWrite, GraphCounts
from backend.domain.errors import InvalidRequest, KnowledgeStoreUnavailable, StoreUnavailable
from backend.domain.graph import (
    ChunkRecord,
    CommunityRecord,
    DocumentRecord,
    EntityGraph,
    EntityRecord,
    RelationRecord,
)
from backend.domain.knowledge_base import KbOverview, KnowledgeBase
from backend.graphrag_agent.ports import ChunkHit, CommunityHit, EntityHit, TermCounts, Vector
from backend.graphrag_agent.text import fulltext_query_terms
from backend.infrastructure.graph_store.base import GraphStoreBase, capped
from backend.infrastructure.graph_store.bulk_load import NothingSuspended
from backend.infrastructure.graph_store.neo4j import community_refresh, profile, writes
from backend.infrastructure.graph_store.neo4j import queries as q
from backend.infrastructure.graph_store.neo4j.community_refresh import DEFAULT_BATCHES, BatchLimits
from backend.infrastructure.graph_store.neo4j.errors import (
    DRIVER_ERRORS,
    public_uri,
    store_unavailable,
    vector_index_unavailable,
)
from backend.infrastructure.graph_store.neo4j.params import (
    MAX_TERM_CHARS,
    DocumentParams,
    community_params,
    document_params,
    kb_scope,
    kb_token,
    node_uid,
    quiet,
    source_key,
)
from backend.infrastructure.graph_store.neo4j.schema import (
    await_indexes,
    create_vector_indexes,
    drop_vector_indexes,
    ensure_schema,
)

T = TypeVar("T")
_log = logging.getLogger(__name__)

# A KB with at most this many vectors of a kind is scanned exactly. The scan's cost grows with the KB while an
# index query's is about the same whatever its size; they break even near this many vectors.
EXACT_SCAN_MAX: Final = 300
# Chunks per write transaction of `upsert_documents`: an indexer batch of short passages fits in one; a few
# hundred long-document chunks with their mentions stay well inside Neo4j's transaction memory.
WRITE_BATCH_CHUNKS: Final = 500
BULK_LOAD_MIN_DOCUMENTS: Final = 1_000  # bulk_load: smaller loads keep the vector indexes up to date as they write
_MAX_QUERY_TERMS: Final = 64  # bounds the cost of one fulltext search
# The vector index is shared by every KB, so it is asked for more candidates than `limit`: first a few (the
# usual case, one KB or a large one: an index query costs more the more candidates it is asked for), then many
# (the KB's vectors are a small part of the index), then the exact scan. The KB's vectors among the index's k
# nearest are the KB's nearest.
_CANDIDATE_PASSES: Final = ((2, 50), (10, 100))  # (times `limit`, at least)
_MAX_CANDIDATES: Final = 10_000
_LUCENE_SPECIAL: Final = frozenset('\\+-!():^[]"{}~*?|&/')
# Bolt only: the driver's HTTP transport is a preview without the sessions this store uses.
_SCHEMES: Final = frozenset({"bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc"})
# What a write that would break a uniqueness constraint fails with (a KB creation whose prefix is taken).
_UNIQUENESS_VIOLATED: Final = "Neo.ClientError.Schema.ConstraintValidationFailed"


def lucene_query(kb: str, query: str) -> str | None:
    """A Lucene query: the KB's token (scoring nothing) AND any of the query's content terms.

    Every term is escaped and quoted, so operators in the question are plain words; the result is passed
    to Neo4j as a parameter. None when the question has no searchable term.
    """
    terms = [term for term in fulltext_query_terms(query) if len(term) <= MAX_TERM_CHARS][:_MAX_QUERY_TERMS]
    if not terms:
        return None
    quoted = " ".join(f'terms:"{_escape(term)}"' for term in terms)
    return f"+kbt:{kb_token(kb)}^0 +({quoted})"


def _uri_password(uri: str) -> str | None:
    try:
        return urlsplit(uri).password
    except ValueError:
        return None


def _escape(term: str) -> str:
    return "".join("\\" + ch if ch in _LUCENE_SPECIAL else ch for ch in term)


def _unit(embedding: Vector) -> list[float] | None:
    """The query as unit-length floats; None when it has no direction (zero or not finite)."""
    vector = np.asarray(embedding, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(vector))
    if vector.size == 0 or not np.isfinite(norm) or norm == 0.0:
        return None
    unit: list[float] = (vector / np.float32(norm)).tolist()
    return unit


@dataclass(frozen=True, slots=True)
class _VectorKind:
    name: str
    index: str
    probe: LiteralString
    exact: LiteralString
    indexed: LiteralString


@dataclass(frozen=True, slots=True)
class _VectorSet:
    """What a probe found of one KB's vectors of one kind: more than exact_scan_max? and their dimension."""

    large: bool
    dimension: int | None


_LARGE_SET_MEMORY_S: Final = 60.0  # how long a large vector set skips its probe (a KB that shrank: ≤ 60 s)

_CHUNKS = _VectorKind("chunk", q.CHUNK_VECTOR_INDEX, q.CHUNK_VECTOR_PROBE, q.CHUNK_VECTOR_EXACT, q.CHUNK_VECTOR_INDEXED)
_ENTITIES = _VectorKind(
    "entity", q.ENTITY_VECTOR_INDEX, q.ENTITY_VECTOR_PROBE, q.ENTITY_VECTOR_EXACT, q.ENTITY_VECTOR_INDEXED
)
_COMMUNITIES = _VectorKind(
    "community",
    q.COMMUNITY_VECTOR_INDEX,
    q.COMMUNITY_VECTOR_PROBE,
    q.COMMUNITY_VECTOR_EXACT,
    q.COMMUNITY_VECTOR_INDEXED,
)


# -- records from driver rows (no driver type leaves this module) -------------------------------------------------

# A row of an agent read: one map of `rows` (queries.py), or a driver record where a query returns few.
Row = Mapping[str, Any]


def _chunk(record: Row) -> ChunkHit:
    return ChunkHit(
        record["id"], record["doc_id"], record["title"], record["text"], int(record["ordinal"]), float(record["score"])
    )


def _chunk_record(record: Record) -> ChunkRecord:
    return ChunkRecord(
        record["id"],
        record["doc_id"],
        int(record["ordinal"]),
        record["text"],
        int(record["start_char"]),
        int(record["end_char"]),
    )


def _entity(record: Row) -> EntityRecord:
    return EntityRecord(
        record["id"], record["name"], record["type"], record["description"], int(record["mention_count"])
    )


def _community(record: Row) -> CommunityRecord:
    return CommunityRecord(
        community_id=record["id"],
        level=int(record["level"]),
        title=record["title"],
        summary=record["summary"],
        rank=float(record["rank"]),
        entity_ids=tuple(sorted(record["members"])),
        parent_id=record["parent_id"],
    )


def _document(record: Record) -> DocumentRecord:
    return DocumentRecord(
        doc_id=record["id"],
        title=record["title"],
        metadata=json.loads(record["metadata"]),
        source=record["source"],
        chunk_count=int(record["chunk_count"]),
        created_at=datetime.fromisoformat(record["created_at"]),
    )


def _knowledge_base(record: Record) -> KnowledgeBase:
    return KnowledgeBase(
        kb_prefix=record["kb_prefix"],
        description=record["description"],
        keywords=tuple(record["keywords"] or ()),
        language=record["language"],
        default_agent=record["default_agent"],
        is_default=bool(record["is_default"]),
        sources=tuple(record["sources"] or ()),
        handler=record["handler"],
    )


def _groups_of_chunks(batch: Sequence[DocumentParams], most: int) -> list[list[DocumentParams]]:
    """Consecutive groups of at most `most` chunks in all (a larger document is a group of its own)."""
    groups: list[list[DocumentParams]] = []
    size = 0
    for params in batch:
        if not groups or size + len(params.chunks) > most:
            groups.append([])
            size = 0
        groups[-1].append(params)
        size += len(params.chunks)
    return groups


def _best_first(records: Sequence[Row]) -> list[Row]:
    return sorted(records, key=lambda r: (-float(r["score"]), r["id"]))


def _in_order(records: Sequence[Row], wanted: Sequence[str]) -> list[Row]:
    by_id = {record["id"]: record for record in records}
    return [by_id[key] for key in dict.fromkeys(wanted) if key in by_id]


class _VectorIndexBuild:
    """The `BulkLoad` of a load that suspended the vector indexes: once the documents are written, the chunk and
    entity indexes are built while the community refresh runs (the community index is built after it: the
    refresh writes communities in many transactions, which would leave that index in as many small pieces)."""

    def __init__(self, build: Callable[[Mapping[str, int]], Awaitable[None]], dimensions: Mapping[str, int]) -> None:
        self._build = build
        self._dimensions = dimensions

    async def documents_written(self) -> None:
        await self._build({k: v for k, v in self._dimensions.items() if k != q.COMMUNITY_VECTOR_INDEX})


class Neo4jGraphStore(GraphStoreBase):
    """Implements `GraphStore` (so also `GraphReader` and `ChunkIndex`) on Neo4j 5.

    Open with `await Neo4jGraphStore.open(uri, user, password)`; `close()` when done. The constructor
    takes a ready driver (it does not connect, nor create the schema).
    """

    def __init__(
        self,
        driver: AsyncDriver,
        *,
        database: str | None = None,
        server: str = "neo4j",
        index_dimensions: Mapping[str, int] | None = None,
        exact_scan_max: int = EXACT_SCAN_MAX,
        secrets: tuple[str, ...] = (),
        community_batches: BatchLimits = DEFAULT_BATCHES,
        max_retry_time_s: float = 15.0,
        bulk_load_min_documents: int = BULK_LOAD_MIN_DOCUMENTS,
    ) -> None:
        self._driver = driver
        self._max_retry_time_s = max_retry_time_s
        self._community_batches = community_batches
        # Set when the schema is still to be created: the server was down when the store was opened lazily.
        self._pending_dimension: int | None = None
        self._schema_lock = asyncio.Lock()
        self._database = database
        self._server = server
        self._index_dimensions = dict(index_dimensions or {})
        self._exact_scan_max = exact_scan_max
        self._bulk_load_min_documents = bulk_load_min_documents
        # (kind, kb, level) → a probe that found more vectors than exact_scan_max, and until when to trust it.
        self._large_vector_sets: dict[tuple[str, str, int | None], tuple[_VectorSet, float]] = {}
        self._secrets = secrets
        self._closed = False

    @classmethod
    async def open(
        cls,
        uri: str,
        user: str,
        password: str,
        database: str | None = None,
        embedding_dimension: int = 384,
        *,
        connection_timeout_s: float = 10.0,
        max_retry_time_s: float = 15.0,
        exact_scan_max: int = EXACT_SCAN_MAX,
        community_batches: BatchLimits = DEFAULT_BATCHES,
        lazy: bool = False,
        bulk_load_min_documents: int = BULK_LOAD_MIN_DOCUMENTS,
    ) -> Neo4jGraphStore:
        """Connect, create the schema if needed (idempotent) and return the store.

        An empty `user` connects without authentication. Raises `StoreUnavailable` when the server
        cannot be reached or refuses the credentials — unless `lazy`: then the store is returned anyway
        and creates its schema on first use (the server keeps serving general chat and history while
        Neo4j is down, and its `ping` says so).
        """
        if embedding_dimension < 1:
            raise ValueError("embedding_dimension must be at least 1")
        server = public_uri(uri)
        secrets = tuple(secret for secret in (password, _uri_password(uri)) if secret)
        if urlsplit(uri).scheme not in _SCHEMES:
            raise KnowledgeStoreUnavailable(
                f"Neo4j URI {server!r}: the scheme must be one of {', '.join(sorted(_SCHEMES))}"
            )
        try:
            driver = AsyncGraphDatabase.driver(
                uri,
                auth=(user, password) if user else None,
                connection_timeout=connection_timeout_s,
                max_transaction_retry_time=max_retry_time_s,
                user_agent="graphrag-router-worker",
                # Hints such as "this label does not exist yet" on an empty database would flood the log.
                notifications_min_severity=NotificationMinimumSeverity.OFF,
            )
        except (*DRIVER_ERRORS, ValueError) as exc:
            raise store_unavailable(exc, "connecting", server, secrets) from exc
        store = cls(
            driver,
            database=database,
            server=server,
            exact_scan_max=exact_scan_max,
            secrets=secrets,
            community_batches=community_batches,
            max_retry_time_s=max_retry_time_s,
            bulk_load_min_documents=bulk_load_min_documents,
        )
        store._pending_dimension = embedding_dimension
        try:
            await store.ping()
        except StoreUnavailable as error:
            if not lazy:
                await driver.close()
                raise
            _log.warning("Neo4j is not answering (%s); its schema is created when it does", error.message)
        except BaseException:
            await driver.close()
            raise
        return store

    @property
    def vector_index_dimensions(self) -> Mapping[str, int]:
        """Each vector index's dimension as found at `open()` (one that differs from the data is not used)."""
        return dict(self._index_dimensions)

    async def ping(self) -> None:
        """Raise `StoreUnavailable` unless the database answers a query (one attempt, no retries) and the
        schema is in place (created now if it is still to be)."""
        self._check_open()
        with self._translated("ping"):
            async with self._driver.session(database=self._database) as session:
                result = await session.run(q.PING)
                await result.consume()
        await self._ensure_schema()

    async def _ensure_schema(self) -> None:
        if self._pending_dimension is None:
            return
        async with self._schema_lock:
            if self._pending_dimension is None:
                return
            with self._translated("creating the schema"):
                self._index_dimensions = await ensure_schema(self._driver, self._database, self._pending_dimension)
                await profile.fill_profiles(self._driver, self._database)
            self._pending_dimension = None

    async def _ready(self) -> None:
        self._check_open()
        await self._ensure_schema()

    async def close(self) -> None:
        """Close the driver (idempotent); later calls raise `StoreUnavailable`."""
        if self._closed:
            return
        self._closed = True
        await self._driver.close()

    # -- knowledge bases ---------------------------------------------------------------------------------------

    async def create_knowledge_base(self, kb: KnowledgeBase) -> bool:
        fields = {
            "kb_prefix": kb.kb_prefix,
            "description": kb.description,
            "keywords": list(kb.keywords),
            "language": kb.language,
            "default_agent": kb.default_agent,
            "is_default": kb.is_default,
            "sources": list(kb.sources),
            "handler": kb.handler,
        }
        await self._ready()
        with self._translated("create_knowledge_base"):
            try:
                async with self._session() as session:
                    await session.execute_write(lambda tx: writes.run(tx, q.CREATE_KNOWLEDGE_BASE, kb=fields))
            except ConstraintError as exc:
                if exc.code != _UNIQUENESS_VIOLATED:
                    raise
                return False  # the prefix is taken: the uniqueness constraint on the KB's uid said so
        return True

    async def list_knowledge_bases(self) -> list[KnowledgeBase]:
        records = await self._read("list_knowledge_bases", q.LIST_KNOWLEDGE_BASES)
        return sorted((_knowledge_base(r) for r in records), key=lambda kb: kb.kb_prefix)

    # -- documents ---------------------------------------------------------------------------------------------

    async def get_document(self, kb: str, doc_id: str) -> DocumentRecord | None:
        records = await self._read("get_document", q.GET_DOCUMENT, uid=node_uid(kb, doc_id))
        return _document(records[0]) if records else None

    async def document_chunks(self, kb: str, doc_id: str) -> list[ChunkRecord]:
        records = await self._read("document_chunks", q.DOCUMENT_CHUNKS, uid=node_uid(kb, doc_id))
        return [_chunk_record(r) for r in records]

    async def list_documents(self, kb: str) -> list[DocumentRecord]:
        records = await self._read("list_documents", q.LIST_DOCUMENTS, **kb_scope(kb), source=None, skey=None)
        return [_document(r) for r in records]

    async def find_documents_by_source(self, kb: str, source: str) -> list[DocumentRecord]:
        records = await self._read(
            "find_documents_by_source", q.LIST_DOCUMENTS, **kb_scope(kb), source=source, skey=source_key(source)
        )
        return [_document(r) for r in records]

    async def existing_document_ids(self, kb: str, doc_ids: Sequence[str]) -> set[str]:
        return await self._existing_ids("existing_document_ids", q.EXISTING_DOCUMENT_IDS, kb, doc_ids)

    async def existing_entity_ids(self, kb: str, entity_ids: Sequence[str]) -> set[str]:
        return await self._existing_ids("existing_entity_ids", q.EXISTING_ENTITY_IDS, kb, entity_ids)

    async def _existing_ids(self, operation: str, statement: LiteralString, kb: str, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        uids = [node_uid(kb, i) for i in dict.fromkeys(ids)]
        return {r["id"] for r in await self._read_rows(operation, statement, uids=uids)}

    async def _upsert(self, operation: str, kb: str, documents: Sequence[DocumentWrite]) -> None:
        """Documents grouped into transactions of up to WRITE_BATCH_CHUNKS chunks: each group pays one commit
        and one merge (a hub entity's mentions are read once per group instead of once per document)."""
        params = [document_params(kb, d.graph, d.chunk_vectors, d.entity_vectors) for d in documents]
        for group in _groups_of_chunks(params, WRITE_BATCH_CHUNKS):
            await self._write(operation, partial(writes.write_documents, batch=group))

    async def delete_document(self, kb: str, doc_id: str) -> bool:
        return await self._write("delete_document", lambda tx: writes.delete_document(tx, kb, doc_id))

    @asynccontextmanager
    async def bulk_load(self, documents: int) -> AsyncIterator[BulkLoad]:
        """Suspend the vector indexes (`schema.drop_vector_indexes` says why) for a load of at least
        `bulk_load_min_documents` documents and a quarter as many as the chunk vectors stored: building an index
        costs time in proportion to all its vectors (every KB's), so a small load into a large index keeps it
        up to date write by write. Meanwhile vector searches scan exactly, in this process or another."""
        if not await self._worth_suspending(documents):
            yield NothingSuspended()
            return
        dimensions = dict(self._index_dimensions)
        with self._translated("suspending the vector indexes"):
            await drop_vector_indexes(self._driver, self._database, dimensions)
        _log.info("suspended Neo4j vector indexes %s for a bulk load of %d documents", ", ".join(dimensions), documents)
        try:
            yield _VectorIndexBuild(self._build_vector_indexes, dimensions)
        finally:
            await self._finish_vector_index_build(dimensions)

    async def _worth_suspending(self, documents: int) -> bool:
        if documents < self._bulk_load_min_documents:
            return False
        await self._ready()  # the vector indexes are known once the schema is in place
        if not self._index_dimensions:
            return False
        [stored] = await self._read("count_chunk_vectors", q.COUNT_CHUNK_VECTORS)
        return documents * 4 >= int(stored["vectors"])

    async def _build_vector_indexes(self, dimensions: Mapping[str, int]) -> None:
        """Create those of the indexes that do not exist yet (Neo4j populates them in the background)."""
        with self._translated("building the vector indexes"):
            await create_vector_indexes(self._driver, self._database, dimensions)

    async def _finish_vector_index_build(self, dimensions: Mapping[str, int]) -> None:
        """Build the indexes the load has not, and wait until all serve. Failing, the documents stay written and
        searches correct (exact): logged, not raised; `ensure_schema` builds them at the next open."""
        started = time.perf_counter()
        try:
            await self._build_vector_indexes(dimensions)
            with self._translated("waiting for the vector indexes"):
                await await_indexes(self._driver, self._database)
        except StoreUnavailable as error:
            _log.warning("the vector indexes suspended for a bulk load are not built yet: %s", error.message)
        else:
            _log.info("Neo4j vector indexes online %.1f s after the bulk load", time.perf_counter() - started)

    async def term_frequencies(self, kbs: Sequence[str], terms: Sequence[str]) -> dict[str, TermCounts]:
        rows = await self._read_rows("term_frequencies", q.TERM_FREQUENCIES, uids=profile.term_uids(kbs, terms))
        return profile.term_counts(kbs, rows)

    async def counts(self, kb: str) -> GraphCounts:
        found = (await self._read("counts", q.COUNTS, **kb_scope(kb)))[0]
        return GraphCounts(
            documents=int(found["documents"]),
            chunks=int(found["chunks"]),
            entities=int(found["entities"]),
            relations=int(found["relations"]),
            communities=int(found["communities"]),
        )

    async def overview(self, kb: str, entities: int, titles: int) -> KbOverview:
        found = (await self._read("overview", q.OVERVIEW, **kb_scope(kb), entities=entities, titles=titles))[0]
        return KbOverview(int(found["documents"]), tuple(found["entities"]), tuple(found["titles"]))

    # -- communities -------------------------------------------------------------------------------------------

    async def entity_graph(self, kb: str) -> EntityGraph:
        found = (await self._read("entity_graph", q.ENTITY_GRAPH, **kb_scope(kb)))[0]
        edges = sorted((str(a), str(b), float(w)) for a, b, w in found["edges"])
        return EntityGraph(tuple(sorted(found["entity_ids"])), tuple(edges))

    async def replace_communities(
        self, kb: str, communities: Sequence[CommunityRecord], vectors: Mapping[str, Vector]
    ) -> None:
        params = community_params(kb, communities, vectors)
        await community_refresh.replace_communities(
            lambda work: self._write("replace_communities", work), params, self._community_batches
        )

    async def list_communities(self, kb: str, level: int | None = None) -> list[CommunityRecord]:
        records = await self._read_rows("list_communities", q.LIST_COMMUNITIES, **kb_scope(kb), level=level)
        return sorted((_community(r) for r in records), key=lambda c: (c.level, -c.rank, c.community_id))

    async def communities_of(self, kb: str, entity_ids: Sequence[str]) -> list[CommunityRecord]:
        if not entity_ids:
            return []
        uids = [node_uid(kb, e) for e in dict.fromkeys(entity_ids)]
        records = await self._read_rows("communities_of", q.COMMUNITIES_OF, uids=uids)
        return sorted((_community(r) for r in records), key=lambda c: (c.level, -c.rank, c.community_id))

    async def search_communities(self, kb: str, embedding: Vector, level: int | None, limit: int) -> list[CommunityHit]:
        records = await self._vector_search(_COMMUNITIES, kb, embedding, limit, level)
        return [CommunityHit(_community(r), float(r["score"])) for r in records]

    # -- searches ----------------------------------------------------------------------------------------------

    async def search_chunks_fulltext(self, kb: str, query: str, limit: int) -> list[ChunkHit]:
        records = await self._fulltext_search("search_chunks_fulltext", q.SEARCH_CHUNKS_FULLTEXT, kb, query, limit)
        return [_chunk(r) for r in records]

    async def search_chunks_vector(self, kb: str, embedding: Vector, limit: int) -> list[ChunkHit]:
        return [_chunk(r) for r in await self._vector_search(_CHUNKS, kb, embedding, limit)]

    async def search_entities_fulltext(self, kb: str, query: str, limit: int) -> list[EntityHit]:
        records = await self._fulltext_search("search_entities_fulltext", q.SEARCH_ENTITIES_FULLTEXT, kb, query, limit)
        return [EntityHit(_entity(r), float(r["score"])) for r in records]

    async def search_entities_vector(self, kb: str, embedding: Vector, limit: int) -> list[EntityHit]:
        records = await self._vector_search(_ENTITIES, kb, embedding, limit)
        return [EntityHit(_entity(r), float(r["score"])) for r in records]

    async def _fulltext_search(
        self, operation: str, statement: LiteralString, kb: str, query: str, limit: int
    ) -> list[Row]:
        lucene, limit = lucene_query(kb, query), capped(limit)
        if lucene is None or limit == 0:
            return []
        # Lucene breaks score ties its own way: fetch a margin, then order by (score, id) here.
        records = await self._read_rows(operation, statement, kb=kb, query=lucene, fetch=limit * 2 + 10)
        return _best_first(records)[:limit]

    async def _vector_search(
        self, kind: _VectorKind, kb: str, embedding: Vector, limit: int, level: int | None = None
    ) -> list[Row]:
        """Auto-commit reads, a round trip each: the probe (how many vectors the KB has, of which dimension;
        skipped while a large set is remembered), then index passes, then the exact scan if they found too
        few. The probe only chooses the plan, so it need not share a snapshot with the search."""
        vector, limit = _unit(embedding), capped(limit)
        if vector is None or limit == 0:
            return []
        operation = f"search_{kind.name}_vector"
        vectors = await self._probe(operation, kind, kb, level)
        if vectors is None:
            return []
        self._check_query_dimension(kind, kb, vectors.dimension, len(vector))
        params = {**kb_scope(kb), "level": level, "vector": vector, "limit": limit}
        if vectors.large and self._index_dimensions.get(kind.index) == len(vector):
            found = await self._indexed_passes(operation, kind, limit, params)
            if found is not None:
                return found
        return _best_first(await self._read_rows(operation, kind.exact, **params))

    async def _indexed_passes(
        self, operation: str, kind: _VectorKind, limit: int, params: Mapping[str, Any]
    ) -> list[Row] | None:
        """The index's answer, or None when the passes found too few or the index is not serving (a bulk load
        suspended it, here or in another process): the exact scan answers then."""
        try:
            for times, at_least in _CANDIDATE_PASSES:
                k = min(max(limit * times, at_least), _MAX_CANDIDATES)
                found = await self._read_rows(operation, kind.indexed, k=k, **params)
                if len(found) >= limit:
                    return _best_first(found)
        except StoreUnavailable as error:
            if not vector_index_unavailable(error.__cause__):
                raise
        return None

    async def _probe(self, operation: str, kind: _VectorKind, kb: str, level: int | None) -> _VectorSet | None:
        """The KB's vectors of this kind (None: it has none). A large set is remembered for a while: searching
        it through the index is right whatever happened since (passes that find too few fall through to the
        exact scan), so only the probe's round trip is saved; an empty or small set could grow any moment."""
        key = (kind.name, kb, level)
        remembered = self._large_vector_sets.get(key)
        if remembered is not None and remembered[1] > time.monotonic():
            return remembered[0]
        [probe] = await self._read(operation, kind.probe, **kb_scope(kb), level=level, cap=self._exact_scan_max + 1)
        if probe["size"] == 0:
            return None
        found = _VectorSet(probe["size"] > self._exact_scan_max, probe["dimension"])
        if found.large:
            self._large_vector_sets[key] = (found, time.monotonic() + _LARGE_SET_MEMORY_S)
        return found

    @staticmethod
    def _check_query_dimension(kind: _VectorKind, kb: str, stored: int | None, asked: int) -> None:
        if stored is not None and stored != asked:
            raise InvalidRequest(
                f"KB {kb!r} was indexed with {stored}-dimensional {kind.name} embeddings but the query has "
                f"{asked}: re-index the KB with the current embedder"
            )

    # -- the graph around entities and chunks ------------------------------------------------------------------

    async def get_entities(self, kb: str, entity_ids: Sequence[str]) -> list[EntityRecord]:
        if not entity_ids:
            return []
        uids = [node_uid(kb, e) for e in dict.fromkeys(entity_ids)]
        records = await self._read_rows("get_entities", q.GET_ENTITIES, uids=uids)
        return [_entity(r) for r in _in_order(records, entity_ids)]

    async def chunk_embeddings(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        if not chunk_ids:
            return {}
        uids = [node_uid(kb, c) for c in dict.fromkeys(chunk_ids)]
        records = await self._read("chunk_embeddings", q.CHUNK_EMBEDDINGS, uids=uids)
        return {r["id"]: np.asarray(r["embedding"], dtype=np.float32) for r in records}

    async def get_chunks(self, kb: str, chunk_ids: Sequence[str]) -> list[ChunkHit]:
        if not chunk_ids:
            return []
        uids = [node_uid(kb, c) for c in dict.fromkeys(chunk_ids)]
        records = await self._read_rows("get_chunks", q.GET_CHUNKS, uids=uids)
        return [_chunk(r) for r in _in_order(records, chunk_ids)]

    async def relations_of(self, kb: str, entity_ids: Sequence[str], limit: int) -> list[RelationRecord]:
        limit = capped(limit)
        if not entity_ids or limit == 0:
            return []
        uids = [node_uid(kb, e) for e in dict.fromkeys(entity_ids)]
        records = await self._read_rows("relations_of", q.RELATIONS_OF, uids=uids, limit=limit)
        return [
            RelationRecord(r["source_id"], r["target_id"], r["description"], float(r["weight"]), tuple(r["chunk_ids"]))
            for r in records
        ]

    async def chunks_mentioning(self, kb: str, entity_ids: Sequence[str], limit: int) -> list[ChunkHit]:
        limit = capped(limit)
        if not entity_ids or limit == 0:
            return []
        uids = [node_uid(kb, e) for e in dict.fromkeys(entity_ids)]
        return [
            _chunk(r) for r in await self._read_rows("chunks_mentioning", q.CHUNKS_MENTIONING, uids=uids, limit=limit)
        ]

    async def entities_in_chunks(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, list[str]]:
        if not chunk_ids:
            return {}
        uids = [node_uid(kb, c) for c in dict.fromkeys(chunk_ids)]
        records = await self._read_rows("entities_in_chunks", q.ENTITIES_IN_CHUNKS, uids=uids)
        found = {r["chunk_id"]: sorted(r["entity_ids"]) for r in records}
        return {c: found[c] for c in dict.fromkeys(chunk_ids) if c in found}

    async def chunks_of_entities(
        self, kb: str, entity_ids: Sequence[str], per_entity_limit: int
    ) -> dict[str, list[str]]:
        per_entity_limit = capped(per_entity_limit)
        if not entity_ids or per_entity_limit == 0:
            return {}
        uids = [node_uid(kb, e) for e in dict.fromkeys(entity_ids)]
        records = await self._read_rows(
            "chunks_of_entities", q.CHUNKS_OF_ENTITIES, uids=uids, per_entity=per_entity_limit
        )
        found = {r["entity_id"]: list(r["chunk_ids"]) for r in records if r["chunk_ids"]}
        return {e: found[e] for e in dict.fromkeys(entity_ids) if e in found}

    # -- test support ------------------------------------------------------------------------------------------

    async def delete_everything(self) -> None:
        """Remove every node this store writes, in every KB (for tests that own the database)."""
        await self._write("delete_everything", lambda tx: writes.run(tx, q.DELETE_ALL_GRAPH_NODES))

    # -- plumbing ----------------------------------------------------------------------------------------------

    async def _read(self, operation: str, statement: LiteralString, **params: Any) -> list[Record]:
        """One read query as an auto-commit query: one round trip (RUN and PULL), where a managed
        transaction (`execute_query`) costs two (BEGIN, RUN and PULL, then COMMIT) and more driver work,
        which the agents' many small reads feel. Auto-commit queries are not retried
        by the driver, so failures it would retry (`is_retryable()`) are retried here, for as long as
        the driver retries a transaction (`max_retry_time_s`), waiting 1 s, then doubling, with jitter."""
        await self._ready()
        attempts = AsyncRetrying(
            stop=stop_after_delay(self._max_retry_time_s),
            wait=wait_exponential_jitter(initial=1.0, exp_base=2.0, jitter=0.2),
            retry=retry_if_exception(_retryable),
            reraise=True,
        )
        sent = quiet(params)
        with self._translated(operation):
            async for attempt in attempts:
                with attempt:
                    async with self._session(READ_ACCESS) as session:
                        result = await session.run(Query(statement), sent)
                        return [record async for record in result]
        raise AssertionError("unreachable: tenacity either returns an attempt's result or raises")

    async def _read_rows(self, operation: str, statement: LiteralString, **params: Any) -> list[Row]:
        """A read whose rows come as one record's `rows` (queries.py says why)."""
        [record] = await self._read(operation, statement, **params)
        rows: list[Row] = record["rows"]
        return rows

    async def _write(self, operation: str, work: Callable[[AsyncManagedTransaction], Awaitable[T]]) -> T:
        await self._ready()
        with self._translated(operation):
            async with self._session() as session:
                return await session.execute_write(work)

    def _session(self, access_mode: str = WRITE_ACCESS) -> AsyncSession:
        # One bookmark manager for every session: a read sees the writes made before it, even on a cluster.
        return self._driver.session(
            database=self._database,
            bookmark_manager=self._driver.execute_query_bookmark_manager,
            default_access_mode=access_mode,
        )

    @contextmanager
    def _translated(self, operation: str) -> Iterator[None]:
        try:
            yield
        except DRIVER_ERRORS as exc:
            raise store_unavailable(exc, operation, self._server, self._secrets) from exc

    def _check_open(self) -> None:
        if self._closed:
            raise KnowledgeStoreUnavailable(f"Neo4j graph store at {self._server} is closed")


def _retryable(error: BaseException) -> bool:
    """What the driver's transaction functions retry: transient server errors and lost connections."""
    return isinstance(error, (Neo4jError, DriverError)) and error.is_retryable()
