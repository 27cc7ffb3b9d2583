"""Command line: `python -m backend serve | worker | ingest | ingest-registry | kbs | create-kb | documents |
delete`."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
import socket
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Annotated, TypeVar

import typer
import uvicorn
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from sse_starlette.sse import AppStatus

from backend.application.knowledge.knowledge_service import KnowledgeService
from backend.bootstrap import Ingestion, open_ingestion, open_knowledge_service
from backend.domain.agent_types import DEFAULT_AGENT_TYPE
from backend.domain.errors import GraphRagError
from backend.domain.jobs import IngestionJob
from backend.domain.knowledge_base import KB_PREFIX_PATTERN, KnowledgeBase
from backend.infrastructure.config.settings import AuthMode, Settings
from backend.infrastructure.logging import configure_logging
from backend.main import RunningServices, build_app
from backend.server.read_timeouts import read_timeout_protocol
from backend.worker import run_worker

# No markup in help texts: "[a-z0-9_]" in a pattern would be read as a style tag and vanish.
app = typer.Typer(
    help="GraphRAG Router→Worker backend", no_args_is_help=True, add_completion=False, rich_markup_mode=None
)
console = Console(stderr=True)
logger = logging.getLogger(__name__)
T = TypeVar("T")
S = TypeVar("S")

# After the grace period: time for the stopped streams to send `error` and `done` and store their answers
# before uvicorn cancels whatever is left.
WIND_DOWN_S = 3.0
CLI_USER = "cli"  # who created the jobs the CLI submits
PROGRESS_POLL_S = 0.2


class GracefulServer(uvicorn.Server):
    """uvicorn's server, with a shutdown that lets chat streams finish.

    On SIGTERM or SIGINT uvicorn stops accepting connections and waits for the open ones. Streams in flight
    get `grace_s` to finish; then the stream handler ends those still running with `error` and `done` (their
    partial answers stored), and uvicorn's own timeout (`grace_s + WIND_DOWN_S`) is only a backstop. The
    lifespan then drains the answers still being saved and closes the stores.
    """

    def __init__(self, config: uvicorn.Config, running: RunningServices, grace_s: float) -> None:
        super().__init__(config)
        self._running = running
        self._grace_s = grace_s

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:  # the app's startup is over and the socket listens: a browser gets an answer now
            host, port = self.config.host, self.config.port
            if self.servers and self.servers[0].sockets:
                port = self.servers[0].sockets[0].getsockname()[1]  # the one the system chose for port 0
            shown = f"[{host}]" if ":" in host else host
            logger.info("serving on http://%s:%d (the chat page at /ui/, the API at /docs; Ctrl+C stops)", shown, port)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        stop = asyncio.get_running_loop().call_later(self._grace_s, self._stop_streams)
        try:
            await super().shutdown(sockets)
        finally:
            stop.cancel()

    def _stop_streams(self) -> None:
        services = self._running.container
        if services is None:
            return
        stopped = services.stream.stop_streams()
        if stopped:
            logger.warning("shutdown grace period of %g s is over: ending %d stream(s)", self._grace_s, stopped)


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
    bind_host = host or settings.server.host
    if settings.auth.mode is AuthMode.NONE and not _is_loopback(bind_host) and not allow_insecure:
        console.print(f"[red]AUTH_MODE=none serves every user's history to anyone who reaches {bind_host}.[/red]")
        console.print("Bind to 127.0.0.1, set API_KEYS and AUTH_MODE=api_key, or pass --allow-insecure.")
        raise typer.Exit(2)
    if settings.auth.mode is AuthMode.API_KEY and not settings.auth.api_key_map():
        console.print('[red]AUTH_MODE=api_key needs API_KEYS ("key=user,key2=user2").[/red]')
        raise typer.Exit(2)
    # sse-starlette would cancel every stream as soon as the signal arrives, cutting them off mid-answer;
    # GracefulServer ends them instead, after the grace period.
    AppStatus.disable_automatic_graceful_drain()  # type: ignore[no-untyped-call]  # unannotated upstream
    running = RunningServices()
    config = uvicorn.Config(
        build_app(settings, running),
        host=bind_host,
        port=port or settings.server.port,
        log_config=None,
        timeout_graceful_shutdown=math.ceil(settings.server.shutdown_grace_s + WIND_DOWN_S),
        timeout_keep_alive=settings.server.http_keep_alive_s,
        http=read_timeout_protocol(settings.server.http_header_timeout_s, settings.server.http_body_timeout_s),
    )
    server = GracefulServer(config, running, settings.server.shutdown_grace_s)
    server.run()
    if not server.started:
        raise typer.Exit(3)  # what uvicorn.run exits with when the app fails to start


def _with_knowledge(work: Callable[[KnowledgeService], Awaitable[T]]) -> T:
    """Open the KBs, run `work`, close; domain errors become a clear message and exit 1."""
    return _with(open_knowledge_service, work)


def _with_ingestion(work: Callable[[Ingestion], Awaitable[T]]) -> T:
    """`_with_knowledge` with the ingestion jobs and a worker that runs them in this process."""
    return _with(open_ingestion, work)


def _with(opener: Callable[[Settings], AbstractAsyncContextManager[S]], work: Callable[[S], Awaitable[T]]) -> T:
    settings = Settings()
    configure_logging(settings.server.log_level, settings.known_secrets())

    async def run() -> T:
        async with opener(settings) as opened:
            return await work(opened)

    try:
        return asyncio.run(run())
    except GraphRagError as error:
        console.print(f"[red]{error.message}[/red]")
        raise typer.Exit(1) from error


async def _ingest(ingestion: Ingestion, kb_prefix: str, paths: list[Path]) -> IngestionJob | None:
    """The files as one job, run here (other workers on the same data folder may help), followed on its record."""
    documents = ingestion.knowledge.load_files(paths)
    if not documents:
        console.print(f"{kb_prefix}: no supported file with text under {', '.join(map(str, paths))}")
        return None
    job = await ingestion.jobs.submit(kb_prefix, CLI_USER, documents)
    with Progress(
        TextColumn(f"[bold]{kb_prefix}[/bold]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=console,
    ) as progress:
        task = progress.add_task(f"job {job.job_id[:8]}", total=job.total)
        working = asyncio.create_task(ingestion.worker.run(job.job_id, until_idle=True))
        try:
            while not job.status.finished:
                await asyncio.sleep(PROGRESS_POLL_S)
                if working.done() and (failure := working.exception()) is not None:
                    raise failure
                job = await ingestion.jobs.get(job.job_id)
                progress.update(task, completed=job.processed, description=f"job {job.job_id[:8]} {job.status}")
        finally:
            working.cancel()
            await asyncio.gather(working, return_exceptions=True)
    _print_job(job)
    return job


def _print_job(job: IngestionJob) -> None:
    counts = job.counts
    console.print(
        f"{job.kb_prefix}: job {job.job_id} {job.status}: {counts.documents_added} added, "
        f"{counts.documents_unchanged} unchanged, {counts.documents_replaced} replaced, "
        f"{counts.documents_failed} failed; {counts.chunks_written} chunks, "
        f"{counts.entity_mentions} entity and {counts.relation_mentions} relation mentions, "
        f"{counts.model_calls} model calls"
        + (
            f"; {counts.extraction_fallbacks} chunks extracted offline (the model's answer did not parse)"
            if counts.extraction_fallbacks
            else ""
        )
    )
    for failure in job.failures:
        console.print(f"[red]failed: {failure.title} ({failure.source or 'no source'}): {failure.error}[/red]")
    if job.error:
        console.print(f"[red]{job.error}[/red]")


@app.command()
def ingest(
    kb_prefix: Annotated[str, typer.Argument(help="knowledge base")],
    paths: Annotated[list[Path], typer.Argument(help="files or folders (.txt .md .pdf .docx .json .jsonl)")],
) -> None:
    """Chunk, extract, embed and store documents as one ingestion job (unchanged documents are skipped)."""
    _with_ingestion(lambda ingestion: _ingest(ingestion, kb_prefix, paths))


@app.command("ingest-registry")
def ingest_registry() -> None:
    """Ingest the `sources` of every KB in the registry file (what scripts/run.sh does)."""

    async def work(ingestion: Ingestion) -> None:
        for kb in await ingestion.knowledge.list_kbs():
            if kb.sources:
                await _ingest(ingestion, kb.kb_prefix, [Path(source) for source in kb.sources])

    _with_ingestion(work)


@app.command()
def worker() -> None:
    """Take the batches of ingestion jobs and index them until stopped (SIGTERM or Ctrl-C)."""
    run_worker(Settings())


@app.command()
def kbs() -> None:
    """List the knowledge bases (registry file and created ones)."""
    table = Table("kb_prefix", "default agent", "language", "description")
    for kb in _with_knowledge(lambda service: service.list_kbs()):
        table.add_row(kb.kb_prefix, kb.default_agent, kb.language, kb.description)
    Console().print(table)


@app.command("create-kb")
def create_kb(
    kb_prefix: Annotated[str, typer.Argument(help=f"the KB's name, matching {KB_PREFIX_PATTERN.pattern}")],
    description: Annotated[str, typer.Option(help="what the KB covers (used for routing)")] = "",
    keyword: Annotated[list[str] | None, typer.Option(help="a routing keyword (repeat the option)")] = None,
    language: Annotated[str, typer.Option()] = "en",
    default_agent: Annotated[str, typer.Option()] = DEFAULT_AGENT_TYPE,
) -> None:
    """Create a knowledge base (kept in the graph store)."""
    kb = KnowledgeBase(kb_prefix, description, tuple(keyword or ()), language, default_agent)
    _with_knowledge(lambda service: service.create_kb(kb))
    console.print(f"created {kb_prefix}")


@app.command()
def documents(kb_prefix: Annotated[str, typer.Argument()]) -> None:
    """List a knowledge base's documents."""
    table = Table("doc_id", "title", "chunks", "source")
    for document in _with_knowledge(lambda service: service.list_documents(kb_prefix)):
        table.add_row(document.doc_id[:16], document.title, str(document.chunk_count), document.source)
    Console().print(table)


@app.command()
def delete(kb_prefix: Annotated[str, typer.Argument()], doc_id: Annotated[str, typer.Argument()]) -> None:
    """Delete a document and everything only it supported."""
    _with_knowledge(lambda service: service.delete_document(kb_prefix, doc_id))
    console.print(f"deleted {doc_id}")
