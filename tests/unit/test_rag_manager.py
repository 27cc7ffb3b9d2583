"""RagManager and the agent pool: fan-out, timeouts, dedup, cancellation, pooling."""

import asyncio

import pytest

from backend.application.ports.generation import GenerationRequest
from backend.application.rag.rag_manager import RagManager, RetrievalLimits
from backend.domain.context import RequestContext
from backend.domain.errors import RetrievalFailed
from backend.domain.knowledge_base import KnowledgeBase
from backend.domain.retrieval import AgentRun, RagRunSpec, RetrievalResult
from backend.domain.worker import Worker
from backend.infrastructure.agents.rag_factory.builders import AgentResources
from backend.infrastructure.agents.rag_factory.manager import RAGAgentManager
from tests.support.fakes import FakeAgent, evidence

KBS = {"kb1": KnowledgeBase("kb1", default_agent="naive_rag_agent"), "kb2": KnowledgeBase("kb2")}


def make_manager(agents: dict[str, FakeAgent], timeout_s: float = 1.0, max_agents: int = 64) -> RagManager:
    builders = {agent_type: (lambda kb, res, a=agent: a) for agent_type, agent in agents.items()}
    pool = RAGAgentManager(builders, AgentResources(None, None), max_agents)  # type: ignore[arg-type]
    return RagManager(pool, RetrievalLimits(agent_timeout_s=timeout_s))


def request(*specs: RagRunSpec, kb: str = "kb1") -> GenerationRequest:
    return GenerationRequest(RequestContext("req", "user", "session-1"), "question?", kb, tuple(specs))


def spec(agent_type: str, kb: str = "kb1") -> RagRunSpec:
    return RagRunSpec(Worker(KBS[kb], agent_type))


async def retrieve_plan(manager: RagManager, plan: GenerationRequest) -> tuple[list[AgentRun], list[RetrievalResult]]:
    """Every run of the plan and their aggregated evidence, as the stream executor takes them."""
    runs = [run async for run in manager.iter_runs(plan)]
    return runs, manager.aggregate(runs)


async def test_agents_run_concurrently_and_results_are_merged() -> None:
    naive = FakeAgent("naive_rag_agent", [evidence("a", "alpha", 0.5), evidence("b", "beta", 0.9)], delay_s=0.2)
    graph = FakeAgent("graph_agent", [evidence("a", "alpha", 0.8)], delay_s=0.2)
    manager = make_manager({"naive_rag_agent": naive, "graph_agent": graph})
    started = asyncio.get_running_loop().time()
    runs, merged = await retrieve_plan(manager, request(spec("naive_rag_agent"), spec("graph_agent")))
    elapsed = asyncio.get_running_loop().time() - started
    assert elapsed < 0.35  # two 0.2 s agents in parallel, not 0.4 s in series
    assert {run.agent_type for run in runs} == {"naive_rag_agent", "graph_agent"}
    assert [r.result_id for r in merged] == ["b", "a"]
    assert merged[1].score == 0.8
    assert naive.calls == [("question?", "session-1")]  # thread_id is the session id


async def test_a_slow_agent_times_out_without_failing_the_others() -> None:
    slow = FakeAgent("graph_agent", [evidence("s", "slow")], delay_s=5)
    fast = FakeAgent("naive_rag_agent", [evidence("f", "fast")])
    manager = make_manager({"graph_agent": slow, "naive_rag_agent": fast}, timeout_s=0.1)
    runs, merged = await retrieve_plan(manager, request(spec("graph_agent"), spec("naive_rag_agent")))
    by_type = {run.agent_type: run for run in runs}
    assert by_type["graph_agent"].error == "graph_agent timed out after 0.1s"
    assert by_type["naive_rag_agent"].ok
    assert [r.result_id for r in merged] == ["f"]
    assert slow.cancelled == 1 and slow.finished == 0


async def test_every_agent_failing_is_a_retrieval_error() -> None:
    broken = FakeAgent("naive_rag_agent", fail=RuntimeError("index corrupt"))
    manager = make_manager({"naive_rag_agent": broken})
    with pytest.raises(RetrievalFailed, match="naive_rag_agent failed") as raised:
        await retrieve_plan(manager, request(spec("naive_rag_agent")))
    # A run's error reaches clients (progress events): the crash's class and text stay in the log.
    assert "RuntimeError" not in raised.value.message and "index corrupt" not in raised.value.message


async def test_cancelling_the_request_cancels_running_agents() -> None:
    slow = FakeAgent("naive_rag_agent", delay_s=10)
    manager = make_manager({"naive_rag_agent": slow})
    task = asyncio.create_task(retrieve_plan(manager, request(spec("naive_rag_agent"))))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert slow.cancelled == 1
    assert slow.finished == 0
    assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]


async def test_leaving_iteration_early_cancels_the_rest() -> None:
    fast = FakeAgent("naive_rag_agent", [evidence("f", "fast")])
    slow = FakeAgent("graph_agent", delay_s=10)
    manager = make_manager({"naive_rag_agent": fast, "graph_agent": slow})
    runs = manager.iter_runs(request(spec("naive_rag_agent"), spec("graph_agent")))
    first = await anext(runs)
    await runs.aclose()
    assert first.agent_type == "naive_rag_agent"
    assert slow.cancelled == 1


async def test_pool_reuses_one_agent_per_key_and_is_bounded() -> None:
    built: list[str] = []

    def build(kb: KnowledgeBase, resources: AgentResources) -> FakeAgent:
        built.append(kb.kb_prefix)
        return FakeAgent()

    pool = RAGAgentManager({"naive_rag_agent": build}, AgentResources(None, None), max_agents=1)  # type: ignore[arg-type]
    first = await asyncio.gather(*(pool.get_agent(Worker(KBS["kb1"], "naive_rag_agent")) for _ in range(20)))
    assert len({id(agent) for agent in first}) == 1 and built == ["kb1"]
    await pool.get_agent(Worker(KBS["kb2"], "naive_rag_agent"))
    assert len(pool) == 1  # kb1's agent was evicted
    await pool.get_agent(Worker(KBS["kb1"], "naive_rag_agent"))
    assert built == ["kb1", "kb2", "kb1"]
