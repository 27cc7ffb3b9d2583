"""Replacing a KB's community set on Neo4j: one transaction when the change is small, bounded batches when not.

A refresh after a one-document write changes a few communities of thousands and stays one transaction, so
readers see the old set or the new one. Re-clustering the top levels of a big KB changes thousands of nodes and
tens of thousands of links at once; one transaction holding all of it can go over Neo4j's transaction memory
(a share of the heap). Then each step runs in batches of bounded size, each its
own transaction, and readers may see a mix of both sets until the last batch commits. Every batch first locks
the KB's CommunitySet node and checks the refresh's ticket: a newer refresh of the same KB makes the older one
stop, so batches of two refreshes never interleave, and whatever the stopped one wrote is diffed away by the
newer one. A refresh that dies midway leaves a mix that the next refresh repairs (it writes the difference from
what is stored, not from what it expected).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, LiteralString, TypeVar

from neo4j import AsyncManagedTransaction

from backend.domain.errors import InvalidRequest
from backend.infrastructure.graph_store.neo4j import queries as q
from backend.infrastructure.graph_store.neo4j.params import CommunityParams, Params, kb_scope
from backend.infrastructure.graph_store.neo4j.writes import run

logger = logging.getLogger(__name__)

T = TypeVar("T")
Transact = Callable[[Callable[[AsyncManagedTransaction], Awaitable[T]]], Awaitable[T]]


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """How much one batch may write: a small fraction of the refresh that failed as one transaction (tens of
    thousands of links); 500 community rows with 384-dimension vectors are about 1.5 MB of parameters."""

    communities: int = 500
    links: int = 5_000


DEFAULT_BATCHES = BatchLimits()


@dataclass(frozen=True, slots=True)
class Step:
    statement: LiteralString
    params: Params = field(default_factory=dict)
    until_below: int | None = None  # repeat until the statement reports fewer `dropped` than this


class Superseded(Exception):
    """A newer refresh of the same KB began; it writes the set from now on."""


def plan(p: CommunityParams, limits: BatchLimits) -> list[Step]:
    """The refresh as steps, in order; each step's batch is bounded by `limits`."""
    scope = kb_scope(p.kb)
    steps = [Step(q.DROP_OTHER_COMMUNITIES, {**scope, "keep": p.keep, "limit": limits.communities}, limits.communities)]
    steps += [Step(q.WRITE_COMMUNITIES, {**scope, "rows": rows}) for rows in _chunks(p.rows, limits.communities)]
    steps += [Step(q.UNLINK_STALE_MEMBERS, {"rows": rows}) for rows in _by_members(p.members, limits.links)]
    pairs = [[row["community"], member] for row in p.members for member in row["members"]]
    steps += [Step(q.LINK_MEMBERS, {"pairs": chunk}) for chunk in _chunks(pairs, limits.links)]
    parent_of = {row["child"]: row["parent"] for row in p.parents}
    steps.append(Step(q.UNLINK_STALE_PARENTS, {**scope, "parent_of": parent_of}))
    steps += [Step(q.LINK_PARENTS, {"rows": rows}) for rows in _chunks(p.parents, limits.links)]
    return steps


async def replace_communities(transact: Transact[Any], p: CommunityParams, limits: BatchLimits) -> None:
    """Make the KB's stored communities `p`. `transact(work)` runs `work` in one managed write transaction."""
    scope = kb_scope(p.kb)

    async def survey(tx: AsyncManagedTransaction) -> tuple[int, list[int]]:
        found = (await run(tx, q.SURVEY_COMMUNITIES, **scope, keep=p.keep, unvectored=p.unvectored))[0]
        return int(found["stale"]), [int(d) for d in found["dimensions"]]

    stale, kept_dimensions = await transact(survey)
    _check_dimensions(p, kept_dimensions)
    steps = plan(p, limits)
    if stale <= limits.communities and _single_batches(steps):
        await transact(lambda tx: _all_at_once(tx, p.kb, steps))
        return
    logger.info("KB %r: community refresh in %d batches (%d stale communities)", p.kb, len(steps), stale)
    ticket: int = await transact(lambda tx: _begin(tx, p.kb))
    try:
        for step in steps:
            while await transact(partial(_batch, kb=p.kb, ticket=ticket, step=step)):
                pass
    except Superseded:
        logger.info("KB %r: community refresh %d superseded by a newer one", p.kb, ticket)


async def _all_at_once(tx: AsyncManagedTransaction, kb: str, steps: Sequence[Step]) -> None:
    await _begin(tx, kb)
    for step in steps:
        while await _run_step(tx, step):
            pass


async def _begin(tx: AsyncManagedTransaction, kb: str) -> int:
    return int((await run(tx, q.BEGIN_COMMUNITY_REFRESH, **kb_scope(kb)))[0]["ticket"])


async def _batch(tx: AsyncManagedTransaction, kb: str, ticket: int, step: Step) -> bool:
    """One batch in its own transaction, if this refresh is still the newest. True: run the step again."""
    if not (await run(tx, q.CONTINUE_COMMUNITY_REFRESH, **kb_scope(kb), ticket=ticket))[0]["current"]:
        raise Superseded
    return await _run_step(tx, step)


async def _run_step(tx: AsyncManagedTransaction, step: Step) -> bool:
    records = await run(tx, step.statement, **step.params)
    return step.until_below is not None and int(records[0]["dropped"]) >= step.until_below


def _check_dimensions(p: CommunityParams, kept: list[int]) -> None:
    """Kept communities keep their vectors: new ones must match them (checked before anything is written)."""
    dimensions = sorted(set(kept) | ({p.dimension} if p.dimension is not None else set()))
    if len(dimensions) > 1:
        raise InvalidRequest(
            f"KB {p.kb!r}: the community embeddings would have different dimensions {dimensions}; "
            "give a vector for every community after changing the embedding model"
        )


def _single_batches(steps: Sequence[Step]) -> bool:
    """Whether every step fits one batch (then the whole refresh is one transaction)."""
    statements = [step.statement for step in steps]
    return len(statements) == len(set(statements))


def _chunks(items: Sequence[T], size: int) -> Iterator[list[T]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def _by_members(rows: Sequence[Params], links: int) -> Iterator[list[Params]]:
    """Communities grouped so that a group's member lists hold about `links` ids (one community at least)."""
    group: list[Params] = []
    size = 0
    for row in rows:
        if group and size + len(row["members"]) > links:
            yield group
            group, size = [], 0
        group.append(row)
        size += len(row["members"])
    if group:
        yield group
