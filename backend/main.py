"""ASGI entry point: `uvicorn backend.main:build_app --factory` (settings are read at start, not at import)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI

from backend.application.services import ServiceContainer
from backend.bootstrap import open_services
from backend.infrastructure.config.settings import Settings
from backend.infrastructure.logging import configure_logging
from backend.server.app import create_app
from backend.server.config import ServerConfig
from backend.worker import worker_main


def server_config(settings: Settings) -> ServerConfig:
    auth, server = settings.auth, settings.server
    return ServerConfig(
        auth_mode=auth.mode.value,
        api_keys=auth.api_key_map(),
        sse_heartbeat_s=server.sse_heartbeat_s,
        debug_level=settings.chat.debug_level,
        max_body_bytes=server.max_body_bytes,
        max_upload_bytes=server.max_upload_bytes,
        max_message_chars=settings.chat.max_message_chars,
        admin_users=auth.admin_user_ids(),
        rate_limit_per_minute=auth.effective_rate_limit_per_minute(),
        rate_limit_burst=auth.rate_limit_burst,
    )


@dataclass
class RunningServices:
    """The app's services while its lifespan runs, for the serving process (it stops the streams at shutdown)."""

    container: ServiceContainer | None = None


def build_app(settings: Settings | None = None, running: RunningServices | None = None) -> FastAPI:
    settings = settings or Settings()
    configure_logging(settings.server.log_level, settings.known_secrets())
    app_settings = settings

    @asynccontextmanager
    async def services() -> AsyncIterator[ServiceContainer]:
        async with open_services(app_settings, worker_main) as container:
            if running is not None:
                running.container = container
            try:
                yield container
            finally:
                if running is not None:
                    running.container = None

    return create_app(services, server_config(settings))
