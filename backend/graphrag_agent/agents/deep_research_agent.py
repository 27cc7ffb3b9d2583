"""deep_research_agent: iterative multi-hop retrieval with a step limit.

Offline (the default), step 1 is the graph agent's local search. Each further step follows bridge
entities: the entities of the best chunks so far that the question does not name. Their chunks join
a local entity–chunk graph, and personalised PageRank (restarting at the question's entities and the
first step's best chunks) ranks every chunk in it, as HippoRAG does over its whole graph. A chunk
that is the bridge entity's own document (titled with its name) counts extra. The walk stops when a
step brings no new chunk into the top results with at least `min_gain` of the best chunk's score,
or at the step limit.

With a model (optional), the model plans sub-questions, each is retrieved like step 1, and after
each step the model decides to continue, revise the plan or finish; the rankings of the question and
of its sub-questions are fused by RRF. Any model failure or unusable answer falls back to the offline
method, so the agent never fails because of the model.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.domain.agent_types import AgentType
from backend.domain.conversation import Message, Role
from backend.domain.graph import EntityRecord
from backend.domain.ids import normalise_entity_name
from backend.domain.retrieval import RetrievalResult
from backend.graphrag_agent.agents.common import Retrieved, concurrently, entity_result
from backend.graphrag_agent.agents.graph_agent import GraphSearchAgent, Probe
from backend.graphrag_agent.agents.local_search import (
    Expansion,
    RankedChunk,
    Seed,
    name_match,
    query_term_set,
    seed_confidence,
    specificity,
)
from backend.graphrag_agent.agents.tuning import ResearchSettings
from backend.graphrag_agent.fusion import reciprocal_rank_fusion, spread_over_groups
from backend.graphrag_agent.model import MODEL_FAILURES, CompletionModel, parse_json_object, string_list
from backend.graphrag_agent.pagerank import personalised_pagerank
from backend.graphrag_agent.ports import ChunkHit

logger = logging.getLogger(__name__)


# --- the local graph of one query -----------------------------------------------------------------


class BridgeGraph:
    """The entity–chunk graph one query explores; built per request, never kept."""

    def __init__(self) -> None:
        self._nodes: dict[str, int] = {}
        self._edges: dict[tuple[int, int], float] = {}

    def node(self, key: str) -> int:
        return self._nodes.setdefault(key, len(self._nodes))

    def link(self, entity_id: str, chunk_id: str, weight: float) -> None:
        """Add or re-weigh an edge (weights improve as the walk learns entities' mention counts)."""
        self._edges[(self.node(f"e:{entity_id}"), self.node(f"c:{chunk_id}"))] = weight

    def rank(self, restart: Mapping[str, float], damping: float, iterations: int) -> dict[str, float]:
        """Personalised PageRank of every node, by key."""
        weights = {self.node(key): weight for key, weight in restart.items()}
        scores = personalised_pagerank(len(self._nodes), self._edges, weights, damping, iterations)
        return {key: float(scores[index]) for key, index in self._nodes.items()}


@dataclass
class _Walk:
    """Everything one offline research run has learnt so far (per request)."""

    question_terms: set[str]
    seeds: dict[str, Seed]
    first: dict[str, RankedChunk]
    hits: dict[str, ChunkHit]
    mentions: dict[str, list[str]]
    records: dict[str, EntityRecord]
    graph: BridgeGraph = field(default_factory=BridgeGraph)
    expanded: set[str] = field(default_factory=set)
    followed: set[str] = field(default_factory=set)
    found_at: dict[str, int] = field(default_factory=dict)
    linked: dict[str, set[str]] = field(default_factory=dict)  # chunk id → followed entities that led to it
    scores: dict[str, float] = field(default_factory=dict)  # the last PageRank, by node key

    @classmethod
    def start(cls, query: str, seeds: Sequence[Seed], ranked: Sequence[RankedChunk], expansion: Expansion) -> _Walk:
        records = {e.entity_id: e.record for e in expansion.entities if e.record is not None}
        walk = cls(
            question_terms=query_term_set(query),
            seeds={s.entity.entity_id: s for s in seeds},
            first={c.hit.chunk_id: c for c in ranked},
            hits={c.hit.chunk_id: c.hit for c in ranked},
            mentions={chunk_id: list(ids) for chunk_id, ids in expansion.mentions.items()},
            records=records | {s.entity.entity_id: s.entity for s in seeds},
        )
        walk.found_at = dict.fromkeys(walk.first, 1)
        walk.link_chunks(list(walk.first))
        return walk

    def bridges(self, frontier: Sequence[str], limit: int) -> list[str]:
        """Entities of the frontier the question does not name and the walk has not followed, best first."""
        order: dict[str, float] = {}
        for chunk_id in frontier:
            entity_ids = self.mentions.get(chunk_id, [])
            for entity_id in entity_ids:
                order[entity_id] = order.get(entity_id, 0.0) + 1.0 / len(entity_ids)
        return [
            e
            for e in sorted(order, key=lambda e: (-order[e], e))
            if e not in self.followed and e not in self.seeds and not self._named(e)
        ][:limit]

    def _named(self, entity_id: str) -> bool:
        record = self.records.get(entity_id)
        return record is not None and name_match(record.name, self.question_terms) >= 1.0

    def weight(self, entity_id: str) -> float:
        record = self.records.get(entity_id)
        return specificity(record.mention_count) if record is not None else 1.0

    def link_chunks(self, chunk_ids: Sequence[str]) -> None:
        for chunk_id in chunk_ids:
            self.graph.node(f"c:{chunk_id}")
            for entity_id in self.mentions.get(chunk_id, []):
                self.graph.link(entity_id, chunk_id, self.weight(entity_id))

    def link_entities(self, chunks_of: Mapping[str, Sequence[str]], step: int) -> None:
        for entity_id, chunk_ids in chunks_of.items():
            for chunk_id in chunk_ids:
                self.graph.link(entity_id, chunk_id, self.weight(entity_id))
                self.found_at.setdefault(chunk_id, step)
                self.linked.setdefault(chunk_id, set()).add(entity_id)

    def restart(self, top_k: int, chunk_share: float) -> dict[str, float]:
        """Restart mass: the seeds by link weight and (a `chunk_share` of it, or all without seeds) the first
        step's top chunks by fused score."""
        seeds = {f"e:{e}": s.weight for e, s in self.seeds.items()}
        chunks = {f"c:{c.hit.chunk_id}": c.score for c in list(self.first.values())[:top_k]}
        if not seeds or not chunks or chunk_share <= 0:
            return seeds or chunks
        return _scaled(seeds, 1.0 - chunk_share) | _scaled(chunks, chunk_share)

    def is_home(self, chunk_id: str) -> bool:
        """Is the chunk part of the own document of an entity the walk followed?"""
        hit = self.hits.get(chunk_id)
        if hit is None:
            return False
        title = normalise_entity_name(hit.title)
        return any(
            e in self.records and normalise_entity_name(self.records[e].name) == title
            for e in self.linked.get(chunk_id, ())
        )


def _scaled(weights: Mapping[str, float], share: float) -> dict[str, float]:
    total = sum(weights.values()) or 1.0
    return {key: share * weight / total for key, weight in weights.items()}


# --- the model-guided plan ------------------------------------------------------------------------

PLAN_PROMPT = """You plan retrieval for a question over a knowledge base.
Split the question into at most {steps} short, self-contained sub-questions, in the order they must be
answered; a later one may describe what an earlier one will find ("the mother of Lothair II").
Return only JSON: {{"sub_questions": ["..."]}}."""

DECIDE_PROMPT = """You direct an iterative retrieval for a question over a knowledge base.
Given the question, the sub-questions searched so far and the evidence found, choose the next step.
Return only JSON: {"decision": "continue" | "revise" | "finish", "next_question": "...", "sub_questions": ["..."]}
- finish: the evidence suffices to answer the question.
- continue: search next_question next (name what the evidence revealed, e.g. a person found).
- revise: the plan was wrong; sub_questions replaces the rest of it."""


class _ModelUnhelpful(Exception):
    """The model failed or answered without usable JSON: research falls back to the offline walk."""


@dataclass(frozen=True, slots=True)
class _Decision:
    kind: str
    next_question: str
    sub_questions: tuple[str, ...]


# --- the agent ------------------------------------------------------------------------------------


class DeepResearchAgent(GraphSearchAgent):
    """Retrieve-only multi-hop research over one KB (SPEC §9); keeps no per-request state."""

    AGENT = AgentType.DEEP_RESEARCH

    @property
    def _research(self) -> ResearchSettings:
        return self._search.settings.research

    async def _retrieve(self, query: str) -> Retrieved:
        probe, results = await self._search.probe_then_global(query)
        mode = "global"
        if not results:
            mode, results = await self._research_results(query, probe)
        return Retrieved(results, {"mode": mode})

    async def _research_results(self, query: str, probe: Probe) -> tuple[str, list[RetrievalResult]]:
        if self._model is not None and self._research.max_steps > 1:
            try:
                return "guided", await self._guided(self._model, query, probe)
            except _ModelUnhelpful as error:
                logger.warning("%s: model unhelpful (%s); researching offline", self.agent_type, error)
        return "offline", await self._offline(query, probe)

    # -- offline: bridges and personalised PageRank -------------------------------------------------

    async def _offline(self, query: str, probe: Probe) -> list[RetrievalResult]:
        ranked, expansion = await self._search.local(query, probe)
        top_k = self._search.top_k
        top = ranked[:top_k]
        walk = _Walk.start(query, probe.seeds, ranked, expansion)
        # The walk starts from the chunks around the question's entities (or, without any, the best chunks).
        frontier = (expansion.chunk_ids() or [c.hit.chunk_id for c in ranked])[: self._research.frontier]
        for step in range(2, self._research.max_steps + 1):
            if not frontier or not await self._follow(walk, frontier, step):
                break
            walked = await self._rank(walk)
            fused = _merged(ranked, walked, seed_confidence(expansion, self._search.settings.specific_mentions))
            known = {c.hit.chunk_id for c in top}
            pagerank = {c.hit.chunk_id: c.score for c in walked}
            gained = [
                c.hit.chunk_id
                for c in fused[:top_k]
                if c.hit.chunk_id not in known and pagerank.get(c.hit.chunk_id, 0.0) >= self._research.min_gain
            ]
            top = fused[:top_k]
            frontier = [c for c in gained if c not in walk.expanded][: self._research.frontier]
        return await self._offline_results(query, probe.seeds, top, expansion, walk)

    async def _follow(self, walk: _Walk, frontier: list[str], step: int) -> bool:
        """Add the frontier's entities and the bridges' chunks to the walk's graph; False if no bridge."""
        unknown = [c for c in frontier if c not in walk.mentions]
        if unknown:
            walk.mentions |= await self._reader.entities_in_chunks(self._kb, unknown)
        bridges = walk.bridges(frontier, self._research.max_bridges)
        follow = bridges + [e for e in walk.seeds if e not in walk.followed]
        if not bridges:
            return False
        missing = sorted({e for c in frontier for e in walk.mentions.get(c, [])} - walk.records.keys())
        chunks_of, records = await concurrently(
            self._reader.chunks_of_entities(self._kb, follow, self._research.chunks_per_entity),
            self._reader.get_entities(self._kb, missing),
        )
        walk.records |= {r.entity_id: r for r in records}
        walk.followed |= set(follow)
        walk.expanded |= set(frontier)
        walk.link_chunks(frontier)
        walk.link_entities(chunks_of, step)
        return True

    async def _rank(self, walk: _Walk) -> list[RankedChunk]:
        """Chunks by personalised PageRank (own documents of followed entities boosted), best first."""
        research = self._research
        scores = walk.scores = walk.graph.rank(
            walk.restart(self._search.top_k, research.chunk_restart), research.damping, research.iterations
        )
        by_chunk = sorted(
            ((key[2:], score) for key, score in scores.items() if key.startswith("c:")), key=lambda p: (-p[1], p[0])
        )[: 3 * self._search.top_k]
        missing = [chunk_id for chunk_id, _ in by_chunk if chunk_id not in walk.hits]
        if missing:
            walk.hits |= {hit.chunk_id: hit for hit in await self._reader.get_chunks(self._kb, missing)}
        boosted = [
            (chunk_id, score * (1 + research.home_bonus * walk.is_home(chunk_id)))
            for chunk_id, score in by_chunk
            if chunk_id in walk.hits
        ]
        boosted.sort(key=lambda p: (-p[1], p[0]))
        best = boosted[0][1] if boosted and boosted[0][1] > 0 else 1.0
        return [self._ranked(walk, chunk_id, score / best) for chunk_id, score in boosted]

    def _ranked(self, walk: _Walk, chunk_id: str, score: float) -> RankedChunk:
        first = walk.first.get(chunk_id)
        metadata = dict(first.metadata) if first is not None else {}
        metadata |= {
            "step": walk.found_at.get(chunk_id, 1),
            "pagerank": round(score, 6),
            "home": walk.is_home(chunk_id),
        }
        return RankedChunk(walk.hits[chunk_id], score, metadata)

    async def _offline_results(
        self, query: str, seeds: Sequence[Seed], top: list[RankedChunk], expansion: Expansion, walk: _Walk
    ) -> list[RetrievalResult]:
        assembler = self._search.assembler
        entities, relations = await assembler.entities_and_relations(top, expansion)
        bridges = self._bridge_entities(walk, top)
        communities = assembler.communities(assembler.local_communities(query, seeds, expansion), "local")
        return assembler.chunks(top) + entities + bridges + relations + communities

    def _bridge_entities(self, walk: _Walk, top: Sequence[RankedChunk]) -> list[RetrievalResult]:
        """The followed entities that led to a chunk found after step 1: the hops the walk made."""
        hops = [c for c in top if walk.found_at.get(c.hit.chunk_id, 1) > 1]
        used = {e for c in hops for e in walk.linked.get(c.hit.chunk_id, ()) if e not in walk.seeds}
        homes = {e: c.hit for c in reversed(hops) for e in walk.linked.get(c.hit.chunk_id, ())}
        scores = {e: walk.scores.get(f"e:{e}", 0.0) for e in used & walk.records.keys()}
        best = max(scores.values(), default=0.0) or 1.0
        meta = self._search.assembler.base_metadata() | {"bridge": True}
        ranked = sorted(scores, key=lambda e: (-scores[e], e))[: self._search.settings.entity_limit]
        return [entity_result(walk.records[e], homes.get(e), 0.5 * scores[e] / best, meta) for e in ranked]

    # -- with a model: plan → retrieve → decide -----------------------------------------------------

    async def _guided(self, model: CompletionModel, query: str, probe: Probe) -> list[RetrievalResult]:
        (ranked, expansion), plan = await concurrently(self._search.local(query, probe), self._plan(model, query))
        rankings = [ranked]
        asked: list[str] = []
        pending = list(plan)
        for step in range(2, self._research.max_steps + 1):
            if not pending:
                break
            asked.append(pending.pop(0))
            rankings.append(await self._sub_question(asked[-1], step))
            if step == self._research.max_steps:
                break
            decision = await self._decide(model, query, asked, rankings)
            if decision.kind == "finish":
                break
            if decision.kind == "revise":
                pending = list(decision.sub_questions)
            elif decision.next_question:
                pending.insert(0, decision.next_question)
        top = _fused(rankings)[: self._search.top_k]
        assembler = self._search.assembler
        entities, relations = await assembler.entities_and_relations(top, expansion)
        communities = assembler.local_communities(query, probe.seeds, expansion)
        return assembler.chunks(top) + entities + relations + assembler.communities(communities, "local")

    async def _sub_question(self, question: str, step: int) -> list[RankedChunk]:
        probe = await self._search.probe(question)
        ranked, _ = await self._search.local(question, probe)
        return [RankedChunk(c.hit, c.score, c.metadata | {"step": step, "sub_question": question}) for c in ranked]

    async def _ask(self, model: CompletionModel, system: str, user: str) -> dict[str, Any]:
        try:
            async with asyncio.timeout(self._research.model_timeout_s):
                answer = await model.complete([Message(Role.SYSTEM, system), Message(Role.USER, user)])
        except MODEL_FAILURES as error:
            raise _ModelUnhelpful(str(error) or type(error).__name__) from error
        parsed = parse_json_object(answer)
        if parsed is None:
            raise _ModelUnhelpful("no JSON object in the answer")
        return parsed

    async def _plan(self, model: CompletionModel, query: str) -> list[str]:
        most = self._research.max_steps - 1  # step 1 retrieves the question itself
        plan = string_list((await self._ask(model, PLAN_PROMPT.format(steps=most), query)).get("sub_questions"), most)
        if not plan:
            raise _ModelUnhelpful("empty plan")
        return plan

    async def _decide(
        self, model: CompletionModel, query: str, asked: Sequence[str], rankings: Sequence[Sequence[RankedChunk]]
    ) -> _Decision:
        raw = await self._ask(model, DECIDE_PROMPT, _decision_prompt(query, asked, rankings))
        kind = str(raw.get("decision", "")).strip().lower()
        if kind not in ("continue", "revise", "finish"):
            raise _ModelUnhelpful(f"unknown decision {kind!r}")
        next_question = raw.get("next_question")
        return _Decision(
            kind,
            next_question.strip() if isinstance(next_question, str) else "",
            tuple(string_list(raw.get("sub_questions"), self._research.max_steps - 1)),
        )


def _decision_prompt(query: str, asked: Sequence[str], rankings: Sequence[Sequence[RankedChunk]]) -> str:
    """The question, what was searched and the best few passages of each search, kept short."""
    lines = [f"Question: {query}", "Searched so far:"]
    for question, ranked in zip(asked, rankings[1:], strict=False):
        lines.append(f"- {question}")
        lines.extend(f"  [{c.hit.title}] {' '.join(c.hit.text.split())[:300]}" for c in ranked[:3])
    return "\n".join(lines)


def _merged(first: Sequence[RankedChunk], walked: Sequence[RankedChunk], confidence: float) -> list[RankedChunk]:
    """Step 1's ranking and the walk's fused (RRF): the walk's chunks carry the step-1 metadata too.
    A walk from hub seeds wanders over half the KB, so it weighs as much as the seeds are specific."""
    return _fused([walked, first], weights=(confidence, 1.0))


def _fused(rankings: Sequence[Sequence[RankedChunk]], weights: Sequence[float] | None = None) -> list[RankedChunk]:
    """Rankings fused by RRF; each chunk keeps the metadata of the first ranking holding it."""
    chunks: dict[str, RankedChunk] = {}
    for ranked in rankings:
        for chunk in ranked:
            chunks.setdefault(chunk.hit.chunk_id, chunk)
    fused = reciprocal_rank_fusion([[c.hit.chunk_id for c in ranked] for ranked in rankings], weights=weights)
    ranked = [RankedChunk(chunks[f.item_id].hit, f.score, chunks[f.item_id].metadata) for f in fused]
    return spread_over_groups(ranked, lambda c: c.hit.doc_id)
