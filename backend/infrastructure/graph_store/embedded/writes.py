"""The write side, as functions that run inside one write transaction on the writer connection.

Merged entity and relation rows are recomputed (`merge.py`) from the mentions that remain, only for the
entities and relations a write touched; rows left without a mention are deleted.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Sequence

from backend.domain.errors import InvalidRequest
from backend.domain.graph import EntityMention, RelationMention
from backend.domain.knowledge_base import KnowledgeBase
from backend.graphrag_agent.text import fulltext_terms
from backend.infrastructure.graph_store.embedded import profile
from backend.infrastructure.graph_store.embedded.rows import (
    CommunityRow,
    CommunityRows,
    DocumentRows,
    one_dimension,
    to_json,
)
from backend.infrastructure.graph_store.embedded.schema import bump_revisions, kb_token
from backend.infrastructure.graph_store.merge import MergedEntity, merge_entity, merge_relation
from backend.infrastructure.graph_store.validation import utc_timestamp

DOCUMENT_KINDS = ("chunks", "entities")
COMMUNITY_KINDS = ("communities",)

_IDS = "SELECT value FROM json_each(?)"
_PAIRS = "SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?)"


def _json_ids(ids: Iterable[str]) -> str:
    return json.dumps(sorted(ids))


# -- documents ------------------------------------------------------------------------------------


def write_document(raw: sqlite3.Connection, rows: DocumentRows) -> None:
    """Insert a document, or replace the stored one with the same id, and re-merge what it touches."""
    kb = rows.kb
    stored = raw.execute("SELECT created_at FROM documents WHERE kb = ? AND doc_id = ?", (kb, rows.doc_id)).fetchone()
    entity_ids, relation_keys = rows.entity_ids, rows.relation_keys
    if stored is not None:
        old_entities, old_relations = _remove_document_rows(raw, kb, rows.doc_id)
        entity_ids |= old_entities
        relation_keys |= old_relations
    _check_dimension(raw, kb, "chunks", rows.chunk_dimension)
    _check_dimension(raw, kb, "entities", rows.entity_dimension)
    created_at = rows.created_at or (str(stored[0]) if stored is not None else utc_timestamp())
    _insert_document(raw, rows, created_at)
    _merge_entities(raw, kb, entity_ids, rows.entity_vectors)
    _merge_relations(raw, kb, relation_keys)
    bump_revisions(raw, kb, DOCUMENT_KINDS)


def write_documents(raw: sqlite3.Connection, batch: Sequence[DocumentRows]) -> None:
    """`write_document` for each, in one transaction (the caller's): one commit for the batch."""
    for rows in batch:
        write_document(raw, rows)


def delete_document(raw: sqlite3.Connection, kb: str, doc_id: str) -> bool:
    """Remove a document and re-merge what it touched; False when it is not stored."""
    if raw.execute("SELECT 1 FROM documents WHERE kb = ? AND doc_id = ?", (kb, doc_id)).fetchone() is None:
        return False
    entity_ids, relation_keys = _remove_document_rows(raw, kb, doc_id)
    raw.execute("DELETE FROM documents WHERE kb = ? AND doc_id = ?", (kb, doc_id))
    _merge_entities(raw, kb, entity_ids, {})
    _merge_relations(raw, kb, relation_keys)
    bump_revisions(raw, kb, DOCUMENT_KINDS)
    return True


def _remove_document_rows(raw: sqlite3.Connection, kb: str, doc_id: str) -> tuple[set[str], set[tuple[str, str]]]:
    """Delete a document's chunks and mentions; return the entities and relations they supported."""
    params = (kb, doc_id)
    entities = {r[0] for r in raw.execute("SELECT entity_id FROM entity_mentions WHERE kb = ? AND doc_id = ?", params)}
    relations = {
        (r[0], r[1])
        for r in raw.execute("SELECT source_id, target_id FROM relation_mentions WHERE kb = ? AND doc_id = ?", params)
    }
    raw.execute("DELETE FROM entity_mentions WHERE kb = ? AND doc_id = ?", params)
    raw.execute("DELETE FROM relation_mentions WHERE kb = ? AND doc_id = ?", params)
    raw.execute("DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE kb = ? AND doc_id = ?)", params)
    raw.execute("DELETE FROM chunks WHERE kb = ? AND doc_id = ?", params)
    profile.remove_document(raw, kb, doc_id)
    return entities, relations


def _check_dimension(raw: sqlite3.Connection, kb: str, table: str, dimension: int | None) -> None:
    """A KB holds one embedding dimension per table: vector search multiplies one matrix."""
    if dimension is None:
        return
    # `table` is one of this module's constants, never caller input.
    found = raw.execute(
        f"SELECT length(embedding) / 4 FROM {table} WHERE kb = ? AND embedding IS NOT NULL LIMIT 1", (kb,)
    ).fetchone()
    if found is not None and int(found[0]) != dimension:
        raise InvalidRequest(
            f"KB {kb!r} holds {found[0]}-dimensional {table} embeddings, this write has {dimension}: "
            "re-index the whole KB after changing the embedding model"
        )


def _insert_document(raw: sqlite3.Connection, rows: DocumentRows, created_at: str) -> None:
    doc = rows.document
    raw.execute(
        """INSERT INTO documents (kb, doc_id, title, metadata, source, chunk_count, created_at)
        VALUES (?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (kb, doc_id) DO UPDATE SET title = excluded.title, metadata = excluded.metadata,
            source = excluded.source, chunk_count = excluded.chunk_count, created_at = excluded.created_at""",
        (rows.kb, rows.doc_id, doc.title, to_json(doc.metadata), doc.source, len(rows.chunks), created_at),
    )
    raw.executemany(
        """INSERT INTO chunks (kb, chunk_id, doc_id, ordinal, text, start_char, end_char, embedding)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
        rows.chunks,
    )
    raw.executemany(
        "INSERT INTO chunks_fts (rowid, terms, kb_token) SELECT id, ?, ? FROM chunks WHERE kb = ? AND chunk_id = ?",
        rows.chunk_terms,
    )
    profile.add_document(raw, rows.kb, rows.doc_id, rows.profile)
    raw.executemany(
        """INSERT INTO entity_mentions (kb, entity_id, chunk_id, position, doc_id, name, type, description)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
        rows.entity_mentions,
    )
    raw.executemany(
        """INSERT INTO relation_mentions (kb, source_id, target_id, chunk_id, position, doc_id, description, weight)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
        rows.relation_mentions,
    )


# -- merged entities and relations ------------------------------------------------------------------


def _merge_entities(raw: sqlite3.Connection, kb: str, entity_ids: set[str], vectors: dict[str, bytes]) -> None:
    if not entity_ids:
        return
    ids_json = _json_ids(entity_ids)
    stored = {
        r[0]: (int(r[1]), MergedEntity(r[2], r[3], r[4], int(r[5])))
        for r in raw.execute(
            f"""SELECT entity_id, id, name, type, description, mention_count FROM entities
            WHERE kb = ? AND entity_id IN ({_IDS})""",
            (kb, ids_json),
        )
    }
    mentions: dict[str, list[EntityMention]] = defaultdict(list)
    for r in raw.execute(
        f"""SELECT entity_id, name, type, description, chunk_id FROM entity_mentions
        WHERE kb = ? AND entity_id IN ({_IDS})""",
        (kb, ids_json),
    ):
        mentions[r[0]].append(EntityMention(r[0], r[1], r[2], r[3], r[4]))
    merged = {eid: merge_entity(found) for eid, found in mentions.items()}
    _delete_entities(raw, kb, [eid for eid in stored if eid not in merged])
    _insert_entities(raw, kb, {eid: m for eid, m in merged.items() if eid not in stored}, vectors)
    _update_entities(raw, kb, {eid: m for eid, m in merged.items() if eid in stored}, stored, vectors)


def _delete_entities(raw: sqlite3.Connection, kb: str, gone: list[str]) -> None:
    """Entities without mentions go, with their name index rows and community memberships."""
    if not gone:
        return
    params = (kb, _json_ids(gone))
    raw.execute(
        f"DELETE FROM entities_fts WHERE rowid IN (SELECT id FROM entities WHERE kb = ? AND entity_id IN ({_IDS}))",
        params,
    )
    raw.execute(f"DELETE FROM entities WHERE kb = ? AND entity_id IN ({_IDS})", params)
    raw.execute(f"DELETE FROM community_members WHERE kb = ? AND entity_id IN ({_IDS})", params)


def _insert_entities(raw: sqlite3.Connection, kb: str, new: dict[str, MergedEntity], vectors: dict[str, bytes]) -> None:
    raw.executemany(
        """INSERT INTO entities (kb, entity_id, name, type, description, mention_count, embedding)
        VALUES (?, ?, ?, ?, ?, ?, ?)""",
        [(kb, eid, m.name, m.type, m.description, m.mention_count, vectors.get(eid)) for eid, m in new.items()],
    )
    _index_entity_names(raw, kb, new)


def _update_entities(
    raw: sqlite3.Connection,
    kb: str,
    merged: dict[str, MergedEntity],
    stored: dict[str, tuple[int, MergedEntity]],
    vectors: dict[str, bytes],
) -> None:
    # Existing entities keep their embedding; one that has none takes the vector offered now.
    changed = {eid: m for eid, m in merged.items() if m != stored[eid][1] or eid in vectors}
    raw.executemany(
        """UPDATE entities SET name = ?, type = ?, description = ?, mention_count = ?,
            embedding = coalesce(embedding, ?)
        WHERE kb = ? AND entity_id = ?""",
        [(m.name, m.type, m.description, m.mention_count, vectors.get(eid), kb, eid) for eid, m in changed.items()],
    )
    renamed = {eid: m for eid, m in changed.items() if m.name != stored[eid][1].name}
    raw.executemany("DELETE FROM entities_fts WHERE rowid = ?", [(stored[eid][0],) for eid in renamed])
    _index_entity_names(raw, kb, renamed)


def _index_entity_names(raw: sqlite3.Connection, kb: str, entities: dict[str, MergedEntity]) -> None:
    raw.executemany(
        """INSERT INTO entities_fts (rowid, terms, kb_token)
        SELECT id, ?, ? FROM entities WHERE kb = ? AND entity_id = ?""",
        [(" ".join(fulltext_terms(m.name)), kb_token(kb), kb, eid) for eid, m in entities.items()],
    )


def _merge_relations(raw: sqlite3.Connection, kb: str, keys: set[tuple[str, str]]) -> None:
    if not keys:
        return
    mentions: dict[tuple[str, str], list[RelationMention]] = defaultdict(list)
    for r in raw.execute(
        f"""SELECT source_id, target_id, description, weight, chunk_id FROM relation_mentions
        WHERE kb = ? AND (source_id, target_id) IN ({_PAIRS})""",
        (kb, json.dumps(sorted(keys))),
    ):
        mentions[(r[0], r[1])].append(RelationMention(r[0], r[1], r[2], float(r[3]), r[4]))
    raw.executemany(
        "DELETE FROM relations WHERE kb = ? AND source_id = ? AND target_id = ?",
        [(kb, s, t) for s, t in keys if (s, t) not in mentions],
    )
    upserts = []
    for (source, target), found in mentions.items():
        merged = merge_relation(found)
        upserts.append((kb, source, target, merged.description, merged.weight, json.dumps(merged.chunk_ids)))
    raw.executemany(
        """INSERT INTO relations (kb, source_id, target_id, description, weight, chunk_ids) VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT (kb, source_id, target_id) DO UPDATE SET description = excluded.description,
            weight = excluded.weight, chunk_ids = excluded.chunk_ids""",
        upserts,
    )


# -- communities and knowledge bases ------------------------------------------------------------------


def replace_communities(raw: sqlite3.Connection, kb: str, rows: CommunityRows) -> None:
    communities = _with_kept_embeddings(raw, kb, rows.communities)
    one_dimension([row[7] for row in communities if row[7] is not None], "community")
    raw.execute("DELETE FROM community_members WHERE kb = ?", (kb,))
    raw.execute("DELETE FROM communities WHERE kb = ?", (kb,))
    raw.executemany(
        """INSERT INTO communities (kb, community_id, level, title, summary, rank, parent_id, embedding)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
        communities,
    )
    # Members that are no longer entities (deleted since the communities were computed) are skipped.
    raw.executemany(
        f"""INSERT INTO community_members (kb, community_id, entity_id)
        SELECT kb, ?, entity_id FROM entities WHERE kb = ? AND entity_id IN ({_IDS})""",
        [(community_id, kb, members) for community_id, members in rows.members],
    )
    bump_revisions(raw, kb, COMMUNITY_KINDS)


def _with_kept_embeddings(raw: sqlite3.Connection, kb: str, communities: list[CommunityRow]) -> list[CommunityRow]:
    """A community offered without a vector keeps the embedding stored under its id (its summary is reused)."""
    missing = [row[1] for row in communities if row[7] is None]
    if not missing:
        return communities
    stored: dict[str, bytes] = dict(
        raw.execute(
            f"""SELECT community_id, embedding FROM communities
            WHERE kb = ? AND embedding IS NOT NULL AND community_id IN ({_IDS})""",
            (kb, _json_ids(missing)),
        ).fetchall()
    )
    return [row if row[7] is not None else (*row[:7], stored.get(row[1])) for row in communities]


def create_knowledge_base(raw: sqlite3.Connection, kb: KnowledgeBase) -> bool:
    """Insert the KB unless its prefix is taken (the primary key decides): True if this inserted it."""
    cursor = raw.execute(
        """INSERT INTO knowledge_bases
            (kb_prefix, description, keywords, language, default_agent, is_default, sources, handler)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (kb_prefix) DO NOTHING""",
        (
            kb.kb_prefix,
            kb.description,
            to_json(list(kb.keywords)),
            kb.language,
            kb.default_agent,
            int(kb.is_default),
            to_json(list(kb.sources)),
            kb.handler,
        ),
    )
    return cursor.rowcount == 1
