"""RagManager: run a plan's workers on pooled agents concurrently, aggregate their evidence."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass

from backend.application.ports.agents import AgentPool
from backend.application.ports.generation import GenerationRequest
from backend.application.ports.retrieval import RetrievalOutcome
from backend.application.rag.aggregation import aggregate
from backend.domain.errors import GraphRagError, RetrievalFailed
from backend.domain.retrieval import AgentRun, RetrievalResult
from backend.domain.worker import Worker

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RetrievalLimits:
    agent_timeout_s: float = 20.0
    context_token_budget: int = 3000
    max_evidence: int = 8


class RagManager:
    """Retrieval for a turn (the stream executor generates from the evidence) and for a KB's retrieve endpoint."""

    def __init__(self, pool: AgentPool, limits: RetrievalLimits) -> None:
        self._pool = pool
        self._limits = limits

    async def iter_runs(self, request: GenerationRequest) -> AsyncGenerator[AgentRun, None]:
        """Yield each agent's run as it completes. Leaving early cancels the agents still running."""
        thread_id = request.context.thread_id
        tasks = [
            asyncio.create_task(self._run_one(spec.worker, request.search_query, thread_id)) for spec in request.plan
        ]
        try:
            for next_done in asyncio.as_completed(tasks):
                yield await next_done
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _run_one(self, worker: Worker, query: str, thread_id: str) -> AgentRun:
        started = time.perf_counter()
        worker_name = worker.name
        try:
            agent = await self._pool.get_agent(worker)
            async with asyncio.timeout(self._limits.agent_timeout_s):
                trace = await agent.retrieve_with_trace(query, thread_id)
            results = tuple(RetrievalResult.from_dict(item) for item in trace["retrieval_results"])
            return AgentRun(
                worker.agent_type,
                worker_name,
                results,
                trace["context"],
                dict(trace["reference"]),
                _elapsed_ms(started),
            )
        except TimeoutError:
            message = f"{worker.agent_type} timed out after {self._limits.agent_timeout_s:g}s"
            logger.warning("retrieval %s (thread %s): %s", worker_name, thread_id, message)
            return AgentRun(worker.agent_type, worker_name, duration_ms=_elapsed_ms(started), error=message)
        except GraphRagError as error:
            # A run's error reaches clients (progress events, AG-UI tool results): its cause goes to the log.
            logger.warning("retrieval %s (thread %s) failed: %s", worker_name, thread_id, error.message)
            message = f"{worker.agent_type} failed: {error.public_message}"
            return AgentRun(worker.agent_type, worker_name, duration_ms=_elapsed_ms(started), error=message)
        except Exception:
            logger.exception("retrieval %s (thread %s) crashed", worker_name, thread_id)
            message = f"{worker.agent_type} failed: {GraphRagError.public_text}"
            return AgentRun(worker.agent_type, worker_name, duration_ms=_elapsed_ms(started), error=message)

    def aggregate(self, runs: Sequence[AgentRun]) -> list[RetrievalResult]:
        if runs and not any(run.ok for run in runs):
            raise RetrievalFailed("retrieval failed: " + "; ".join(run.error or "" for run in runs))
        return aggregate(runs, self._limits.context_token_budget, self._limits.max_evidence)

    @property
    def available_agent_types(self) -> tuple[str, ...]:
        return self._pool.available_agent_types

    async def retrieve(self, worker: Worker, query: str, thread_id: str) -> RetrievalOutcome:
        """One agent's evidence, without generation (implements the `Retriever` port)."""
        run = await self._run_one(worker, query, thread_id)
        if run.error is not None:
            raise RetrievalFailed(run.error)
        return RetrievalOutcome(run.agent_type, run.worker_name, run.results, run.reference, run.duration_ms)


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
