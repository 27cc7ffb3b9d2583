"""Indexing cost on the podcast corpus: ours offline and with the LLM extractor (0 ms and 200 ms per model
call), and nano-graphrag and LightRAG through the same scripted model; the peers' context queries on 2wiki.

Corpus: podcast/kevin_scott_podcast.zip of the datasets (`$DATASETS_DIR`, else ../shared/datasets beside the
repository; tests/support/datasets.py), 1,669 transcript pieces of 60 episodes (about 1M tokens; consecutive pieces
overlap by about 430 characters, so overlapping text is indexed twice, by every system alike). Pieces are taken
in natural order of their file names (episode by episode, part by part); `--documents N` takes the first N
(default 100; `--quick`: 20). Each piece is one document: title = its file name without ".txt", text = its content
with CRLF made LF.

The model: `benchmarks.extraction_model`, a scripted OpenAI-compatible server in its own process, one process
per run (so its call counts per prompt kind belong to that run). It answers every extraction prompt (ours,
nano-graphrag's, LightRAG's, and their gleaning prompts) in the format that system parses, computed from the
passage in the prompt (capitalised names and recurring topic words as entities, sentence co-occurrence as
relations), community-report prompts with a JSON report, summary prompts with text, after `delay` seconds.

Ours, one worker process per mode (this module with `--worker`; peak RSS = the worker's VmHWM, which includes
the MiniLM weights): Settings built from nothing but GRAPH_STORE=embedded, DATA_DIR (a fresh temp directory),
an empty KB registry, EMBEDDING_PROVIDER=local (MiniLM; its engine, onnxruntime or numpy, is the product's
default choice and is named in the JSON), and per mode
  offline    EXTRACTOR=offline, no model;
  llm_0ms    EXTRACTOR=llm, LLM_BASE_URL = the scripted model at 0 ms per call;
  llm_200ms  the same at 200 ms per call;
everything else at its default (EXTRACTION_CONCURRENCY=4 model calls in flight, CHUNK_TOKENS=200, ...). Wiring
is the product's: `open_knowledge_service(settings)`, then `GraphIndexer.index` over all documents in one call
(what `KnowledgeService.ingest` calls after its 1,000-document request cap), which ends with one community
refresh (in the LLM modes each new community's report is a model call). Reported: wall and CPU time, chunks,
documents, entities, relations, communities (counted in the store), model calls by kind (from the model
process) per chunk, chunks/s, peak RSS, and the split: MiniLM time (chunks, new entity names, community
summaries; timed by shadowing `embed` with a timed pass-through), extraction wall time (from the first
`extract` call in flight to the last one done, per batch), the community refresh, and the rest.

Peers, in the same run, each phase in its own process with the peers' venv (.venv-peers; see
benchmarks/peers/requirements.txt; missing → reported as "not installed" with the install command): index
the first `--peer-documents` podcast pieces (default 50, quick 5: fewer than ours, for the time budget; said
in the JSON), then, in a fresh store, the first `--peer-passages` 2wiki passages (default 100, quick 40) and
the 51 dev questions as local-mode context-only queries (p50/p95, one at a time, once). Each uses its own defaults
(chunk size, gleaning, concurrency: see the runners' docstrings). tiktoken cannot download its files here:
the runners install a word-level stand-in (benchmarks/peers/common.py). Embeddings for the peers: the scripted
model's /v1/embeddings (hashed bag of words, 384 dimensions; nearly free, so compare the peers' wall time with
ours minus its MiniLM time; why not our MiniLM: benchmarks/peers/common.py).

Run:  python -m benchmarks.podcast_indexing [--quick] [--documents N] [--peer-documents N] [--peer-passages N]
                                            [--modes offline,llm_0ms,llm_200ms] [--peers nano_graphrag,lightrag]
Writes benchmarks/results/podcast_indexing.json (`--quick`: podcast_indexing_quick.json) and prints a table.
Run it under `nice -n 19` on a shared machine; compare figures of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backend.application.ports.ingestion import SourceDocument
from backend.bootstrap import open_knowledge_service
from backend.domain.knowledge_base import KnowledgeBase
from backend.graphrag_agent.community_builder import CommunityBuilder
from backend.infrastructure.config.settings import Settings
from benchmarks.graph_indexing import Wiring, clean_env
from benchmarks.graph_probes import RefreshLog, StageClock, cpu_seconds, dig, log, machine, rel, status_kib
from tests.support.datasets import dataset_path

ROOT = Path(__file__).resolve().parent.parent
PODCAST = dataset_path("podcast", "kevin_scott_podcast.zip")
WIKI = dataset_path("2wiki")
RESULTS_DIR = ROOT / "benchmarks" / "results"
PEERS_PYTHON = ROOT / ".venv-peers" / "bin" / "python"
PEERS_INSTALL = "python3.11 -m venv .venv-peers && .venv-peers/bin/pip install -r benchmarks/peers/requirements.txt"
KB_PREFIX = "bench_podcast"
MODEL_NAME = "scripted-model"

MODES: dict[str, float | None] = {"offline": None, "llm_0ms": 0.0, "llm_200ms": 0.2}
PEERS: dict[str, tuple[str, str]] = {  # name → (runner module, import name)
    "nano_graphrag": ("benchmarks.peers.nano_graphrag_runner", "nano_graphrag"),
    "lightrag": ("benchmarks.peers.lightrag_runner", "lightrag"),
}


@dataclass(frozen=True, slots=True)
class Sizes:
    documents: int  # podcast pieces for our three modes
    peer_documents: int  # podcast pieces for each peer
    peer_passages: int  # 2wiki passages for each peer's query phase
    timeout_s: float  # per process (one mode of ours, one peer phase): one still running then is stopped


# Chosen so that this module takes about 6 minutes of the full suite's 30 on the 2 shared cores, and --quick
# under 2. The run of 2026-11-26 at the earlier sizes (ours 200 pieces, peers 100 pieces and 400 passages), under
# load from other jobs (load average 4-5), took 16 min: ours 126 / 115 / 154 s per process (offline / 0 ms /
# 200 ms), nano-graphrag 22 s (100 pieces) and 66 s (400 2wiki passages and the queries), LightRAG 60 s and 421 s
# (its indexing grows faster than linearly: 48 s for 100 passages). Hence fewer pieces and passages for the peers
# than for ours. --quick is a smoke-sized run (ours on 20 pieces, the peers on 5 pieces and 40 passages).
FULL = Sizes(documents=100, peer_documents=50, peer_passages=100, timeout_s=600)
QUICK = Sizes(documents=20, peer_documents=5, peer_passages=40, timeout_s=120)


# -- the corpus --------------------------------------------------------------------------------------------------


def _natural(name: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name.lower())]


def podcast_documents(path: Path, count: int | None = None) -> list[SourceDocument]:
    """The first `count` pieces of the podcast corpus in natural order of their file names."""
    with zipfile.ZipFile(path) as archive:
        names = sorted((n for n in archive.namelist() if n.endswith(".txt")), key=_natural)
        return [
            SourceDocument(
                Path(name).stem,
                archive.read(name).decode("utf-8").replace("\r\n", "\n"),
                {"file": Path(name).name},
            )
            for name in names[:count]
        ]


def podcast_size(path: Path) -> int:
    with zipfile.ZipFile(path) as archive:
        return sum(1 for n in archive.namelist() if n.endswith(".txt"))


# -- the scripted model process ----------------------------------------------------------------------------------


class ModelProcess:
    """`benchmarks.extraction_model` in its own process; `stats()` stops it and returns its call counts."""

    def __init__(self, delay_s: float, work: Path, name: str) -> None:
        self.stats_path = work / f"model-{name}.json"
        command = [sys.executable, "-m", "benchmarks.extraction_model", "--port", "0", "--delay", str(delay_s)]
        command += ["--stats", str(self.stats_path)]
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE, text=True, start_new_session=True
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.startswith("READY "):
            self.process.kill()
            raise RuntimeError(f"the scripted model did not start: {line!r}")
        self.url = line.split(" ", 1)[1]
        self.cpu_at_start = cpu_seconds(self.process.pid)

    def stats(self) -> dict[str, Any]:
        cpu = cpu_seconds(self.process.pid) - self.cpu_at_start
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        found: dict[str, Any] = (
            json.loads(self.stats_path.read_text(encoding="utf-8")) if self.stats_path.exists() else {}
        )
        return found | {"server_cpu_s": round(cpu, 2)}


# -- ours: the worker --------------------------------------------------------------------------------------------


class InFlight:
    """Wall time during which at least one call of a wrapped async method is running (calls overlap)."""

    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0
        self._running = 0
        self._since = 0.0

    def wrap(self, owner: object, attr: str) -> None:
        original: Callable[..., Any] = getattr(owner, attr)

        async def timed(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self._running == 0:
                self._since = time.perf_counter()
            self._running += 1
            try:
                return await original(*args, **kwargs)
            finally:
                self._running -= 1
                if self._running == 0:
                    self.seconds += time.perf_counter() - self._since

        setattr(owner, attr, timed)  # an instance attribute shadows the class's method


def mode_settings(mode: str, data_dir: Path, model_url: str | None) -> Settings:
    registry = data_dir / "kb_registry.toml"
    registry.write_text("# none: the benchmark creates its KB\n", encoding="utf-8")
    values: dict[str, Any] = {
        "GRAPH_STORE": "embedded",
        "DATA_DIR": str(data_dir),
        "KB_REGISTRY_PATH": str(registry),
        "EMBEDDING_PROVIDER": "local",
        "LOG_LEVEL": "WARNING",
        "EXTRACTOR": "offline" if MODES[mode] is None else "llm",
    }
    if MODES[mode] is not None:
        if model_url is None:
            raise ValueError(f"mode {mode} needs --model-url")
        values |= {"LLM_BASE_URL": model_url, "LLM_MODEL": MODEL_NAME, "LLM_API_KEY": "scripted"}
    return Settings.load(env_file=None, **values)


async def index_mode(mode: str, documents: Sequence[SourceDocument], model_url: str | None) -> dict[str, Any]:
    refresh_log = RefreshLog()
    refresh_log.install()
    with tempfile.TemporaryDirectory(prefix=f"podcast-indexing-{mode}-") as tmp:
        settings = mode_settings(mode, Path(tmp), model_url)
        started = time.perf_counter()
        async with open_knowledge_service(settings) as service:
            open_s = time.perf_counter() - started
            wiring = Wiring.of(service)
            kb = await service.create_kb(KnowledgeBase(KB_PREFIX, "podcast indexing benchmark"))
            clock = StageClock()
            clock.wrap(wiring.indexer, "_stage_batch", "batch")
            clock.wrap(wiring.indexer, "_write_batch", "write")
            clock.wrap(wiring.embedder, "embed", "embed", size=lambda texts: len(texts))
            clock.wrap(wiring.store, "upsert_documents", "store.upsert_documents")
            clock.wrap(wiring.maintainer, "refresh", "communities")
            extraction = InFlight()  # extract calls of a batch run concurrently: not for the StageClock's stack
            extraction.wrap(wiring.extractor, "extract")
            shown = [0.0]

            def progress(done: int, total: int, _title: str) -> None:
                elapsed = time.perf_counter() - started
                if elapsed - shown[0] >= 15 or done == total:
                    shown[0] = elapsed
                    log(mode, f"indexed {done}/{total} documents in {elapsed:.0f} s")

            cpu = time.process_time()
            started = time.perf_counter()
            report = await wiring.indexer.index(kb, documents, progress)
            wall = time.perf_counter() - started
            cpu = time.process_time() - cpu
            counts = await wiring.store.counts(KB_PREFIX)
            detector = wiring.maintainer._detector
            assert isinstance(detector, CommunityBuilder), type(detector)
            summarizer = detector._summarizer
            fallbacks = getattr(summarizer, "fallbacks", None)
            embedder_engine = getattr(wiring.embedder, "engine", "numpy")
    embed_batches = clock.total("batch/embed")
    embed_communities = clock.total("communities/embed")
    embedding = embed_batches + embed_communities
    refresh = clock.total("communities")
    writes = clock.total("write/store.upsert_documents")
    chunks = report.chunks_written
    log(mode, f"indexed in {wall:.1f} s: {chunks} chunks, {report.model_calls} extraction calls")
    return {
        "mode": mode,
        "extractor": settings.ingestion.extractor.value,
        "model_delay_ms": None if MODES[mode] is None else round(1000 * (MODES[mode] or 0.0)),
        "extraction_concurrency": settings.ingestion.extraction_concurrency,
        "embedder": f"MiniLM-L6, engine {embedder_engine}",
        "documents": report.documents_added,
        "documents_unchanged": report.documents_unchanged,
        "chunks": chunks,
        "entities": counts.entities,
        "relations": counts.relations,
        "communities": counts.communities,
        "counts": asdict(counts),
        "entity_mentions": report.entity_mentions,
        "relation_mentions": report.relation_mentions,
        "extraction_model_calls": report.model_calls,
        "community_summary_fallbacks": fallbacks,
        "open_s": round(open_s, 2),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "chunks_per_s": round(chunks / wall, 2),
        "documents_per_s": round(report.documents_added / wall, 2),
        "peak_rss_mib": round(status_kib("self", "VmHWM") / 1024, 1),
        "split_s": {
            "embedding_minilm": round(embedding, 2),
            "embedding_texts": sum(clock.items.get(p, 0) for p in ("batch/embed", "communities/embed")),
            "rest": round(wall - embedding, 2),
            "extraction_wall": round(extraction.seconds, 2),
            "embed_chunks_and_entity_names": round(embed_batches, 2),
            "store_writes": round(writes, 2),
            "community_refresh": round(refresh, 2),
            "embed_community_summaries": round(embed_communities, 2),
        },
        "community_refresh": refresh_log.take(),
    }


def run_worker(args: argparse.Namespace) -> None:
    documents = podcast_documents(args.dataset, args.documents)
    result = asyncio.run(index_mode(args.worker, documents, args.model_url))
    args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


# -- the parent: ours ----------------------------------------------------------------------------------------------


def run_ours(mode: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    output = work / f"ours-{mode}.json"
    model = ModelProcess(MODES[mode] or 0.0, work, mode) if MODES[mode] is not None else None
    command = [sys.executable, "-m", "benchmarks.podcast_indexing", "--worker", mode, "--output", str(output)]
    command += ["--documents", str(args.documents), "--dataset", str(args.dataset)]
    if model is not None:
        command += ["--model-url", model.url]
    log("ours", f"{mode}: {args.documents} documents")
    started = time.perf_counter()
    failure = None
    try:
        status = subprocess.run(command, cwd=ROOT, env=clean_env(), check=False, timeout=args.timeout).returncode
        if status != 0:
            failure = f"worker exited with status {status}"
    except subprocess.TimeoutExpired:
        failure = f"stopped after {args.timeout:.0f} s (--timeout)"
    finally:
        stats = model.stats() if model is not None else None
    result: dict[str, Any] = json.loads(output.read_text(encoding="utf-8")) if output.exists() else {"mode": mode}
    result["process_wall_s"] = round(time.perf_counter() - started, 1)
    if failure is not None:
        result["failed"] = failure
        log("ours", f"{mode}: {failure}")
    if stats is not None:
        result["model"] = stats
        result |= model_figures(stats, result, set())
        result["extraction_calls_per_chunk"] = round(
            result.get("extraction_model_calls", 0) / max(1, result.get("chunks", 0)), 3
        )
    else:
        result |= model_figures({}, result, set()) | {"extraction_calls_per_chunk": 0.0}
    return result


def model_figures(stats: dict[str, Any], index: dict[str, Any], leave_out: set[str]) -> dict[str, Any]:
    """Model calls and prompt size per chunk and per document, from the model process's counts, without the
    kinds in `leave_out` (the queries' keyword calls)."""
    calls = sum(n for kind, n in stats.get("calls", {}).items() if kind not in leave_out)
    prompt = sum(
        n * stats.get("mean_prompt_chars", {}).get(kind, 0)
        for kind, n in stats.get("calls", {}).items()
        if kind not in leave_out
    )
    chunks, documents = max(1, index.get("chunks") or 0), max(1, index.get("documents") or 0)
    return {
        "model_calls": calls,
        "model_calls_per_chunk": round(calls / chunks, 3),
        "model_calls_per_document": round(calls / documents, 3),
        "model_prompt_chars_per_document": round(prompt / documents),
    }


# -- the parent: peers ---------------------------------------------------------------------------------------------


def peer_installed(module: str) -> bool:
    if not PEERS_PYTHON.exists():
        return False
    probe = f"import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({module!r}) else 1)"
    return subprocess.run([str(PEERS_PYTHON), "-c", probe], check=False, capture_output=True).returncode == 0


def peer_job(args: argparse.Namespace, work: Path) -> Path:
    """The job file the runners read: documents as strings, the questions; the model URL is added per run."""
    wiki = json.loads((args.wiki / "corpus.json").read_text(encoding="utf-8"))[: args.peer_passages]
    questions = json.loads((args.wiki / "questions_dev.json").read_text(encoding="utf-8"))
    job = {
        "podcast": [d.text for d in podcast_documents(args.dataset, args.peer_documents)],
        "wiki": [f"{p['title']}\n{p['text']}" for p in wiki],
        "questions": questions,
    }
    path = work / "peer-job.json"
    path.write_text(json.dumps(job), encoding="utf-8")
    return path


def run_peer_phase(peer: str, phase: str, job_path: Path, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    module = PEERS[peer][0]
    model = ModelProcess(0.0, work, f"{peer}-{phase}")
    job = json.loads(job_path.read_text(encoding="utf-8")) | {"model_url": model.url}
    run_job = work / f"job-{peer}-{phase}.json"
    run_job.write_text(json.dumps(job), encoding="utf-8")
    output, workdir = work / f"{peer}-{phase}.json", work / f"{peer}-{phase}"
    workdir.mkdir()
    command = [str(PEERS_PYTHON), "-m", module, "--phase", phase, "--job", str(run_job)]
    command += ["--workdir", str(workdir), "--output", str(output)]
    env = {k: v for k, v in clean_env().items() if not k.startswith(("OPENAI_", "LLM_", "EMBEDDING_"))}
    env["PYTHONPATH"] = str(ROOT)
    log(peer, f"{phase}: {len(job[phase])} documents")
    started = time.perf_counter()
    failure = None
    with open(work / f"{peer}-{phase}.log", "w", encoding="utf-8") as peer_log:
        try:
            status = subprocess.run(
                command, cwd=workdir, env=env, stdout=peer_log, stderr=subprocess.STDOUT, timeout=args.timeout
            ).returncode
            if status != 0:
                failure = f"runner exited with status {status}"
        except subprocess.TimeoutExpired:
            failure = f"stopped after {args.timeout:.0f} s (--timeout)"
        finally:
            stats = model.stats()
    result: dict[str, Any] = json.loads(output.read_text(encoding="utf-8")) if output.exists() else {}
    result["process_wall_s"] = round(time.perf_counter() - started, 1)
    result["model"] = stats
    if failure is not None:
        tail = (work / f"{peer}-{phase}.log").read_text(encoding="utf-8", errors="replace")[-1500:]
        result |= {"failed": failure, "log_tail": tail}
        log(peer, f"{phase}: {failure}")
    index = result.get("index")
    if index:
        index |= model_figures(stats, index, {"lightrag_keywords"})
        index["documents_per_s"] = round(index["documents"] / index["wall_s"], 2) if index.get("wall_s") else None
        index["peak_rss_mib"] = result.get("peak_rss_mib_vmhwm")
    return result


def run_peer(peer: str, job_path: Path, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    if not peer_installed(PEERS[peer][1]):
        message = f"not installed: {PEERS_INSTALL}"
        log(peer, message)
        return {"status": "not installed", "install": PEERS_INSTALL}
    return {
        "status": "ran",
        "podcast": run_peer_phase(peer, "podcast", job_path, args, work),
        "wiki": run_peer_phase(peer, "wiki", job_path, args, work),
    }


# -- the table -------------------------------------------------------------------------------------------------------


def _kilo(value: Any) -> str | None:
    return None if value is None else f"{value / 1000:.1f}"


def _fmt(value: Any, spec: str = "") -> str:
    if value is None:
        return "-"
    return format(value, spec) if spec else str(value)


def print_table(document: dict[str, Any]) -> None:
    host, params = document["machine"], document["parameters"]
    print(
        f"\n{host['cpu_model']}, {host['cpus_usable']} cores, Python {host['python']}, "
        f"load {host['load_average_1m_at_start']}→{host['load_average_1m_at_end']}; "
        f"podcast: ours {params['documents']} of {params['corpus_documents']} pieces, "
        f"peers {params['peer_documents']}; 2wiki: peers {params['peer_passages']} passages"
    )
    ours: dict[str, Any] = document["results"]["ours"]
    peers: dict[str, Any] = document["results"]["peers"]
    columns: list[tuple[str, dict[str, Any]]] = [(m, r) for m, r in ours.items()]
    columns += [(p, r.get("podcast", {}).get("index") or {}) for p, r in peers.items() if r.get("status") == "ran"]

    def row(label: str, values: Sequence[str]) -> None:
        print(f"{label:<34}" + "".join(f"{v:>14}" for v in values))

    print()
    row("podcast indexing", [name for name, _ in columns])
    row("documents", [_fmt(r.get("documents")) for _, r in columns])
    row("chunks", [_fmt(r.get("chunks")) for _, r in columns])
    row("wall (s)", [_fmt(r.get("wall_s"), ".1f") for _, r in columns])
    row("  of which MiniLM (s)", [_fmt(dig(r, "split_s", "embedding_minilm"), ".1f") for _, r in columns])
    row("  rest (s)", [_fmt(dig(r, "split_s", "rest"), ".1f") for _, r in columns])
    row("chunks / s", [_fmt(r.get("chunks_per_s"), ".2f") for _, r in columns])
    row("documents / s", [_fmt(r.get("documents_per_s"), ".2f") for _, r in columns])
    row("model calls / chunk", [_fmt(r.get("model_calls_per_chunk"), ".2f") for _, r in columns])
    row("model calls / document", [_fmt(r.get("model_calls_per_document"), ".2f") for _, r in columns])
    row("model prompt kchars / document", [_fmt(_kilo(r.get("model_prompt_chars_per_document"))) for _, r in columns])
    row("entities", [_fmt(r.get("entities")) for _, r in columns])
    row("relations", [_fmt(r.get("relations")) for _, r in columns])
    row("peak RSS (MiB)", [_fmt(r.get("peak_rss_mib"), ".0f") for _, r in columns])
    for name, result in [*ours.items(), *peers.items()]:
        for phase in ("", "podcast", "wiki"):
            part = result.get(phase, {}) if phase else result
            if isinstance(part, dict) and "failed" in part:
                print(f"{name} {phase}: FAILED: {part['failed']}")
        if result.get("status") == "not installed":
            print(f"{name}: not installed ({result['install']})")
    wiki = [(p, r["wiki"]) for p, r in peers.items() if r.get("status") == "ran"]
    if wiki:
        print()
        row(f"2wiki, {params['peer_passages']} passages", [p for p, _ in wiki])
        row("index wall (s)", [_fmt(dig(r, "index", "wall_s"), ".1f") for _, r in wiki])
        row("model calls / chunk", [_fmt(dig(r, "index", "model_calls_per_chunk"), ".2f") for _, r in wiki])
        row("peak RSS (MiB)", [_fmt(r.get("peak_rss_mib_vmhwm"), ".0f") for _, r in wiki])
        row(
            "local context query p50/p95 (ms)",
            [
                f"{_fmt(dig(r, 'queries', 'latency', 'p50_ms'), '.0f')}/"
                f"{_fmt(dig(r, 'queries', 'latency', 'p95_ms'), '.0f')}"
                for _, r in wiki
            ],
        )


# -- main ------------------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes: a run under 5 minutes")
    parser.add_argument("--documents", type=int, default=None, help="podcast pieces for ours")
    parser.add_argument("--peer-documents", type=int, default=None, help="podcast pieces for each peer")
    parser.add_argument("--peer-passages", type=int, default=None, help="2wiki passages for each peer")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per mode of ours and per peer phase")
    parser.add_argument("--modes", default=",".join(MODES), help="ours: comma-separated subset of " + ",".join(MODES))
    parser.add_argument("--peers", default=",".join(PEERS), help="comma-separated subset, or 'none'")
    parser.add_argument("--dataset", type=Path, default=PODCAST)
    parser.add_argument("--wiki", type=Path, default=WIKI)
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--worker", choices=tuple(MODES), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--model-url", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        if args.output is None or args.documents is None:
            parser.error("--worker needs --output and --documents")
        run_worker(args)
        return
    sizes = QUICK if args.quick else FULL
    total = podcast_size(args.dataset)
    args.documents = min(total, args.documents or sizes.documents)
    args.peer_documents = min(total, args.peer_documents or sizes.peer_documents)
    args.peer_passages = args.peer_passages or sizes.peer_passages
    args.timeout = args.timeout or sizes.timeout_s
    modes = [m for m in args.modes.split(",") if m]
    peers = [] if args.peers == "none" else [p for p in args.peers.split(",") if p]
    unknown = [m for m in modes if m not in MODES] + [p for p in peers if p not in PEERS]
    if unknown:
        parser.error(f"unknown modes or peers: {', '.join(unknown)}")
    output: Path = args.output or RESULTS_DIR / (
        "podcast_indexing_quick.json" if args.quick else "podcast_indexing.json"
    )
    host = machine()
    started = datetime.now(UTC)
    ours: dict[str, Any] = {}
    peer_results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="podcast-indexing-") as tmp:
        work = Path(tmp)
        for mode in modes:
            ours[mode] = run_ours(mode, args, work)
        if peers:
            job_path = peer_job(args, work)
            for peer in peers:
                peer_results[peer] = run_peer(peer, job_path, args, work)
    host["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    document = {
        "benchmark": "podcast_indexing",
        "machine": host,
        "date": started.isoformat(timespec="seconds"),
        "duration_s": round((datetime.now(UTC) - started).total_seconds(), 1),
        "parameters": {
            "quick": args.quick,
            "corpus": str(args.dataset),
            "corpus_documents": total,
            "documents": args.documents,
            "order": "natural order of the file names (episode by episode); the first N",
            "modes": {m: MODES[m] for m in modes},
            "model": "benchmarks.extraction_model (scripted; answers computed from the prompt's passage)",
            "embedder_ours": "MiniLM-L6, local (engine: see each mode's `embedder`)",
            "peer_documents": args.peer_documents,
            "peer_passages": args.peer_passages,
            "peers_subsampled": {
                "podcast": args.peer_documents < args.documents,
                "note": (
                    f"peers index the first {args.peer_documents} podcast pieces (ours: {args.documents}) and the "
                    f"first {args.peer_passages} of 6,119 2wiki passages, to stay within the run's time budget"
                ),
            },
            "peer_embedder": "the scripted model's /v1/embeddings: hashed bag of words, 384 dimensions",
            "peer_tokenizer": "word-level tiktoken stand-in (benchmarks/peers/common.py)",
            "timeout_s": args.timeout,
            "note": "podcast pieces overlap by about 430 characters: overlapping text is indexed twice, by all",
        },
        "results": {"ours": ours, "peers": peer_results},
    }
    print_table(document)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nwrote {rel(output)}")
    failed = [m for m, r in ours.items() if "failed" in r]
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
