"""Native thread pools sized for a server that runs many small numeric calls at once.

The embedded store's vector search is one matrix-vector product per call, made from several reader threads at
once while the event loop scores text. A multi-threaded BLAS splits each of those small products over threads
of its own, which then wait for (and spin against) the readers and the event loop on the same few cores, so
graph agents over a large KB answer sooner with BLAS on one thread (benchmarks/REPORT.md, retrieval latency).
The default encoder (onnxruntime) keeps its own pool, so indexing speed is unchanged; only the numpy engine (the
fallback without onnxruntime) embeds on one core.

The limit is process-wide: it is taken when a service opens and given back when it closes.
"""

from __future__ import annotations

from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]


def single_threaded_blas() -> threadpool_limits:
    """Keep BLAS on the calling thread until the returned context exits (it restores the previous size)."""
    return threadpool_limits(limits=1, user_api="blas")
