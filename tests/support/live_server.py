"""The real application served by uvicorn on a free loopback port, in a background thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from backend.infrastructure.config.settings import Settings
from backend.main import build_app

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_REGISTRY = ROOT / "config" / "kb_registry.toml"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def make_settings(data_dir: Path, **overrides: Any) -> Settings:
    """Settings for tests: explicit values win over the developer's environment and .env."""
    values: dict[str, Any] = {
        "DATA_DIR": data_dir,
        "KB_REGISTRY_PATH": SAMPLE_REGISTRY,
        "AUTH_MODE": "none",
        "CONVERSATION_STORE": "sqlite",
        "GRAPH_STORE": "embedded",
        "EXTRACTOR": "offline",
        "COMMUNITY_REFRESH_DELAY_S": 0.1,
        "LLM_BASE_URL": "",
        "LLM_MODEL": "",
        "LOG_LEVEL": "WARNING",
    }
    values.update(overrides)
    return Settings.load(env_file=None, **values)


def llm_settings(llm: Any) -> dict[str, Any]:
    """Settings that point the server at a scripted model server (tests/support/scripted_llm.py): no retries,
    a short stall timeout, so failure tests are quick."""
    return {
        "LLM_BASE_URL": llm.base_url,
        "LLM_MODEL": "scripted-model",
        "LLM_API_KEY": "test-key",
        "LLM_STREAM_IDLE_TIMEOUT_S": 2,
        "LLM_MAX_RETRIES": 0,
    }


class LiveServer:
    def __init__(self, settings: Settings) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            build_app(settings),
            host="127.0.0.1",
            port=self.port,
            log_config=None,
            lifespan="on",
            timeout_graceful_shutdown=5,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name=f"live-server-{self.port}", daemon=True)

    def start(self) -> None:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=15)
        if self._thread.is_alive():
            raise RuntimeError("the server did not stop")


@contextmanager
def live_server(settings: Settings) -> Iterator[LiveServer]:
    server = LiveServer(settings)
    server.start()
    try:
        yield server
    finally:
        server.stop()
