"""`python -m backend serve` as a user starts it: it says where it serves only once it answers there."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.support.live_server import SAMPLE_REGISTRY
from tests.support.serve_process import ServeProcess


def test_serve_says_serving_on_once_its_startup_is_over_and_the_address_answers(data_dir: Path, tmp_path: Path) -> None:
    env = {"DATA_DIR": str(data_dir), "KB_REGISTRY_PATH": str(SAMPLE_REGISTRY), "AUTH_MODE": "none"}
    with ServeProcess(env, tmp_path) as server:
        assert httpx.get(f"{server.base_url}/health", timeout=5).status_code == 200
        lines = server.log().splitlines()
    said = [n for n, line in enumerate(lines) if "serving on" in line]
    started = [n for n, line in enumerate(lines) if "Application startup complete" in line]
    assert len(said) == 1 and started and said[0] > started[0]
    assert f"serving on {server.base_url} " in lines[said[0]]
