"""The write side: functions that run inside one managed write transaction (they may be retried whole).

Merged entity and relation values are recomputed in Python with `merge.py` from the mentions that
remain, only for the entities and relations a write touched, so both stores agree value for value.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, LiteralString

from neo4j import AsyncManagedTransaction, Record

from backend.domain.errors import InvalidRequest
from backend.domain.graph import EntityMention, RelationMention
from backend.infrastructure.graph_store.merge import MergedEntity, merge_entity, merge_relation
from backend.infrastructure.graph_store.neo4j import queries as q
from backend.infrastructure.graph_store.neo4j.params import (
    DocumentParams,
    indexed_terms,
    kb_scope,
    node_uid,
    pair_uid,
    quiet,
)
from backend.infrastructure.graph_store.validation import utc_timestamp


async def run(tx: AsyncManagedTransaction, query: LiteralString, **params: Any) -> list[Record]:
    result = await tx.run(query, quiet(params))
    return [record async for record in result]


# -- documents ---------------------------------------------------------------------------------------------------


async def write_documents(tx: AsyncManagedTransaction, batch: Sequence[DocumentParams]) -> None:
    """Replace each document (if stored) by its params, in order, then re-merge every entity and relation any of
    them touched, once: the KB's embedding dimensions checked, the documents written in one statement (which
    returns what each held before), then the mentions that remain, read once for the whole batch, and the
    merge."""
    if not batch:
        return
    kb = batch[0].kb
    if any(p.kb != kb for p in batch):
        raise ValueError("a batch of documents belongs to one KB")
    [stored] = await run(tx, q.KB_DIMENSIONS, doc_ids=[p.document["id"] for p in batch], **kb_scope(kb))
    _check_dimensions(kb, stored["chunk_dimension"], stored["entity_dimension"], batch)
    [written] = await run(
        tx, q.WRITE_DOCUMENTS, **kb_scope(kb), now=utc_timestamp(), documents=[_document_row(p) for p in batch]
    )
    entity_ids: set[str] = set()
    pairs: dict[str, tuple[str, str]] = {}
    for p, held in zip(batch, written["held"], strict=True):
        entity_ids |= set(p.entity_ids).union(held["entity_ids"])
        pairs |= _pair_keys(kb, set(p.relation_pairs).union((s, t) for s, t in held["pairs"]))
    entity_uids = [node_uid(kb, e) for e in sorted(entity_ids)]
    [inputs] = await run(tx, q.MERGE_INPUTS, entity_uids=entity_uids, pairs=sorted(pairs))
    await _apply_merges(tx, kb, inputs, pairs)


def _document_row(p: DocumentParams) -> dict[str, Any]:
    return {
        "uid": p.uid,
        "doc": p.document,
        "chunks": p.chunks,
        "next": p.next,
        "entities": p.entities,
        "mentions": p.mentions,
        "relation_mentions": p.relation_mentions,
        "profile_terms": p.profile_terms,
        "profile_chunks": p.profile_chunks,
    }


async def delete_document(tx: AsyncManagedTransaction, kb: str, doc_id: str) -> bool:
    uid = node_uid(kb, doc_id)
    [state] = await run(tx, q.LOCK_DOCUMENT_FOR_DELETE, uid=uid, **kb_scope(kb))
    if not state["exists"]:
        return False
    pairs = _pair_keys(kb, {(s, t) for s, t in state["pairs"]})
    entity_uids = sorted(node_uid(kb, e) for e in state["entity_ids"])
    await run(tx, q.LOCK_ENTITIES, entity_uids=entity_uids)
    [inputs] = await run(
        tx, q.DELETE_DOCUMENT, uid=uid, entity_uids=entity_uids, pairs=sorted(pairs), kbt=kb_scope(kb)["kbt"]
    )
    await _apply_merges(tx, kb, inputs, pairs)
    return True


def _check_dimensions(
    kb: str, chunk_dimension: int | None, entity_dimension: int | None, batch: Sequence[DocumentParams]
) -> None:
    """A KB holds one embedding dimension per kind, so that vector search compares like with like: each document
    of the batch must match what the KB holds and the documents before it in the batch."""
    for p in batch:
        chunk_dimension = _checked_dimension(kb, "chunk", chunk_dimension, p.chunk_dimension)
        entity_dimension = _checked_dimension(kb, "entity", entity_dimension, p.entity_dimension)


def _checked_dimension(kb: str, what: str, stored: int | None, written: int | None) -> int | None:
    """The KB's dimension once `written` is added (unchanged when either is unknown)."""
    if stored is not None and written is not None and int(stored) != written:
        raise InvalidRequest(
            f"KB {kb!r} holds {stored}-dimensional {what} embeddings, this write has {written}: "
            "re-index the whole KB after changing the embedding model"
        )
    return int(stored) if stored is not None else written


# -- merged entities and relations -----------------------------------------------------------------------------


def _pair_keys(kb: str, pairs: Iterable[tuple[str, str]]) -> dict[str, tuple[str, str]]:
    return {pair_uid(kb, source, target): (source, target) for source, target in pairs}


async def _apply_merges(
    tx: AsyncManagedTransaction, kb: str, inputs: Record, pairs: Mapping[str, tuple[str, str]]
) -> None:
    """Merge what remains of each touched entity and relation (`merge.py`) and write the result."""
    gone_entities, entities = _merged_entities(inputs["entities"])
    mentions = _relation_mentions(inputs["relation_mentions"])
    gone_relations = [_endpoints(kb, *pairs[key]) for key in sorted(pairs) if key not in mentions]
    relations = [{**_endpoints(kb, *pairs[key]), **_relation_values(found)} for key, found in sorted(mentions.items())]
    if gone_entities or entities or gone_relations or relations:
        await run(
            tx,
            q.APPLY_MERGES,
            kb=kb,
            gone_entities=gone_entities,
            entities=entities,
            gone_relations=gone_relations,
            relations=relations,
        )


def _merged_entities(rows: Iterable[Mapping[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """The entities left without a mention, and the merged values of those whose values changed."""
    gone: list[str] = []
    changed: list[dict[str, Any]] = []
    for row in rows:
        mentions = [EntityMention(row["id"], n, t, d, c) for n, t, d, c in row["mentions"]]
        if not mentions:
            gone.append(row["uid"])
            continue
        merged = merge_entity(mentions)
        if merged != MergedEntity(row["name"], row["type"], row["description"], row["mention_count"]):
            changed.append(_entity_row(row["uid"], merged))
    return gone, changed


def _entity_row(uid: str, merged: MergedEntity) -> dict[str, Any]:
    return {
        "uid": uid,
        "name": merged.name,
        "type": merged.type,
        "description": merged.description,
        "mention_count": merged.mention_count,
        "terms": indexed_terms(merged.name),
    }


def _relation_mentions(rows: Iterable[Sequence[Any]]) -> dict[str, list[RelationMention]]:
    found: dict[str, list[RelationMention]] = defaultdict(list)
    for pair, source, target, description, weight, chunk_id in rows:
        found[pair].append(RelationMention(source, target, description, float(weight), chunk_id))
    return found


def _endpoints(kb: str, source_id: str, target_id: str) -> dict[str, Any]:
    return {"source": node_uid(kb, source_id), "target": node_uid(kb, target_id)}


def _relation_values(mentions: list[RelationMention]) -> dict[str, Any]:
    merged = merge_relation(mentions)
    return {"description": merged.description, "weight": merged.weight, "chunk_ids": list(merged.chunk_ids)}
