"""The embedded graph store's tables.

Every table carries `kb` and every id is unique per KB only, so one file holds any number of KBs
without one ever reaching another's rows. Chunks, entities and communities have an integer row id
as well: it keys their FTS5 rows and the rows of the in-memory vector matrices.

The FTS5 tables index a KB token beside the terms: a search ANDs it into the match, so the index itself
keeps to one KB instead of every match being looked up and filtered afterwards.

The routing profile (`graph_store/profile.py`): `routing_terms` counts the chunks of each KB that hold each
routing term, keyed by term first so that one statement reads any number of KBs for a message's terms;
`document_terms` keeps what each document added, for its delete. Version 2 added them: opening a version 1 file
computes the profile of every stored document (`profile.py`).
"""

from __future__ import annotations

import hashlib
import sqlite3

from backend.infrastructure.graph_store.embedded.profile import fill_profiles

SCHEMA_VERSION = 2

_TABLES = (
    "CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # Bumped by every write that changes a KB's vectors: cached matrices are valid for one revision.
    """CREATE TABLE IF NOT EXISTS revisions (
        kb TEXT NOT NULL, kind TEXT NOT NULL, revision INTEGER NOT NULL, PRIMARY KEY (kb, kind)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS knowledge_bases (
        kb_prefix TEXT PRIMARY KEY, description TEXT NOT NULL, keywords TEXT NOT NULL, language TEXT NOT NULL,
        default_agent TEXT NOT NULL, is_default INTEGER NOT NULL, sources TEXT NOT NULL, handler TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS documents (
        kb TEXT NOT NULL, doc_id TEXT NOT NULL, title TEXT NOT NULL, metadata TEXT NOT NULL, source TEXT NOT NULL,
        chunk_count INTEGER NOT NULL, created_at TEXT NOT NULL, PRIMARY KEY (kb, doc_id))""",
    "CREATE INDEX IF NOT EXISTS documents_by_title ON documents (kb, title, doc_id)",
    "CREATE INDEX IF NOT EXISTS documents_by_source ON documents (kb, source)",
    """CREATE TABLE IF NOT EXISTS chunks (
        id INTEGER PRIMARY KEY, kb TEXT NOT NULL, chunk_id TEXT NOT NULL, doc_id TEXT NOT NULL,
        ordinal INTEGER NOT NULL, text TEXT NOT NULL, start_char INTEGER NOT NULL, end_char INTEGER NOT NULL,
        embedding BLOB NOT NULL, UNIQUE (kb, chunk_id))""",
    "CREATE INDEX IF NOT EXISTS chunks_by_document ON chunks (kb, doc_id, ordinal)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(terms, kb_token, tokenize = 'unicode61')",
    """CREATE TABLE IF NOT EXISTS entities (
        id INTEGER PRIMARY KEY, kb TEXT NOT NULL, entity_id TEXT NOT NULL, name TEXT NOT NULL, type TEXT NOT NULL,
        description TEXT NOT NULL, mention_count INTEGER NOT NULL, embedding BLOB, UNIQUE (kb, entity_id))""",
    "CREATE VIRTUAL TABLE IF NOT EXISTS entities_fts USING fts5(terms, kb_token, tokenize = 'unicode61')",
    # Mentions are clustered by what they mention: merging re-reads all mentions of an entity or relation.
    # `position` is the mention's index in its DocumentGraph (a chunk may state the same thing twice).
    """CREATE TABLE IF NOT EXISTS entity_mentions (
        kb TEXT NOT NULL, entity_id TEXT NOT NULL, chunk_id TEXT NOT NULL, position INTEGER NOT NULL,
        doc_id TEXT NOT NULL, name TEXT NOT NULL, type TEXT NOT NULL, description TEXT NOT NULL,
        PRIMARY KEY (kb, entity_id, chunk_id, position)) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS entity_mentions_by_chunk ON entity_mentions (kb, chunk_id, entity_id)",
    "CREATE INDEX IF NOT EXISTS entity_mentions_by_document ON entity_mentions (kb, doc_id)",
    """CREATE TABLE IF NOT EXISTS relations (
        kb TEXT NOT NULL, source_id TEXT NOT NULL, target_id TEXT NOT NULL, description TEXT NOT NULL,
        weight REAL NOT NULL, chunk_ids TEXT NOT NULL, PRIMARY KEY (kb, source_id, target_id),
        CHECK (source_id < target_id)) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS relations_by_target ON relations (kb, target_id)",
    """CREATE TABLE IF NOT EXISTS relation_mentions (
        kb TEXT NOT NULL, source_id TEXT NOT NULL, target_id TEXT NOT NULL, chunk_id TEXT NOT NULL,
        position INTEGER NOT NULL, doc_id TEXT NOT NULL, description TEXT NOT NULL, weight REAL NOT NULL,
        PRIMARY KEY (kb, source_id, target_id, chunk_id, position), CHECK (source_id < target_id)) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS relation_mentions_by_document ON relation_mentions (kb, doc_id)",
    """CREATE TABLE IF NOT EXISTS communities (
        id INTEGER PRIMARY KEY, kb TEXT NOT NULL, community_id TEXT NOT NULL, level INTEGER NOT NULL,
        title TEXT NOT NULL, summary TEXT NOT NULL, rank REAL NOT NULL, parent_id TEXT, embedding BLOB,
        UNIQUE (kb, community_id))""",
    "CREATE INDEX IF NOT EXISTS communities_by_level ON communities (kb, level, rank DESC, community_id)",
    """CREATE TABLE IF NOT EXISTS community_members (
        kb TEXT NOT NULL, community_id TEXT NOT NULL, entity_id TEXT NOT NULL,
        PRIMARY KEY (kb, community_id, entity_id)) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS community_members_by_entity ON community_members (kb, entity_id)",
    """CREATE TABLE IF NOT EXISTS routing_terms (
        term TEXT NOT NULL, kb TEXT NOT NULL, chunks INTEGER NOT NULL, PRIMARY KEY (term, kb)) WITHOUT ROWID""",
    # `terms`: a JSON object, routing term → the document's chunks that hold it.
    """CREATE TABLE IF NOT EXISTS document_terms (
        kb TEXT NOT NULL, doc_id TEXT NOT NULL, terms TEXT NOT NULL, PRIMARY KEY (kb, doc_id)) WITHOUT ROWID""",
)


def create_schema(raw: sqlite3.Connection) -> None:
    """Create the tables (idempotent), bring an older file up to this version, refuse a newer one."""
    for statement in _TABLES:
        raw.execute(statement)
    row = raw.execute("SELECT value FROM store_meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        raw.execute("INSERT INTO store_meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        return
    version = int(row[0])
    if version > SCHEMA_VERSION:
        raise sqlite3.DatabaseError(
            f"graph store schema version {row[0]} is newer than this program understands ({SCHEMA_VERSION})"
        )
    if version < 2:
        fill_profiles(raw)
    raw.execute("UPDATE store_meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))


def kb_token(kb: str) -> str:
    """One FTS5 token per KB (a hash: a KB name such as `a_b` would otherwise be two tokens)."""
    return "kb" + hashlib.sha256(kb.encode("utf-8")).hexdigest()[:32]


def bump_revisions(raw: sqlite3.Connection, kb: str, kinds: tuple[str, ...]) -> None:
    raw.executemany(
        """INSERT INTO revisions (kb, kind, revision) VALUES (?, ?, 1)
        ON CONFLICT (kb, kind) DO UPDATE SET revision = revision + 1""",
        [(kb, kind) for kind in kinds],
    )


def revision(raw: sqlite3.Connection, kb: str, kind: str) -> int:
    row = raw.execute("SELECT revision FROM revisions WHERE kb = ? AND kind = ?", (kb, kind)).fetchone()
    return int(row[0]) if row is not None else 0
