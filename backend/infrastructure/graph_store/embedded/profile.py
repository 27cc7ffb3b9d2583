"""The routing profile in the embedded store: kept in the write transaction of each document, read in one statement.

A document's counts (`graph_store/profile.py`) are bound as one JSON object and added to or taken from its KB's
rows by `json_each`; rows that reach zero go. The read binds the KBs and the terms as two JSON arrays and seeks
the (term, kb) primary key for each pair, so its cost is the number of pairs, whatever the KBs' size.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Sequence

from backend.graphrag_agent.ports import TermCounts
from backend.infrastructure.graph_store.profile import CHUNKS_TERM, chunk_profile

_ADD = """INSERT INTO routing_terms (term, kb, chunks) SELECT key, ?1, value FROM json_each(?2) WHERE true
ON CONFLICT (term, kb) DO UPDATE SET chunks = chunks + excluded.chunks"""
_TAKE = """UPDATE routing_terms SET chunks = chunks - held.value FROM json_each(?2) AS held
WHERE routing_terms.term = held.key AND routing_terms.kb = ?1"""
_DROP_EMPTY = "DELETE FROM routing_terms WHERE term IN (SELECT key FROM json_each(?2)) AND kb = ?1 AND chunks <= 0"
_READ = """SELECT r.kb, r.term, r.chunks
FROM json_each(?1) AS k CROSS JOIN json_each(?2) AS t
CROSS JOIN routing_terms AS r ON r.term = t.value AND r.kb = k.value"""


def profile_json(profile: dict[str, int]) -> str:
    return json.dumps(profile, ensure_ascii=False, separators=(",", ":"))


def add_document(raw: sqlite3.Connection, kb: str, doc_id: str, profile: str) -> None:
    """Count a document's chunks (`profile`: its JSON counts) in its KB's profile."""
    raw.execute("INSERT INTO document_terms (kb, doc_id, terms) VALUES (?, ?, ?)", (kb, doc_id, profile))
    raw.execute(_ADD, (kb, profile))


def remove_document(raw: sqlite3.Connection, kb: str, doc_id: str) -> None:
    """Take back what a stored document added (nothing when it added nothing)."""
    row = raw.execute("SELECT terms FROM document_terms WHERE kb = ? AND doc_id = ?", (kb, doc_id)).fetchone()
    if row is None:
        return
    raw.execute(_TAKE, (kb, row[0]))
    raw.execute(_DROP_EMPTY, (kb, row[0]))
    raw.execute("DELETE FROM document_terms WHERE kb = ? AND doc_id = ?", (kb, doc_id))


def term_frequencies(raw: sqlite3.Connection, kbs: Sequence[str], terms: Sequence[str]) -> dict[str, TermCounts]:
    wanted = json.dumps(list(dict.fromkeys([CHUNKS_TERM, *terms])), ensure_ascii=False)
    found: dict[str, dict[str, int]] = defaultdict(dict)
    for kb, term, chunks in raw.execute(_READ, (json.dumps(list(kbs), ensure_ascii=False), wanted)):
        found[kb][term] = int(chunks)
    return {kb: TermCounts(found[kb].pop(CHUNKS_TERM, 0), found[kb]) for kb in dict.fromkeys(kbs)}


def fill_profiles(raw: sqlite3.Connection) -> None:
    """Count every stored document that the profile lacks (a file written before the store kept profiles)."""
    missing = raw.execute(
        """SELECT d.kb, d.doc_id, d.title FROM documents AS d
        WHERE NOT EXISTS (SELECT 1 FROM document_terms AS t WHERE t.kb = d.kb AND t.doc_id = d.doc_id)"""
    ).fetchall()
    for kb, doc_id, title in missing:
        texts = [
            r[0]
            for r in raw.execute("SELECT text FROM chunks WHERE kb = ? AND doc_id = ? ORDER BY ordinal", (kb, doc_id))
        ]
        add_document(raw, kb, doc_id, profile_json(chunk_profile(title, texts)))
