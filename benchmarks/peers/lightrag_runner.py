"""LightRAG (lightrag-hku 1.5.7) indexing (and, on 2wiki, local-mode context queries) through the scripted model.

Its own defaults throughout: fixed-token chunks of 1,200 tokens with 100 overlapping, one gleaning pass,
description summaries by the model once a name has 8 descriptions, at most 4 model calls and 8 embedding calls
in flight, 3 documents in parallel, JSON key-value and document-status stores, NanoVectorDB (entities,
relations and chunks embedded) and NetworkX. The model is LightRAG's own openai binding
(`lightrag.llm.openai.openai_complete_if_cache`) pointed at the scripted model; embeddings come from
`common.Embedder` (384 dimensions; the scripted model's hashed bag of words by default); the tokenizer is the
word-level tiktoken stand-in, passed as LightRAG's `tokenizer` (and installed in tiktoken for anything else).
All documents go in one `ainsert` call.

Phase podcast: index the job's podcast documents. Phase wiki: index the job's 2wiki passages ("title\\ntext"),
then `aquery(question, QueryParam(mode="local", only_need_context=True))` for each dev question, once, one at
a time (one keyword-extraction model call each, then vector and graph lookups).

Run (from benchmarks.podcast_indexing):
    .venv-peers/bin/python -m benchmarks.peers.lightrag_runner --phase podcast --job J --workdir D --output O
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import json
import time
from pathlib import Path
from typing import Any

from benchmarks.peers.common import (
    EMBEDDING_DIM,
    MODEL_NAME,
    Job,
    Result,
    arguments,
    environment_for_model,
    install_tiktoken_stand_in,
    log,
    timed_queries,
)

NAME = "lightrag"


def stored_count(workdir: Path, name: str) -> int | None:
    """Records in one of LightRAG's JSON stores (written by finalize_storages)."""
    for path in (workdir / f"kv_store_{name}.json", *workdir.glob(f"**/kv_store_{name}.json")):
        if path.exists():
            return len(json.loads(path.read_text(encoding="utf-8")))
    return None


async def main() -> None:
    args = arguments(__doc__ or NAME)
    job = Job.read(args.job)
    result = Result(args.output, NAME, args.phase)
    environment_for_model(job.model_url)
    encoding = install_tiktoken_stand_in()
    started = time.perf_counter()
    lightrag = importlib.import_module("lightrag")
    utils = importlib.import_module("lightrag.utils")
    openai_binding = importlib.import_module("lightrag.llm.openai")
    embedder = job.embedding()

    async def model(
        prompt: str, system_prompt: str | None = None, history_messages: list[dict[str, Any]] | None = None, **kw: Any
    ) -> Any:
        kw.pop("hashing_kv", None)
        return await openai_binding.openai_complete_if_cache(
            MODEL_NAME,
            prompt,
            system_prompt=system_prompt,
            history_messages=history_messages or [],
            base_url=job.model_url,
            api_key="scripted",
            **kw,
        )

    workdir: Path = args.workdir  # made by the parent
    rag = lightrag.LightRAG(
        working_dir=str(workdir),
        llm_model_func=model,
        llm_model_name=MODEL_NAME,
        embedding_func=utils.EmbeddingFunc(embedding_dim=EMBEDDING_DIM, func=embedder.embed, max_token_size=8192),
        tokenizer=utils.Tokenizer("word-level", encoding),
    )
    await rag.initialize_storages()
    result.data["version"] = importlib.metadata.version("lightrag-hku")
    result.data["open_s"] = round(time.perf_counter() - started, 2)
    documents = job.podcast if args.phase == "podcast" else job.wiki
    log(NAME, f"{args.phase}: indexing {len(documents)} documents")
    cpu, started = time.process_time(), time.perf_counter()
    await rag.ainsert(documents)
    wall = time.perf_counter() - started
    cpu_s = time.process_time() - cpu
    graph = rag.chunk_entity_relation_graph
    entities, relations = len(await graph.get_all_nodes()), len(await graph.get_all_edges())
    statuses = await rag.doc_status.get_status_counts() if hasattr(rag.doc_status, "get_status_counts") else {}
    if args.phase == "podcast":
        await rag.finalize_storages()
    chunks = stored_count(workdir, "text_chunks")
    result.data["index"] = {
        "documents": len(documents),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu_s, 2),
        "chunks": chunks,
        "chunks_per_s": round(chunks / wall, 2) if chunks and wall else None,
        "entities": entities,
        "relations": relations,
        "document_status": {str(k): v for k, v in dict(statuses).items()},
        "embedding": embedder.figures(),
    }
    log(NAME, f"{args.phase}: indexed in {wall:.1f} s, {chunks} chunks")
    result.save("index")
    if args.phase == "wiki":
        param = lightrag.QueryParam(mode="local", only_need_context=True)

        async def ask(question: str) -> Any:
            return await rag.aquery(question, param=param)

        result.data["queries"] = await timed_queries(ask, job.questions)
        await rag.finalize_storages()
        result.data["index"]["chunks"] = stored_count(workdir, "text_chunks")
        result.save("queries")


if __name__ == "__main__":
    asyncio.run(main())
