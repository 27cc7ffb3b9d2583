"""The read side, as functions that run on a reader connection (in a worker thread).

Each read the agents call in loops is one statement whatever the number of ids: id lists are bound as
one JSON parameter (`json_each`), never formatted into the SQL.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from backend.application.ports.graph_store import GraphCounts
from backend.domain.graph import (
    ChunkRecord,
    CommunityRecord,
    DocumentRecord,
    EntityGraph,
    EntityRecord,
    RelationRecord,
)
from backend.domain.knowledge_base import KbOverview, KnowledgeBase
from backend.graphrag_agent.ports import ChunkHit, CommunityHit, EntityHit, Vector
from backend.graphrag_agent.text import fulltext_query_terms
from backend.infrastructure.graph_store.embedded.community_cache import CommunityCache
from backend.infrastructure.graph_store.embedded.schema import kb_token
from backend.infrastructure.graph_store.embedded.vectors import VectorCache, top_rows

Row = Sequence[Any]

_MAX_QUERY_TERMS = 64  # bounds the cost of one fulltext search
_IDS = "SELECT value FROM json_each(?2)"

_CHUNK = """SELECT c.chunk_id, c.doc_id, d.title, c.text, c.ordinal{score}
FROM {source} JOIN documents AS d ON d.kb = c.kb AND d.doc_id = c.doc_id"""
_ENTITY = "SELECT e.entity_id, e.name, e.type, e.description, e.mention_count{score} FROM {source}"
_DOCUMENT = "SELECT doc_id, title, metadata, source, chunk_count, created_at FROM documents"
_DOCUMENT_CHUNKS = """SELECT chunk_id, doc_id, ordinal, text, start_char, end_char FROM chunks
WHERE kb = ? AND doc_id = ? ORDER BY ordinal"""

# The best `limit` FTS hits are found first and only they are joined to their rows. The KB token column
# has weight 0. Equal scores go by row id (insertion order): ordering thousands of tied hits by record id
# would cost a row lookup each.
_HITS = """WITH hits AS (SELECT rowid AS id, bm25({fts}, 1.0, 0.0) AS score FROM {fts}
    WHERE {fts} MATCH ?1 ORDER BY score, rowid LIMIT ?3) """
_CHUNKS_FULLTEXT = (
    _HITS.format(fts="chunks_fts")
    + _CHUNK.format(score=", -hits.score", source="hits CROSS JOIN chunks AS c ON c.id = hits.id")
    + " WHERE c.kb = ?2 ORDER BY hits.score, hits.id"
)
_ENTITIES_FULLTEXT = (
    _HITS.format(fts="entities_fts")
    + _ENTITY.format(score=", -hits.score", source="hits CROSS JOIN entities AS e ON e.id = hits.id")
    + " WHERE e.kb = ?2 ORDER BY hits.score, hits.id"
)
# Unary + keeps the planner on the row id lookups instead of scanning the KB's index.
_CHUNKS_BY_ROW = _CHUNK.format(score=", c.id", source="chunks AS c") + f" WHERE c.id IN ({_IDS}) AND +c.kb = ?1"
_CHUNKS_BY_ID = (
    _CHUNK.format(score=", c.chunk_id", source="chunks AS c") + f" WHERE c.kb = ?1 AND c.chunk_id IN ({_IDS})"
)
_CHUNK_EMBEDDINGS = f"SELECT chunk_id, embedding FROM chunks WHERE kb = ?1 AND chunk_id IN ({_IDS})"
_ENTITIES_BY_ROW = _ENTITY.format(score=", e.id", source="entities AS e") + f" WHERE e.id IN ({_IDS}) AND +e.kb = ?1"
_ENTITIES_BY_ID = (
    _ENTITY.format(score=", e.entity_id", source="entities AS e") + f" WHERE e.kb = ?1 AND e.entity_id IN ({_IDS})"
)
_RELATIONS_OF = f"""SELECT source_id, target_id, description, weight, chunk_ids FROM relations
WHERE kb = ?1 AND source_id IN ({_IDS})
UNION
SELECT source_id, target_id, description, weight, chunk_ids FROM relations INDEXED BY relations_by_target
WHERE kb = ?1 AND target_id IN ({_IDS})
ORDER BY 4 DESC, 1, 2 LIMIT ?3"""
_CHUNKS_MENTIONING = (
    _CHUNK.format(
        score=", m.score",
        # CROSS JOIN: look mentions up by entity (the primary key), not by scanning the KB's chunk index.
        source="""(SELECT m.chunk_id, count(DISTINCT m.entity_id) AS score
        FROM json_each(?2) AS wanted CROSS JOIN entity_mentions AS m ON m.kb = ?1 AND m.entity_id = wanted.value
        GROUP BY m.chunk_id) AS m
    JOIN chunks AS c ON c.kb = ?1 AND c.chunk_id = m.chunk_id""",
    )
    + " ORDER BY m.score DESC, d.title, c.ordinal, c.chunk_id LIMIT ?3"
)
_ENTITIES_IN_CHUNKS = f"""SELECT DISTINCT chunk_id, entity_id FROM entity_mentions
WHERE kb = ?1 AND chunk_id IN ({_IDS}) ORDER BY chunk_id, entity_id"""
# The entity's own document first: titled with its name, perhaps after an article or before a "(film)".
_CHUNKS_OF_ENTITIES = f"""SELECT entity_id, chunk_id FROM (
    SELECT m.entity_id, m.chunk_id,
        row_number() OVER (PARTITION BY m.entity_id ORDER BY
            lower(d.title) IN (lower(e.name), 'the ' || lower(e.name), 'a ' || lower(e.name), 'an ' || lower(e.name))
                OR substr(lower(d.title), 1, length(e.name) + 2) = lower(e.name) || ' (' DESC,
            d.title, c.ordinal, c.chunk_id) AS position
    FROM (SELECT DISTINCT entity_id, chunk_id FROM entity_mentions WHERE kb = ?1 AND entity_id IN ({_IDS})) AS m
    JOIN entities AS e ON e.kb = ?1 AND e.entity_id = m.entity_id
    JOIN chunks AS c ON c.kb = ?1 AND c.chunk_id = m.chunk_id
    JOIN documents AS d ON d.kb = ?1 AND d.doc_id = c.doc_id)
WHERE position <= ?3 ORDER BY entity_id, position"""
_COUNTS = """SELECT (SELECT count(*) FROM documents WHERE kb = ?1), (SELECT count(*) FROM chunks WHERE kb = ?1),
    (SELECT count(*) FROM entities WHERE kb = ?1), (SELECT count(*) FROM relations WHERE kb = ?1),
    (SELECT count(*) FROM communities WHERE kb = ?1)"""
_MOST_MENTIONED = "SELECT name FROM entities WHERE kb = ?1 ORDER BY mention_count DESC, name, entity_id LIMIT ?2"
_LONGEST_TITLES = """SELECT title FROM documents WHERE kb = ?1 AND title <> ''
ORDER BY chunk_count DESC, title, doc_id LIMIT ?2"""


def _ids(values: Sequence[Any]) -> str:
    return json.dumps(list(values))


def _in_order(rows: Sequence[Row], wanted: Sequence[str]) -> list[Row]:
    """Rows whose last column is their id, in the order of `wanted` (each id once)."""
    by_id = {row[-1]: row for row in rows}
    return [by_id[key] for key in dict.fromkeys(wanted) if key in by_id]


def fulltext_match_expression(query: str) -> str | None:
    """An FTS5 query that ORs the query's content terms, each quoted as an FTS5 string.

    Quoting makes every operator (`OR`, `NEAR(`, `*`, `:`, `^`, quotes) plain text; the result is
    bound as a parameter. None when the query has no searchable term.
    """
    terms = fulltext_query_terms(query)[:_MAX_QUERY_TERMS]
    if not terms:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


# -- records from rows ----------------------------------------------------------------------------------


def _chunk(row: Row, score: float = 0.0) -> ChunkHit:
    return ChunkHit(row[0], row[1], row[2], row[3], int(row[4]), score)


def _entity(row: Row) -> EntityRecord:
    return EntityRecord(row[0], row[1], row[2], row[3], int(row[4]))


def _relation(row: Row) -> RelationRecord:
    return RelationRecord(row[0], row[1], row[2], float(row[3]), tuple(json.loads(row[4])))


def _document(row: Row) -> DocumentRecord:
    created_at = datetime.fromisoformat(row[5])
    return DocumentRecord(row[0], row[1], json.loads(row[2]), row[3], int(row[4]), created_at)


def _knowledge_base(row: Row) -> KnowledgeBase:
    return KnowledgeBase(
        kb_prefix=row[0],
        description=row[1],
        keywords=tuple(json.loads(row[2])),
        language=row[3],
        default_agent=row[4],
        is_default=bool(row[5]),
        sources=tuple(json.loads(row[6])),
        handler=row[7],
    )


# -- knowledge bases and documents ------------------------------------------------------------------------


def list_knowledge_bases(raw: sqlite3.Connection) -> list[KnowledgeBase]:
    rows = raw.execute(
        """SELECT kb_prefix, description, keywords, language, default_agent, is_default, sources, handler
        FROM knowledge_bases ORDER BY kb_prefix"""
    ).fetchall()
    return [_knowledge_base(row) for row in rows]


def get_document(raw: sqlite3.Connection, kb: str, doc_id: str) -> DocumentRecord | None:
    row = raw.execute(f"{_DOCUMENT} WHERE kb = ? AND doc_id = ?", (kb, doc_id)).fetchone()
    return _document(row) if row is not None else None


def document_chunks(raw: sqlite3.Connection, kb: str, doc_id: str) -> list[ChunkRecord]:
    rows = raw.execute(_DOCUMENT_CHUNKS, (kb, doc_id)).fetchall()
    return [ChunkRecord(row[0], row[1], int(row[2]), row[3], int(row[4]), int(row[5])) for row in rows]


def list_documents(raw: sqlite3.Connection, kb: str, source: str | None = None) -> list[DocumentRecord]:
    rows = raw.execute(
        f"{_DOCUMENT} WHERE kb = ?1 AND (?2 IS NULL OR source = ?2) ORDER BY title, doc_id", (kb, source)
    ).fetchall()
    return [_document(row) for row in rows]


def existing_document_ids(raw: sqlite3.Connection, kb: str, doc_ids: Sequence[str]) -> set[str]:
    rows = raw.execute(f"SELECT doc_id FROM documents WHERE kb = ?1 AND doc_id IN ({_IDS})", (kb, _ids(doc_ids)))
    return {row[0] for row in rows}


def existing_entity_ids(raw: sqlite3.Connection, kb: str, entity_ids: Sequence[str]) -> set[str]:
    rows = raw.execute(
        f"SELECT entity_id FROM entities WHERE kb = ?1 AND entity_id IN ({_IDS})", (kb, _ids(entity_ids))
    )
    return {row[0] for row in rows}


def counts(raw: sqlite3.Connection, kb: str) -> GraphCounts:
    found = raw.execute(_COUNTS, (kb,)).fetchone()
    return GraphCounts(*(int(value) for value in found))


def overview(raw: sqlite3.Connection, kb: str, entities: int, titles: int) -> KbOverview:
    """Call in a read snapshot: the three reads must come from the same state."""
    documents = raw.execute("SELECT count(*) FROM documents WHERE kb = ?", (kb,)).fetchone()[0]
    names = tuple(row[0] for row in raw.execute(_MOST_MENTIONED, (kb, entities)))
    longest = tuple(row[0] for row in raw.execute(_LONGEST_TITLES, (kb, titles)))
    return KbOverview(int(documents), names, longest)


def entity_graph(raw: sqlite3.Connection, kb: str) -> EntityGraph:
    """Call in a read snapshot: entities and relations must come from the same state."""
    entity_ids = tuple(
        r[0] for r in raw.execute("SELECT entity_id FROM entities WHERE kb = ? ORDER BY entity_id", (kb,))
    )
    edges = tuple(
        (r[0], r[1], float(r[2]))
        for r in raw.execute(
            "SELECT source_id, target_id, weight FROM relations WHERE kb = ? ORDER BY source_id, target_id", (kb,)
        )
    )
    return EntityGraph(entity_ids, edges)


# -- searches ------------------------------------------------------------------------------------------------


def _in_kb(kb: str, expression: str) -> str:
    """The match expression limited to one KB's rows (the token is a hash, never caller text)."""
    return f'kb_token : "{kb_token(kb)}" AND terms : ({expression})'


def search_chunks_fulltext(raw: sqlite3.Connection, kb: str, expression: str, limit: int) -> list[ChunkHit]:
    rows = raw.execute(_CHUNKS_FULLTEXT, (_in_kb(kb, expression), kb, limit)).fetchall()
    return [_chunk(row, float(row[5])) for row in rows]


def search_entities_fulltext(raw: sqlite3.Connection, kb: str, expression: str, limit: int) -> list[EntityHit]:
    rows = raw.execute(_ENTITIES_FULLTEXT, (_in_kb(kb, expression), kb, limit)).fetchall()
    return [EntityHit(_entity(row), float(row[5])) for row in rows]


def search_chunks_vector(
    raw: sqlite3.Connection, cache: VectorCache, kb: str, query: Vector, limit: int
) -> list[ChunkHit]:
    """Call in a read snapshot: the cached matrix and the rows read must match."""
    return [_chunk(row, score) for row, score in _nearest(raw, cache, kb, "chunks", _CHUNKS_BY_ROW, query, limit)]


def search_entities_vector(
    raw: sqlite3.Connection, cache: VectorCache, kb: str, query: Vector, limit: int
) -> list[EntityHit]:
    """Call in a read snapshot: the cached matrix and the rows read must match."""
    nearest = _nearest(raw, cache, kb, "entities", _ENTITIES_BY_ROW, query, limit)
    return [EntityHit(_entity(row), score) for row, score in nearest]


def _nearest(
    raw: sqlite3.Connection, cache: VectorCache, kb: str, kind: str, by_row: str, query: Vector, limit: int
) -> list[tuple[Row, float]]:
    """The `limit` rows of `kind` nearest `query`, best first, with their cosines: `by_row` reads them by row id
    (its sixth column)."""
    row_ids, scores = top_rows(cache.matrix(raw, kb, kind), query, limit)
    rows = {row[5]: row for row in raw.execute(by_row, (kb, _ids(row_ids.tolist()))).fetchall()}
    return [(rows[r], s) for r, s in zip(row_ids.tolist(), scores.tolist(), strict=True) if r in rows]


def search_communities(
    raw: sqlite3.Connection,
    vectors: VectorCache,
    communities: CommunityCache,
    kb: str,
    query: Vector,
    level: int | None,
    limit: int,
) -> list[CommunityHit]:
    """Call in a read snapshot: the cached matrix and the cached records must match."""
    row_ids, scores = top_rows(vectors.matrix(raw, kb, "communities"), query, limit, level)
    by_row = communities.communities(raw, kb).by_row
    return [CommunityHit(by_row[r], s) for r, s in zip(row_ids.tolist(), scores.tolist(), strict=True) if r in by_row]


# -- the graph around entities and chunks ------------------------------------------------------------------------


def get_entities(raw: sqlite3.Connection, kb: str, entity_ids: Sequence[str]) -> list[EntityRecord]:
    rows = raw.execute(_ENTITIES_BY_ID, (kb, _ids(entity_ids))).fetchall()
    return [_entity(row) for row in _in_order(rows, entity_ids)]


def chunk_embeddings(raw: sqlite3.Connection, kb: str, chunk_ids: Sequence[str]) -> dict[str, Vector]:
    rows = raw.execute(_CHUNK_EMBEDDINGS, (kb, _ids(chunk_ids))).fetchall()
    vectors = {row[0]: np.frombuffer(row[1], dtype="<f4").astype(np.float32) for row in rows}
    return {chunk_id: vector for chunk_id, vector in vectors.items() if vector.size and np.any(vector)}


def get_chunks(raw: sqlite3.Connection, kb: str, chunk_ids: Sequence[str]) -> list[ChunkHit]:
    rows = raw.execute(_CHUNKS_BY_ID, (kb, _ids(chunk_ids))).fetchall()
    return [_chunk(row) for row in _in_order(rows, chunk_ids)]


def relations_of(raw: sqlite3.Connection, kb: str, entity_ids: Sequence[str], limit: int) -> list[RelationRecord]:
    rows = raw.execute(_RELATIONS_OF, (kb, _ids(entity_ids), limit)).fetchall()
    return [_relation(row) for row in rows]


def chunks_mentioning(raw: sqlite3.Connection, kb: str, entity_ids: Sequence[str], limit: int) -> list[ChunkHit]:
    rows = raw.execute(_CHUNKS_MENTIONING, (kb, _ids(entity_ids), limit)).fetchall()
    return [_chunk(row, float(row[5])) for row in rows]


def entities_in_chunks(raw: sqlite3.Connection, kb: str, chunk_ids: Sequence[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for chunk_id, entity_id in raw.execute(_ENTITIES_IN_CHUNKS, (kb, _ids(chunk_ids))):
        found.setdefault(chunk_id, []).append(entity_id)
    return {chunk_id: found[chunk_id] for chunk_id in dict.fromkeys(chunk_ids) if chunk_id in found}


def chunks_of_entities(
    raw: sqlite3.Connection, kb: str, entity_ids: Sequence[str], per_entity_limit: int
) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for entity_id, chunk_id in raw.execute(_CHUNKS_OF_ENTITIES, (kb, _ids(entity_ids), per_entity_limit)):
        found.setdefault(entity_id, []).append(chunk_id)
    return {entity_id: found[entity_id] for entity_id in dict.fromkeys(entity_ids) if entity_id in found}


def communities_of(
    raw: sqlite3.Connection, communities: CommunityCache, kb: str, entity_ids: Sequence[str]
) -> list[CommunityRecord]:
    return communities.communities(raw, kb).containing(entity_ids)


def list_communities(
    raw: sqlite3.Connection, communities: CommunityCache, kb: str, level: int | None
) -> list[CommunityRecord]:
    return communities.communities(raw, kb).at_level(level)
