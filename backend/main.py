"""ASGI entry point: `uvicorn backend.main:build_app --factory` (settings are read at start, not at import)."""

from __future__ import annotations

from fastapi import FastAPI

from backend.bootstrap import open_services
from backend.infrastructure.config.settings import Settings
from backend.infrastructure.logging import configure_logging
from backend.server.app import create_app
from backend.server.config import ServerConfig


def server_config(settings: Settings) -> ServerConfig:
    return ServerConfig(
        auth_mode=settings.auth_mode.value,
        api_keys=settings.api_key_map(),
        sse_heartbeat_s=settings.sse_heartbeat_s,
        debug_level=settings.debug_level,
        max_body_bytes=settings.max_body_bytes,
        max_upload_bytes=settings.max_upload_bytes,
        admin_users=settings.admin_user_ids(),
    )


def known_secrets(settings: Settings) -> list[str]:
    """Secret values to mask in logs."""
    values = [
        settings.llm_api_key.get_secret_value(),
        settings.embedding_api_key.get_secret_value(),
        settings.postgres_password.get_secret_value(),
        settings.neo4j_password.get_secret_value(),
        *settings.api_key_map(),
    ]
    if settings.postgres_dsn is not None:
        values.append(settings.postgres_dsn.get_secret_value())
    return [value for value in values if value]


def build_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    configure_logging(settings.log_level, known_secrets(settings))
    return create_app(lambda: open_services(settings), server_config(settings))
