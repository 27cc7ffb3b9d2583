"""The composition root keeps BLAS on one thread while the service is open, and gives the old size back on close
(why: backend/infrastructure/native_threads.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from threadpoolctl import threadpool_info, threadpool_limits  # type: ignore[import-untyped]

from backend.bootstrap import open_knowledge_service
from tests.support.live_server import make_settings


def _blas_threads() -> list[int]:
    return [int(pool["num_threads"]) for pool in threadpool_info() if pool["user_api"] == "blas"]


async def test_blas_runs_on_one_thread_while_the_service_is_open(tmp_path: Path) -> None:
    if not _blas_threads():
        pytest.skip("this numpy's BLAS is not one that threadpoolctl can size")
    with threadpool_limits(limits=2, user_api="blas"):  # a known size to come back to, whatever the machine
        before = _blas_threads()
        assert set(before) == {2}
        async with open_knowledge_service(make_settings(tmp_path)):
            assert set(_blas_threads()) == {1}
        assert _blas_threads() == before
