"""nano-graphrag 0.0.8.2 indexing (and, on 2wiki, local-mode context queries) through the scripted model.

Its own defaults throughout: chunks of 1,200 tokens with 100 overlapping, one gleaning pass, Leiden
communities with a JSON report each, entity-description summaries past 500 tokens, at most 16 model and 16
embedding calls in flight, its JSON key-value stores (the model-answer cache included, rewritten after every
call, as the library does), NanoVectorDB and NetworkX. The model is its default `gpt_4o_complete` (the
openai SDK) pointed at the scripted model through OPENAI_BASE_URL; embeddings come from `common.Embedder`
(the scripted model's hashed bag of words by default); tiktoken is the word-level stand-in. All documents go in
one `ainsert` call.

Phase podcast: index the job's podcast documents. Phase wiki: index the job's 2wiki passages ("title\\ntext"),
then `aquery(question, QueryParam(mode="local", only_need_context=True))` for each dev question, once, one at
a time (no model call: the context is built from the entity vectors and the graph).

Run (from benchmarks.podcast_indexing):
    .venv-peers/bin/python -m benchmarks.peers.nano_graphrag_runner --phase podcast --job J --workdir D --output O
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import time
from pathlib import Path
from typing import Any

from benchmarks.peers.common import (
    EMBEDDING_DIM,
    Job,
    Result,
    arguments,
    environment_for_model,
    install_tiktoken_stand_in,
    log,
    timed_queries,
)

NAME = "nano_graphrag"


def graph_counts(rag: Any) -> dict[str, int]:
    graph = rag.chunk_entity_relation_graph._graph
    return {"entities": graph.number_of_nodes(), "relations": graph.number_of_edges()}


async def main() -> None:
    args = arguments(__doc__ or NAME)
    job = Job.read(args.job)
    result = Result(args.output, NAME, args.phase)
    environment_for_model(job.model_url)
    install_tiktoken_stand_in()
    started = time.perf_counter()
    nano = importlib.import_module("nano_graphrag")
    utils = importlib.import_module("nano_graphrag._utils")
    embedder = job.embedding()
    embedding = utils.wrap_embedding_func_with_attrs(embedding_dim=EMBEDDING_DIM, max_token_size=8192)(embedder.embed)
    workdir: Path = args.workdir  # made by the parent
    rag = nano.GraphRAG(working_dir=str(workdir), embedding_func=embedding)
    result.data["version"] = importlib.metadata.version("nano-graphrag")
    result.data["open_s"] = round(time.perf_counter() - started, 2)
    documents = job.podcast if args.phase == "podcast" else job.wiki
    log(NAME, f"{args.phase}: indexing {len(documents)} documents")
    cpu, started = time.process_time(), time.perf_counter()
    await rag.ainsert(documents)
    wall = time.perf_counter() - started
    chunks = len(await rag.text_chunks.all_keys())
    result.data["index"] = {
        "documents": len(documents),
        "wall_s": round(wall, 2),
        "cpu_s": round(time.process_time() - cpu, 2),
        "chunks": chunks,
        "chunks_per_s": round(chunks / wall, 2) if wall else None,
        **graph_counts(rag),
        "communities": len(await rag.community_reports.all_keys()),
        "embedding": embedder.figures(),
    }
    log(NAME, f"{args.phase}: indexed in {wall:.1f} s, {chunks} chunks")
    result.save("index")
    if args.phase == "wiki":
        param = nano.QueryParam(mode="local", only_need_context=True)

        async def ask(question: str) -> Any:
            return await rag.aquery(question, param)

        result.data["queries"] = await timed_queries(ask, job.questions)
        result.save("queries")


if __name__ == "__main__":
    asyncio.run(main())
