"""Hierarchical community detection on the entity graph (SPEC §8), GraphRAG style.

Level 0 is a Leiden partition (weighted modularity) of the whole entity graph. Every community larger
than `max_cluster_size` is partitioned again, on its own subgraph, into the communities of the next
level, recursively; a child names its parent. Entities without relations, and any singleton a
partition leaves, belong to no community.

Leiden is igraph's C implementation: the `leidenalg` package runs the same algorithm more than ten
times slower on graphs of this size. igraph draws its random numbers from a Python generator, which
is seeded here per run, so a given graph and seed always give the same hierarchy, whatever the order
in which nodes and edges were supplied (they are sorted first).
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from backend.domain.graph import EntityGraph

if TYPE_CHECKING:
    import igraph  # type: ignore[import-untyped]
from backend.domain.ids import community_id

DEFAULT_MAX_CLUSTER_SIZE = 10
DEFAULT_SEED = 0x5EED
# Each level is strictly smaller than its parent, but a graph that Leiden peels one entity at a time
# would recurse very deep; no useful hierarchy has this many levels.
MAX_LEVELS = 12
# A stated relation whose weight is unusable (zero, negative, NaN) still links its entities.
_FALLBACK_WEIGHT = 1.0
# igraph's random generator is process-wide: one seeded run at a time.
_RNG_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class CommunityDraft:
    """A detected community before it has a title and summary.

    `entity_ids` are sorted; `internal_weight` sums the weights of the relations between members and
    `internal_edges` counts them (the structural facts that rank a community).
    """

    community_id: str
    level: int
    entity_ids: tuple[str, ...]
    parent_id: str | None
    child_ids: tuple[str, ...]
    internal_weight: float
    internal_edges: int

    @property
    def size(self) -> int:
        return len(self.entity_ids)


@dataclass(frozen=True, slots=True)
class _Cluster:
    vertices: list[int]  # local to the graph that was partitioned
    weight: float
    edges: int


@dataclass(frozen=True, slots=True)
class _Run:
    kb: str
    names: Sequence[str]  # global vertex index → entity id, sorted
    max_cluster_size: int
    resolution: float


def detect_communities(
    kb: str,
    graph: EntityGraph,
    max_cluster_size: int = DEFAULT_MAX_CLUSTER_SIZE,
    seed: int = DEFAULT_SEED,
    resolution: float = 1.0,
) -> list[CommunityDraft]:
    """Every community of every level, ordered by level, then size (largest first), then id.

    The nodes are the ends of `graph.edges` (an entity without relations is in no community anyway);
    edges are undirected, repeated pairs add up, self-loops are ignored.
    """
    if max_cluster_size < 2:
        raise ValueError("max_cluster_size must be at least 2")
    names, edges, weights = _weighted_edges(graph)
    if not edges:
        return []
    whole = _igraph().Graph(n=len(names), edges=edges, edge_attrs={"weight": weights})
    whole.vs["gid"] = list(range(len(names)))
    run = _Run(kb, names, max_cluster_size, resolution)
    with _seeded(seed):
        drafts = _detect(run, whole, _leiden(whole, resolution), level=0, parent_id=None)
    return sorted(drafts, key=lambda d: (d.level, -d.size, d.community_id))


def _weighted_edges(graph: EntityGraph) -> tuple[list[str], list[tuple[int, int]], list[float]]:
    """Sorted node names (entities with at least one relation) and the undirected, merged edges."""
    merged: dict[tuple[str, str], float] = {}
    for source, target, weight in graph.edges:
        if source == target:
            continue
        key = (source, target) if source < target else (target, source)
        usable = weight if math.isfinite(weight) and weight > 0 else _FALLBACK_WEIGHT
        merged[key] = merged.get(key, 0.0) + usable
    names = sorted({name for pair in merged for name in pair})
    index = {name: i for i, name in enumerate(names)}
    pairs = sorted(merged)
    return names, [(index[a], index[b]) for a, b in pairs], [merged[pair] for pair in pairs]


def _igraph() -> ModuleType:
    """igraph, imported on first use: its import loads matplotlib when that is installed, a cost in time and
    memory that a process that never detects communities should not pay at start."""
    import igraph

    module: ModuleType = igraph
    return module


@contextmanager
def _seeded(seed: int) -> Iterator[None]:
    with _RNG_LOCK:
        _igraph().set_random_number_generator(random.Random(seed))
        try:
            yield
        finally:
            _igraph().set_random_number_generator(random)  # igraph's own default


def _detect(
    run: _Run, graph: igraph.Graph, clusters: list[_Cluster], level: int, parent_id: str | None
) -> list[CommunityDraft]:
    gids: list[int] = graph.vs["gid"]
    drafts: list[CommunityDraft] = []
    for cluster in clusters:
        entity_ids = tuple(run.names[i] for i in sorted(gids[v] for v in cluster.vertices))
        own_id = community_id(run.kb, level, entity_ids)
        children = _split(run, graph, cluster, level, own_id)
        drafts.extend(children)
        child_ids = tuple(sorted(d.community_id for d in children if d.level == level + 1))
        drafts.append(CommunityDraft(own_id, level, entity_ids, parent_id, child_ids, cluster.weight, cluster.edges))
    return drafts


def _split(run: _Run, graph: igraph.Graph, cluster: _Cluster, level: int, own_id: str) -> list[CommunityDraft]:
    """The communities below an oversized cluster (none when Leiden cannot split it)."""
    if len(cluster.vertices) <= run.max_cluster_size or level + 1 >= MAX_LEVELS:
        return []
    subgraph = graph.induced_subgraph(sorted(cluster.vertices))
    parts = _leiden(subgraph, run.resolution)
    if len(parts) == 1 and len(parts[0].vertices) == len(cluster.vertices):
        return []  # Leiden keeps it whole: a leaf after all
    return _detect(run, subgraph, parts, level + 1, own_id)


def _leiden(graph: igraph.Graph, resolution: float) -> list[_Cluster]:
    """The non-singleton communities of one Leiden run, with their internal weight and edge count."""
    partition = graph.community_leiden(
        objective_function="modularity", weights="weight", resolution=resolution, n_iterations=2
    )
    membership = np.asarray(partition.membership, dtype=np.int64)
    count = int(membership.max()) + 1 if membership.size else 0
    weight_in, edges_in = _internal_totals(graph, membership, count)
    groups: list[list[int]] = [[] for _ in range(count)]
    for vertex, community in enumerate(membership.tolist()):
        groups[community].append(vertex)
    return [
        _Cluster(group, round(float(weight_in[c]), 6), int(edges_in[c]))
        for c, group in enumerate(groups)
        if len(group) > 1
    ]


def _internal_totals(
    graph: igraph.Graph, membership: npt.NDArray[np.int64], count: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    ends = np.asarray(graph.get_edgelist(), dtype=np.int64).reshape(-1, 2)
    weights = np.asarray(graph.es["weight"], dtype=np.float64)
    first, second = membership[ends[:, 0]], membership[ends[:, 1]]
    inside = first == second
    owner = first[inside]
    weight_in = np.bincount(owner, weights=weights[inside], minlength=count).astype(np.float64)
    edges_in = np.bincount(owner, minlength=count).astype(np.int64)
    return weight_in, edges_in
