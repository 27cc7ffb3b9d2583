"""The routing profile in Neo4j: the read for a message, and the profiles of documents written before the store
kept them (counted when the store opens, in batches, each its own transaction)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from neo4j import AsyncDriver

from backend.graphrag_agent.ports import TermCounts
from backend.infrastructure.graph_store.neo4j import queries as q
from backend.infrastructure.graph_store.neo4j.params import kb_token, quiet
from backend.infrastructure.graph_store.profile import CHUNKS_TERM, chunk_profile

FILL_BATCH = 200  # documents counted per transaction


def term_uids(kbs: Sequence[str], terms: Sequence[str]) -> list[str]:
    """The `RoutingTerm` uid of every (KB, term) pair, the KB's chunk count included."""
    wanted = list(dict.fromkeys([CHUNKS_TERM, *terms]))
    return [f"{kb_token(kb)}:{term}" for kb in dict.fromkeys(kbs) for term in wanted]


def term_counts(kbs: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> dict[str, TermCounts]:
    found: dict[str, dict[str, int]] = defaultdict(dict)
    for row in rows:
        found[row["kb"]][row["term"]] = int(row["chunks"])
    return {kb: TermCounts(found[kb].pop(CHUNKS_TERM, 0), found[kb]) for kb in dict.fromkeys(kbs)}


async def fill_profiles(driver: AsyncDriver, database: str | None) -> int:
    """Count every document the profiles lack; the number counted."""
    counted = 0
    while True:
        found = await driver.execute_query(q.DOCUMENTS_WITHOUT_PROFILE, {"limit": FILL_BATCH}, database_=database)
        if not found.records:
            return counted
        documents = []
        for record in found.records:
            profile = chunk_profile(record["title"] or "", record["texts"])
            documents.append(
                {"uid": record["uid"], "profile_terms": list(profile), "profile_chunks": list(profile.values())}
            )
        await driver.execute_query(q.ADD_PROFILES, quiet({"documents": documents}), database_=database)
        counted += len(documents)
