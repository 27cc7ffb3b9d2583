"""SharedRuns: concurrent callers share runs, each gets its own result, failures and cancellations stay contained."""

import asyncio
import contextvars
from collections.abc import Sequence

import pytest

from backend.infrastructure.routing.batches import SharedRuns


class Recorder:
    """A run that squares its items after yielding once, and remembers each run's items."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.runs: list[list[int]] = []
        self.fail_on = fail_on

    async def __call__(self, items: Sequence[int]) -> list[int]:
        self.runs.append(list(items))
        await asyncio.sleep(0)
        if self.fail_on in items:
            raise ValueError(f"cannot take {self.fail_on}")
        return [item * item for item in items]


async def test_a_lone_caller_gets_a_run_of_its_own() -> None:
    run = Recorder()
    shared = SharedRuns(run)
    assert await shared.submit(7) == 49
    assert run.runs == [[7]] and shared.runs == 1


async def test_concurrent_callers_share_runs_and_each_gets_its_own_result() -> None:
    run = Recorder()
    shared = SharedRuns(run)
    results = await asyncio.gather(*(shared.submit(i) for i in range(40)))
    assert results == [i * i for i in range(40)]
    # The first run starts with whatever was waiting by then; everything else waits for the next one.
    assert sorted(item for batch in run.runs for item in batch) == list(range(40))
    assert len(run.runs) < 40 and shared.runs == len(run.runs)


async def test_a_run_never_takes_more_than_max_run_items() -> None:
    run = Recorder()
    shared = SharedRuns(run, max_run=8)
    await asyncio.gather(*(shared.submit(i) for i in range(30)))
    assert max(len(batch) for batch in run.runs) <= 8
    assert sum(len(batch) for batch in run.runs) == 30


async def test_a_failed_run_fails_its_callers_only() -> None:
    run = Recorder(fail_on=3)
    shared = SharedRuns(run, max_run=4)
    outcomes = await asyncio.gather(*(shared.submit(i) for i in range(8)), return_exceptions=True)
    failed_run = next(batch for batch in run.runs if 3 in batch)
    for item, outcome in zip(range(8), outcomes, strict=True):
        if item in failed_run:
            assert isinstance(outcome, ValueError)
        else:
            assert outcome == item * item
    assert await shared.submit(5) == 25  # the next run is unaffected


async def test_a_cancelled_caller_drops_out_and_the_others_are_served() -> None:
    run = Recorder()
    shared = SharedRuns(run)
    first = asyncio.create_task(shared.submit(1))
    await asyncio.sleep(0)  # the first run has started; what is submitted now waits for the next
    leaving = asyncio.create_task(shared.submit(2))
    staying = asyncio.create_task(shared.submit(3))
    await asyncio.sleep(0)
    leaving.cancel()
    assert await first == 1 and await staying == 9
    with pytest.raises(asyncio.CancelledError):
        await leaving
    assert [2] not in run.runs and all(2 not in batch for batch in run.runs[1:])


async def test_a_run_returning_the_wrong_number_of_results_is_an_error() -> None:
    async def short(items: Sequence[int]) -> list[int]:
        return []

    with pytest.raises(RuntimeError, match="0 results for 1 items"):
        await SharedRuns(short).submit(1)


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


async def test_a_run_does_not_see_the_context_of_the_caller_that_started_it() -> None:
    seen: list[str] = []

    async def run(items: Sequence[int]) -> list[int]:
        seen.append(REQUEST_ID.get())
        return list(items)

    REQUEST_ID.set("request-a")
    assert await SharedRuns(run).submit(1) == 1
    assert seen == ["none"]


def test_runs_work_across_event_loops() -> None:
    shared = SharedRuns(Recorder())
    assert asyncio.run(shared.submit(2)) == 4
    assert asyncio.run(shared.submit(3)) == 9  # a second loop (as each test has its own) is served too


def test_max_run_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        SharedRuns(Recorder(), max_run=0)
