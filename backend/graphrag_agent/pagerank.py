"""Personalised PageRank by power iteration over a small weighted graph, in numpy.

Meant for local graphs of at most a few thousand nodes built per query (as HippoRAG ranks passages
by PageRank seeded with the question's entities). Edges are undirected; a node's mass goes to its
neighbours in proportion to edge weight. Mass on nodes without edges is redistributed like the
restart mass, by the personalisation, so the scores always sum to 1.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def personalised_pagerank(
    node_count: int,
    edges: Mapping[tuple[int, int], float],
    personalisation: Mapping[int, float],
    damping: float = 0.5,
    iterations: int = 50,
    tolerance: float = 1e-9,
) -> FloatArray:
    """Stationary scores of a walk that follows an edge with probability `damping`, else restarts.

    `edges` maps (node, node) to a positive weight (each unordered pair once); `personalisation`
    maps nodes to non-negative restart weights, normalised here. Stops after `iterations` rounds or
    when the scores move less than `tolerance` (L1).
    """
    if not 0.0 <= damping < 1.0:
        raise ValueError("damping must be in [0, 1)")
    restart = _restart_vector(node_count, personalisation)
    if node_count == 0 or restart.sum() == 0:
        return np.zeros(node_count)
    sources, targets, shares, dangling = _transitions(node_count, edges)
    scores = restart.copy()
    for _ in range(iterations):
        spread = np.bincount(targets, weights=scores[sources] * shares, minlength=node_count)
        updated = (1.0 - damping) * restart + damping * (spread + scores[dangling].sum() * restart)
        converged = float(np.abs(updated - scores).sum()) < tolerance
        scores = updated
        if converged:
            break
    return scores


def _restart_vector(node_count: int, personalisation: Mapping[int, float]) -> FloatArray:
    restart = np.zeros(node_count)
    for node, weight in personalisation.items():
        restart[node] += max(0.0, weight)
    total = restart.sum()
    return restart / total if total > 0 else restart


def _transitions(
    node_count: int, edges: Mapping[tuple[int, int], float]
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], FloatArray, npt.NDArray[np.bool_]]:
    """Both directions of every edge, with the share of its source's mass each carries."""
    pairs = np.array(list(edges), dtype=np.intp).reshape(-1, 2)
    weights = np.array(list(edges.values()), dtype=np.float64)
    sources = np.concatenate([pairs[:, 0], pairs[:, 1]])
    targets = np.concatenate([pairs[:, 1], pairs[:, 0]])
    both = np.concatenate([weights, weights])
    out = np.bincount(sources, weights=both, minlength=node_count)
    shares = both / out[sources] if len(sources) else both
    return sources, targets, shares, out == 0
