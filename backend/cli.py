"""Command line: `python -m backend serve | ingest | ingest-registry | kbs`."""

from __future__ import annotations

import asyncio
import ipaddress
from pathlib import Path
from typing import Annotated

import typer
import uvicorn
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from backend.application.ingestion.ingest_service import IngestionService
from backend.application.ports.ingestion import IndexReport
from backend.bootstrap import open_ingestion
from backend.domain.errors import GraphRagError
from backend.infrastructure.config.settings import AuthMode, Settings
from backend.infrastructure.knowledge_bases.toml_registry import KnowledgeBaseRegistry
from backend.infrastructure.logging import configure_logging
from backend.main import build_app, known_secrets

app = typer.Typer(help="GraphRAG Router→Worker backend", no_args_is_help=True, add_completion=False)
console = Console(stderr=True)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="bind address (default HOST or 127.0.0.1)")] = None,
    port: Annotated[int | None, typer.Option(help="port (default PORT or 8000)")] = None,
    allow_insecure: Annotated[bool, typer.Option(help="allow AUTH_MODE=none on a non-loopback address")] = False,
) -> None:
    """Serve the HTTP API."""
    settings = Settings()
    bind_host = host or settings.host
    if settings.auth_mode is AuthMode.NONE and not _is_loopback(bind_host) and not allow_insecure:
        console.print(f"[red]AUTH_MODE=none serves every user's history to anyone who can reach {bind_host}.[/red]")
        console.print("Bind to 127.0.0.1, set API_KEYS and AUTH_MODE=api_key, or pass --allow-insecure.")
        raise typer.Exit(2)
    if settings.auth_mode is AuthMode.API_KEY and not settings.api_key_map():
        console.print('[red]AUTH_MODE=api_key needs API_KEYS ("key=user,key2=user2").[/red]')
        raise typer.Exit(2)
    uvicorn.run(
        build_app(settings), host=bind_host, port=port or settings.port, log_config=None, timeout_graceful_shutdown=10
    )


async def _ingest(service: IngestionService, kb_prefix: str, paths: list[Path]) -> IndexReport:
    documents = service.load_files(paths)
    with Progress(
        TextColumn(f"[bold]{kb_prefix}[/bold]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=console,
    ) as progress:
        task = progress.add_task("", total=len(documents))

        def advance(done: int, total: int, title: str) -> None:
            progress.update(task, completed=done, total=total, description=title[:40])

        return await service.ingest(kb_prefix, documents, advance)


def _print_report(kb_prefix: str, report: IndexReport) -> None:
    console.print(
        f"{kb_prefix}: {report.documents_added} added, {report.documents_unchanged} unchanged, "
        f"{report.chunks_written} chunks written"
    )


async def _run_ingest(settings: Settings, jobs: list[tuple[str, list[Path]]]) -> None:
    async with open_ingestion(settings) as service:
        for kb_prefix, paths in jobs:
            _print_report(kb_prefix, await _ingest(service, kb_prefix, paths))


def _run(settings: Settings, jobs: list[tuple[str, list[Path]]]) -> None:
    configure_logging(settings.log_level, known_secrets(settings))
    try:
        asyncio.run(_run_ingest(settings, jobs))
    except GraphRagError as error:
        console.print(f"[red]{error.message}[/red]")
        raise typer.Exit(1) from error


@app.command()
def ingest(
    kb_prefix: Annotated[str, typer.Argument(help="knowledge base (from the KB registry)")],
    paths: Annotated[list[Path], typer.Argument(help="files or directories (.txt, .md)")],
) -> None:
    """Chunk, embed and store documents in a knowledge base (unchanged documents are skipped)."""
    _run(Settings(), [(kb_prefix, paths)])


@app.command("ingest-registry")
def ingest_registry() -> None:
    """Ingest the `sources` of every KB in the registry (what scripts/run.sh does)."""
    settings = Settings()
    registry = KnowledgeBaseRegistry.from_file(settings.kb_registry_path)
    jobs = [(kb.kb_prefix, [Path(source) for source in kb.sources]) for kb in registry.list() if kb.sources]
    _run(settings, jobs)


@app.command()
def kbs() -> None:
    """List the configured knowledge bases."""
    registry = KnowledgeBaseRegistry.from_file(Settings().kb_registry_path)
    table = Table("kb_prefix", "default agent", "language", "description")
    for kb in registry.list():
        table.add_row(kb.kb_prefix, kb.default_agent, kb.language, kb.description)
    Console().print(table)
