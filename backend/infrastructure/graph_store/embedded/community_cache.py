"""The communities of the KBs read lately, parsed once per revision and shared by the worker threads.

A community record carries the ids of its members, and a top-level community of a large KB has thousands.
Aggregating them in SQL and parsing them again on every `communities_of` and community search cost a graph
question more than any other read on a large KB. The records are immutable, so one parsed set serves every read
until the KB changes.

A set is valid for one pair of revisions: communities (re-detection bumps it) and entities (a document write
or delete bumps it; a delete also drops the members that are no longer entities). Any process's write moves
them, so a set cached here is reloaded after writes made elsewhere, as the vector matrices are.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from backend.domain.graph import CommunityRecord
from backend.infrastructure.graph_store.embedded.schema import revision

# In the order every store lists communities: by level, then rank (highest first), then id.
_COMMUNITIES = """SELECT id, community_id, level, title, summary, rank, parent_id FROM communities
WHERE kb = ? ORDER BY level, rank DESC, community_id"""
_MEMBERS = "SELECT community_id, entity_id FROM community_members WHERE kb = ? ORDER BY community_id, entity_id"


@dataclass(frozen=True, slots=True)
class CommunitySet:
    """One KB's communities at one revision pair."""

    revisions: tuple[int, int]
    ordered: tuple[CommunityRecord, ...]  # level, rank desc, id
    by_row: Mapping[int, CommunityRecord]  # table row id → record (what the vector matrix returns)
    positions_of_entity: Mapping[str, tuple[int, ...]]  # entity id → positions in `ordered`

    def containing(self, entity_ids: Iterable[str]) -> list[CommunityRecord]:
        """The communities (every level) that contain any of the entities, in list order."""
        found = {p for entity_id in entity_ids for p in self.positions_of_entity.get(entity_id, ())}
        return [self.ordered[p] for p in sorted(found)]

    def at_level(self, level: int | None) -> list[CommunityRecord]:
        return [c for c in self.ordered if level is None or c.level == level]


class CommunityCache:
    """The community sets of the KBs read lately."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, CommunitySet] = {}

    def communities(self, raw: sqlite3.Connection, kb: str) -> CommunitySet:
        """The current set; call inside a read transaction so that it matches the rows read next."""
        current = (revision(raw, kb, "communities"), revision(raw, kb, "entities"))
        with self._lock:
            cached = self._entries.get(kb)
        if cached is not None and cached.revisions == current:
            return cached
        loaded = _load(raw, kb, current)
        with self._lock:
            self._entries[kb] = loaded
        return loaded

    def drop(self, kb: str) -> None:
        """Free a set a write made stale now (the revision check alone would also keep results right)."""
        with self._lock:
            self._entries.pop(kb, None)


def _load(raw: sqlite3.Connection, kb: str, revisions: tuple[int, int]) -> CommunitySet:
    members: dict[str, list[str]] = {}
    for community_id, entity_id in raw.execute(_MEMBERS, (kb,)):
        members.setdefault(community_id, []).append(entity_id)
    ordered: list[CommunityRecord] = []
    by_row: dict[int, CommunityRecord] = {}
    positions: dict[str, list[int]] = {}
    for row_id, community_id, level, title, summary, rank, parent_id in raw.execute(_COMMUNITIES, (kb,)):
        entity_ids = tuple(members.get(community_id, ()))
        record = CommunityRecord(community_id, int(level), title, summary, float(rank), entity_ids, parent_id)
        for entity_id in entity_ids:
            positions.setdefault(entity_id, []).append(len(ordered))
        by_row[row_id] = record
        ordered.append(record)
    return CommunitySet(
        revisions,
        tuple(ordered),
        by_row,
        {entity_id: tuple(found) for entity_id, found in positions.items()},
    )
