"""The FastAPI application factory. It wires no adapters: it receives the opened services."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import FastAPI

from backend.application.services import ServiceContainer
from backend.server import api_description, api_docs, web
from backend.server.api import agui, health, openai_facade
from backend.server.api.rest.v1 import chat, feedback, history, jobs, kb_views, knowledge_bases
from backend.server.body_limit import BodySizeLimit
from backend.server.config import ServerConfig
from backend.server.errors import install_error_handlers
from backend.server.head import HeadAsGet
from backend.server.rate_limit import RateLimit
from backend.server.text_guard import TextGuard

OpenServices = Callable[[], AbstractAsyncContextManager[ServiceContainer]]


def create_app(open_services: OpenServices, config: ServerConfig) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        async with open_services() as services:
            # Lifespan state is copied into each request's `request.state`; nothing is global.
            yield {"services": services}

    app = FastAPI(
        title="GraphRAG Router→Worker backend",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # api_docs serves /docs with local assets
        redoc_url=None,
    )
    # Middlewares run in the reverse order of adding: HEAD as GET, rate limit, body size, then the body's text.
    app.add_middleware(TextGuard)
    app.add_middleware(BodySizeLimit, limit_for=config.limit_for)
    if config.rate_limit_per_minute > 0:
        # Before the body checks: a refused request costs no body read and no work.
        app.add_middleware(RateLimit, config=config)
    app.add_middleware(HeadAsGet)  # outermost: every layer, the rate limit and the routes too, sees its GET
    app.state.server_config = config
    install_error_handlers(app)
    for module in (chat, history, feedback, knowledge_bases, kb_views, jobs, health, agui, openai_facade, web):
        app.include_router(module.router)
    api_docs.install(app)
    api_description.install(app, config)
    return app
