"""Every tuned number of the retrieve-only agents, in one place: one frozen dataclass per agent.

- naive_rag_agent: `NaiveRagSettings`;
- graph_agent, hybrid_agent and deep_research_agent: `GraphSearchSettings`, since all three run the same graph search
  (`graph_agent.GraphSearch`); deep research's own walk is its `research` part;
- `ChunkSearchSettings` (the plain chunk searches, chunk_search.py) and `BridgeSettings` (bridges.py) are parts of
  those, so each agent can have its own.

An agent takes its dataclass as `settings`; a test or an experiment changes one number with `dataclasses.replace`.
The defaults suit all-MiniLM-L6-v2 and an offline-built graph (benchmarks/REPORT.md has what they were chosen on).
fusion_agent ranks by nothing of its own: reciprocal rank fusion with the usual k (fusion.py), and its `other_limit`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ChunkSearchSettings:
    """The plain chunk searches: what they admit as evidence, and how much their rankings weigh."""

    # Calibrated with all-MiniLM-L6-v2 on the sample KB: answers score about 0.35–0.7 against their
    # question, unrelated chunks below about 0.2.
    min_similarity: float = 0.3  # chunk cosine that counts as evidence
    min_term_overlap: float = 0.3  # share of the question's terms a fulltext hit must contain (unless similar)
    coverage_depth: int = 3  # how many of the best fulltext hits say how well the question's words are covered
    # Relevance feedback (Rocchio, on dense vectors): the question's vector moved towards the vectors of its
    # best fulltext hits finds passages that say the same thing in other words ("AC" for "air-conditioner").
    feedback_documents: int = 2  # the best fulltext hits it moves towards
    # Its ranking counts as much as the fulltext and vector rankings together: it agrees with both.
    feedback_weight: float = 1.0
    # A search restricted to some dates looks this many times deeper, then keeps the hits of those dates.
    scoped_depth: int = 10


@dataclass(frozen=True, slots=True)
class NaiveRagSettings:
    """naive_rag_agent: its chunk searches, how deep they go, and the continuations it adds (continuations.py)."""

    chunks: ChunkSearchSettings = ChunkSearchSettings()
    # How many hits each search asks for: deeper than top_k, so fusion has overlap to work with.
    depth_per_result: int = 3  # times top_k
    min_depth: int = 20
    continuation_days: int = 2  # how many days apart two documents of one thread may be dated
    # Below this cosine (all-MiniLM-L6-v2) a chunk does not share the anchor's subject. Most continuations
    # clear it easily; their share of the anchor's score, not this floor, decides how high they rank.
    min_continuation_similarity: float = 0.6

    def search_depth(self, top_k: int) -> int:
        """How many hits each search asks for, for `top_k` results."""
        return max(self.depth_per_result * top_k, self.min_depth)


@dataclass(frozen=True, slots=True)
class BridgeSettings:
    """Bridges (bridges.py): from the documents of the entities a question names to the entities they introduce."""

    min_seed_weight: float = 0.5  # only confidently linked seeds lead anywhere
    seed_chunks: int = 3  # chunks of a seed's own document that are read
    candidates: int = 24  # entities per question whose own documents are looked up
    cue_words: int = 3  # words before a mention that say what it is to the seed ("and directed by")


@dataclass(frozen=True, slots=True)
class ResearchSettings:
    """deep_research_agent's walk: bridge entities and personalised PageRank, or the model's plan."""

    max_steps: int = 3  # retrieval steps, the first included
    frontier: int = 4  # chunks whose entities each step follows
    max_bridges: int = 32  # entities followed per step
    chunks_per_entity: int = 6  # chunks fetched per followed entity
    damping: float = 0.5  # PageRank: probability of following an edge rather than restarting
    iterations: int = 40
    chunk_restart: float = 0.0  # share of the restart mass on the first step's chunks; the rest on the seeds
    min_gain: float = 0.05  # a new chunk must reach this share of the best chunk's score
    home_bonus: float = 1.0  # extra score of a chunk from a followed entity's own document
    model_timeout_s: float = 20.0

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError("max_steps must be at least 1")


@dataclass(frozen=True, slots=True)
class GraphSearchSettings:
    """graph_agent, hybrid_agent and deep_research_agent: local graph search (local_search.py) with its chunk
    searches and bridges, global search over community summaries, and deep research's walk."""

    candidates: int = 30  # depth of every search and of the mention lookup
    chunks: ChunkSearchSettings = ChunkSearchSettings(min_term_overlap=0.5)
    min_entity_similarity: float = 0.5  # entity cosine that makes a (weak) vector seed
    min_name_match: float = 1.0  # share of an entity name's terms the text must contain
    plain_name_weight: float = 0.1  # a name the question writes in ordinary words ("mother") is a weak seed
    max_seeds: int = 6
    relation_candidates: int = 40
    max_neighbours: int = 10
    neighbour_decay: float = 0.5  # a neighbour weighs at most half its seed
    chunks_per_neighbour: int = 4  # chunks fetched for every seed and neighbour besides the most-mentioning
    home_bonus: float = 1.0  # extra weight of an entity in a document titled with its name
    # An entity mentioned in at most this many chunks is specific: a question naming it points at a few passages.
    specific_mentions: int = 3
    entity_limit: int = 4
    relation_limit: int = 4
    community_limit: int = 2
    min_community_similarity: float = 0.3
    bridges: BridgeSettings = BridgeSettings()
    # Bridges name the documents a multi-hop question needs; when found, their ranking leads the fusion.
    bridge_weight: float = 3.0
    research: ResearchSettings = ResearchSettings()
