"""fusion_agent: several agents run concurrently, their results fused by reciprocal rank fusion.

Results are deduplicated by `result_id` (stable across agents: `chunk:<id>`, `entity:<id>`, ...);
each fused result remembers which agents found it and at which rank. Chunks and the other evidence
(entities, relations, communities) are fused per granularity, chunks first since answers cite chunks,
then up to `other_limit` of each other granularity.
Members do not serve every question equally well: which is best depends on the question's shape (a relation to
follow, a look-up of one fact). A fusion agent may be told which member leads a question (`LeadOf`): the lead's
own first chunks keep the first two-thirds of the places, in its order, and the fused ranking of all members fills
the rest. A plain fusion ranks an item several members agree on above the best item of the one member that
serves the question, so it fell below that member; led, it keeps the lead's best places and adds what the
others agree on after them. Without a lead (or when the lead failed) every place is the fused ranking's.
An agent that fails is logged and left out; the fusion fails only when every agent fails.
A fusion agent made with `FusionAgent.sharing_reads` (as the service makes it) builds its members anew for each
question over that question's `ReadScope`, so they share their identical reads of the store and the embedder
while it runs (shared_reads.py); one made with fixed agents leaves their reads to them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from backend.domain.agent_types import AgentType
from backend.domain.retrieval import Granularity, RetrievalResult
from backend.graphrag_agent.agents.common import all_of, build_context, log_retrieval, merge_references, unit
from backend.graphrag_agent.fusion import ahead, reciprocal_rank_fusion, spread_over_groups
from backend.graphrag_agent.ports import AgentTrace, RetrievalAgent
from backend.graphrag_agent.shared_reads import ReadScope, SharedReads

logger = logging.getLogger(__name__)

# Builds one question's members over its `ReadScope`: they read through the scope's reader and embedder and
# tokenise with its term sets.
MembersOver = Callable[[ReadScope], Sequence[RetrievalAgent]]
# The agent type of the member whose ranking leads a question (None: no member leads it).
LeadOf = Callable[[str], str | None]


class FusionAgent:
    """Retrieve-only fusion of other agents over the same KB (SPEC §9); keeps no per-request state."""

    def __init__(
        self,
        agents: Sequence[RetrievalAgent],
        top_k: int = 8,
        other_limit: int | None = None,
        lead: LeadOf | None = None,
    ) -> None:
        """Fuses the fixed `agents`, each reading on its own."""
        if not agents:
            raise ValueError("fusion needs at least one agent")
        fixed = tuple(agents)
        self._setup(lambda: nullcontext(fixed), top_k, other_limit, lead)

    @classmethod
    def sharing_reads(
        cls,
        reads: SharedReads,
        members: MembersOver,
        top_k: int = 8,
        other_limit: int | None = None,
        lead: LeadOf | None = None,
    ) -> FusionAgent:
        """Fuses, for each question, the agents `members` builds over a new `ReadScope` of `reads`, which is
        closed when the question is done: its members share their reads, nothing else does."""

        @contextmanager
        def scoped_members() -> Iterator[Sequence[RetrievalAgent]]:
            with reads.scope() as scope:
                built = tuple(members(scope))
                if not built:
                    raise ValueError("fusion needs at least one agent")
                yield built

        agent = cls.__new__(cls)
        agent._setup(scoped_members, top_k, other_limit, lead)
        return agent

    def _setup(
        self,
        members: Callable[[], AbstractContextManager[Sequence[RetrievalAgent]]],
        top_k: int,
        other_limit: int | None,
        lead: LeadOf | None,
    ) -> None:
        if top_k < 1:
            raise ValueError("top_k must be at least 1")
        self._members = members  # one question's members, for as long as that question runs
        self._top_k = top_k
        self._other_limit = max(2, top_k // 2) if other_limit is None else other_limit
        self._lead = lead
        self._lead_places = -(-2 * top_k // 3)  # two-thirds, rounded up

    @property
    def agent_type(self) -> str:
        return AgentType.FUSION.value

    async def retrieve_with_trace(self, query: str, thread_id: str) -> AgentTrace:
        started = time.perf_counter()
        with self._members() as members:
            outcomes = await all_of(_attempt(agent, query, thread_id) for agent in members)
        traces = [(a.agent_type, t) for a, t in zip(members, outcomes, strict=True) if not isinstance(t, Exception)]
        if not traces:
            raise next(error for error in outcomes if isinstance(error, Exception))
        lead = self._lead(query) if self._lead is not None else None
        results = [
            result
            for granularity in Granularity
            for result in self._fuse(traces, granularity, lead)[: self._limit(granularity)]
        ]
        log_retrieval(
            logger,
            self.agent_type,
            "",
            thread_id,
            started,
            len(results),
            agents=len(members),
            ok=len(traces),
            lead=lead or "-",
        )
        return {
            "context": build_context(results),
            "retrieval_results": [result.to_dict() for result in results],
            "reference": merge_references(trace["reference"] for _, trace in traces),
        }

    def _limit(self, granularity: Granularity) -> int:
        return self._top_k if granularity is Granularity.CHUNK else self._other_limit

    def _fuse(
        self, traces: Sequence[tuple[str, AgentTrace]], granularity: Granularity, lead: str | None
    ) -> list[RetrievalResult]:
        """One granularity of every trace fused; each result keeps its first-seen form. Chunks: the lead's first
        ones ahead, when the lead is among the traces."""
        lists: list[list[str]] = []
        first_seen: dict[str, dict[str, Any]] = {}
        for _, trace in traces:
            wanted = [r for r in trace["retrieval_results"] if r.get("granularity") == granularity.value]
            lists.append([str(r["result_id"]) for r in wanted])
            for raw in wanted:
                first_seen.setdefault(str(raw["result_id"]), raw)
        names = [agent_type for agent_type, _ in traces]
        fused = [
            self._result(first_seen[item.item_id], item.score, names, item.ranks)
            for item in reciprocal_rank_fusion(lists)
        ]
        if granularity is not Granularity.CHUNK:  # other evidence has no document order and no lead
            return fused
        # Chunks are spread over documents as each agent spreads its own.
        fused = spread_over_groups(fused, _document_of)
        if lead not in names:
            return fused
        by_id = {result.result_id: result for result in fused}
        first = [by_id[item_id] for item_id in lists[names.index(lead)][: self._lead_places]]
        return ahead(first, fused, key=lambda result: result.result_id)

    def _result(
        self, raw: dict[str, Any], score: float, names: Sequence[str], ranks: tuple[int | None, ...]
    ) -> RetrievalResult:
        found = {name: rank for name, rank in zip(names, ranks, strict=True) if rank is not None}
        metadata = dict(raw.get("metadata") or {}) | {
            "agent_type": self.agent_type,
            "found_by": list(found),
            "fusion_ranks": found,
        }
        return RetrievalResult.from_dict({**raw, "score": unit(score), "metadata": metadata})


def _document_of(result: RetrievalResult) -> str:
    return result.source.doc_id


async def _attempt(agent: RetrievalAgent, query: str, thread_id: str) -> AgentTrace | Exception:
    """The agent's trace, or its error: one failing agent must not sink the others (cancellation still does)."""
    try:
        return await agent.retrieve_with_trace(query, thread_id)
    except Exception as error:
        logger.warning("fusion: %s failed for thread %s: %s", agent.agent_type, thread_id, error, exc_info=True)
        return error
