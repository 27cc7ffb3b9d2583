"""Answers in the default run (no chat model): does the extractive answer hold the gold answer?

Datasets: the CMRC 2018 dev questions (gold: the answer span and its aliases), the LiHua-World dev single-hop
questions (type Single; gold: the answer) and the orchard sample's questions with the short strings written in
`benchmarks/data/answers.json` (every one of them must be in the answer). CMRC and LiHua are asked over the
indexes retrieval_quality caches (built here when missing); the orchard is indexed here from its folder.

Each question goes through the product's path as a chat turn without a model runs it: the agent the product
picks by default (`choose_agent`), retrieval and aggregation by the service's `RagManager` with the service's
limits (top_k, context token budget), then the answer from `AnswerGenerator` with the `ExtractiveAnswerer`
on that evidence, streamed and joined. The question is asked as a first turn, so the standalone query the
router builds is the question itself.

Per dataset:
- `answer_rate`: share of questions whose answer (the notice line left out) contains the gold answer;
- `ceiling`: share whose retrieved text (the chunks given to the answerer) contains it; `kept` is
  answer_rate / ceiling;
- `baseline_rate`: the first sentence of the top chunk as the answer, in the same run;
- `median_chars` (answer without the notice) and `baseline_median_chars`;
- `headings`: answers with markdown heading syntax, `markdown`: with other markdown syntax (emphasis, code,
  table rows), `internal`: answers that cite an entity, relationship or community result or quote its text,
  `repeats`: answers in which one sentence repeats most of the content words of another.

Gold matching: lower-cased, whitespace runs as one space (none at all around CJK text), containment of the
answer or any alias. A LiHua answer that is a bare "yes" or "no" cannot be quoted by an extractive answer: such
a question counts with the rest of its gold answer when there is one ("Yes, on Friday" → "on Friday"), and is
left out of every rate when there is none (`yes_no_left_out`).

A run of some datasets keeps the others' figures in the file, and per dataset it runs keeps the figures of that
dataset's run before under `previous`, so the file shows a change of the answerer against the run before it.

Run:  python -m benchmarks.answers [--quick] [--datasets cmrc,lihua,orchard]
`--quick`: the first 200 CMRC questions. Writes benchmarks/results/answers.json (`--quick`: answers_quick.json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import tempfile
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backend.application.answering.generator import AnswerGenerator
from backend.application.ports.generation import GenerationRequest
from backend.application.rag.rag_manager import RagManager, RetrievalLimits
from backend.bootstrap import open_knowledge_service
from backend.domain.agent_choice import choose_agent
from backend.domain.agent_types import KNOWN_AGENT_TYPES
from backend.domain.context import RequestContext
from backend.domain.knowledge_base import KnowledgeBase
from backend.domain.retrieval import Granularity, RagRunSpec, RetrievalResult
from backend.domain.worker import Worker
from backend.graphrag_agent.text import content_terms, split_sentences
from backend.infrastructure.agents.rag_factory.builders import AGENT_BUILDERS, AgentResources
from backend.infrastructure.agents.rag_factory.manager import RAGAgentManager
from backend.infrastructure.config.settings import Settings
from backend.infrastructure.knowledge.loaders import FileDocumentLoader
from backend.infrastructure.llm.extractive import EXTRACTIVE_NOTICE, ExtractiveAnswerer
from benchmarks.graph_indexing import Wiring, bench_settings
from benchmarks.graph_probes import log, machine, result_path, save_result
from benchmarks.quality_data import DATASETS, ROOT, load_cmrc, load_lihua
from benchmarks.retrieval_quality import KB as QUALITY_KB
from benchmarks.retrieval_quality import ensure_index, fresh_directory

ORCHARD = ROOT / "samples" / "orchard" / "documents"
WRITTEN = ROOT / "benchmarks" / "data" / "answers.json"
QUICK_CMRC = 200
MISSES_KEPT = 12
_HEADING = re.compile(r"(?:^|\s)#{1,6}\s")
_MARKDOWN = re.compile(r"\*\*|__|`|\|\s*-{3,}|^\s*\|", re.MULTILINE)
_CITED = re.compile(r"\[(\d+)\]")
_YES_NO = re.compile(r"^\s*(?:yes|no)\b[\s,.;:!-]*", re.IGNORECASE)
_CJK = re.compile(r"[\u3400-\u9fff]")


@dataclass(frozen=True, slots=True)
class Case:
    question: str
    gold: tuple[str, ...]  # any of these (CMRC, LiHua) or all of them (the orchard: `every`)
    every: bool = False


@dataclass(frozen=True, slots=True)
class Answered:
    case: Case
    agent: str
    answer: str  # without the notice line
    evidence: tuple[RetrievalResult, ...]

    @property
    def chunk_text(self) -> str:
        return "\n".join(r.evidence for r in self.evidence if r.granularity is Granularity.CHUNK)

    @property
    def baseline(self) -> str:
        top = next((r for r in self.evidence if r.granularity is Granularity.CHUNK), None)
        sentences = split_sentences(top.evidence) if top else []
        return sentences[0] if sentences else ""


# -- gold matching -------------------------------------------------------------------------------------------------


def normalise(text: str) -> str:
    spaced = " ".join(text.lower().split())
    return re.sub(r"\s*([\u3400-\u9fff])\s*", r"\1", spaced)  # no spaces around CJK characters


def contains(text: str, case: Case) -> bool:
    found = normalise(text)
    hits = [normalise(gold) in found for gold in case.gold]
    return all(hits) if case.every else any(hits)


def lihua_gold(answer: str) -> tuple[str, ...]:
    """A LiHua answer as gold strings: a leading yes / no dropped (see the module docstring); () when nothing
    is left."""
    rest = _YES_NO.sub("", answer).strip() if _YES_NO.match(answer) else answer.strip()
    return (rest,) if rest else ()


# -- the cases -----------------------------------------------------------------------------------------------------


def cmrc_cases(quick: bool) -> list[Case]:
    rows = json.loads((DATASETS / "cmrc2018" / "questions_dev.json").read_text(encoding="utf-8"))
    cases = [Case(q["question"], tuple(dict.fromkeys([q["answer"], *q.get("answer_aliases", [])]))) for q in rows]
    return cases[:QUICK_CMRC] if quick else cases


def lihua_cases() -> tuple[list[Case], int]:
    """The Single questions with gold, and how many were left out as bare yes / no."""
    rows = json.loads((DATASETS / "lihua" / "questions_dev.json").read_text(encoding="utf-8"))
    singles = [(q["question"], lihua_gold(q["answer"])) for q in rows if q["type"] == "Single"]
    return [Case(text, gold) for text, gold in singles if gold], sum(not gold for _, gold in singles)


def orchard_cases() -> list[Case]:
    rows = json.loads(WRITTEN.read_text(encoding="utf-8"))["orchard"]
    return [Case(row["question"], tuple(row["must_contain"]), every=True) for row in rows]


# -- answering as the service does -----------------------------------------------------------------------------------


class ServiceAnswers:
    """Retrieval, aggregation and the extractive answer of one KB, wired as `bootstrap.open_services` wires them."""

    def __init__(self, kb: KnowledgeBase, wiring: Wiring, settings: Settings) -> None:
        retrieval = settings.retrieval
        resources = AgentResources(wiring.store, wiring.embedder, retrieval.top_k)
        pool = RAGAgentManager(AGENT_BUILDERS, resources, retrieval.agent_pool_max)
        limits = RetrievalLimits(retrieval.agent_timeout_s, retrieval.context_token_budget, retrieval.top_k)
        self._kb, self._rag = kb, RagManager(pool, limits)
        self._generator = AnswerGenerator(None, ExtractiveAnswerer(), settings.chat.history_token_budget)

    async def answer(self, case: Case, number: int) -> Answered:
        agent = choose_agent(case.question, self._kb, KNOWN_AGENT_TYPES).agent_type
        context = RequestContext(f"answers-{number}", "bench", f"answers-{number}")
        plan = (RagRunSpec(Worker(self._kb, agent)),)
        request = GenerationRequest(context, case.question, self._kb.kb_prefix, plan)
        runs = [run async for run in self._rag.iter_runs(request)]
        evidence = self._rag.aggregate(runs)
        text = "".join([delta.content async for delta in self._generator.stream(request, evidence)])
        return Answered(case, agent, without_notice(text), tuple(evidence))


def without_notice(text: str) -> str:
    return text.removeprefix(EXTRACTIVE_NOTICE).strip()


async def answer_all(service: ServiceAnswers, cases: Sequence[Case], name: str) -> list[Answered]:
    answered = []
    every = max(1, len(cases) // 5)
    for number, case in enumerate(cases):
        answered.append(await service.answer(case, number))
        if (number + 1) % every == 0:
            log("answers", f"{name}: {number + 1}/{len(cases)} answered")
    return answered


async def quality_kb(dataset_name: str, stack: AsyncExitStack) -> ServiceAnswers:
    dataset = load_cmrc() if dataset_name == "cmrc" else load_lihua()
    directory, _ = await ensure_index(dataset, rebuild=False, reuse_stale=False)
    settings = bench_settings("embedded", directory, directory / "kb_registry.toml", None)
    service = await stack.enter_async_context(open_knowledge_service(settings))
    kb = next(kb for kb in await service.list_kbs() if kb.kb_prefix == QUALITY_KB)
    return ServiceAnswers(kb, Wiring.of(service), settings)


async def orchard_kb(scratch: Path, stack: AsyncExitStack) -> ServiceAnswers:
    registry = fresh_directory(scratch / "orchard")
    settings = bench_settings("embedded", scratch / "orchard", registry, None)
    service = await stack.enter_async_context(open_knowledge_service(settings))
    kb = KnowledgeBase("orchard", "A cider farm's handbook for visitors and staff")
    await service.create_kb(kb)
    loader = FileDocumentLoader()
    await service.ingest(kb.kb_prefix, [d for f in loader.files([ORCHARD]) for d in loader.load(f)])
    return ServiceAnswers(kb, Wiring.of(service), settings)


# -- figures -------------------------------------------------------------------------------------------------------


def internal(answered: Answered) -> bool:
    """Does the answer cite a graph result (entity, relationship, community) or quote one's text?"""
    cited = {int(n) for n in _CITED.findall(answered.answer)}
    graph = [r for r in answered.evidence if r.granularity is not Granularity.CHUNK]
    if any(answered.evidence[n - 1].granularity is not Granularity.CHUNK for n in cited if n <= len(answered.evidence)):
        return True
    chunks = normalise(answered.chunk_text)
    body = [normalise(s) for s in _CITED.sub("", answered.answer).split("\n") if s.strip()]
    quoted = [s for r in graph for s in split_sentences(r.evidence) if len(s) > 20 and normalise(s) not in chunks]
    return any(normalise(s) in line for s in quoted for line in body)


def repeats(answer: str) -> bool:
    """Does one sentence of the answer repeat most of the content words of another?"""
    terms = [set(content_terms(s)) for s in split_sentences(_CITED.sub("", answer))]
    terms = [t for t in terms if len(t) >= 3]
    return any(len(a & b) >= 0.8 * min(len(a), len(b)) for i, a in enumerate(terms) for b in terms[i + 1 :])


def rate(flags: Sequence[bool]) -> float:
    return round(sum(flags) / len(flags), 3) if flags else float("nan")


def median_chars(texts: Sequence[str]) -> float:
    return float(statistics.median(len(t) for t in texts)) if texts else float("nan")


def figures(answered: Sequence[Answered]) -> dict[str, Any]:
    ok = [contains(a.answer, a.case) for a in answered]
    ceiling = [contains(a.chunk_text, a.case) for a in answered]
    answer_rate, ceiling_rate = rate(ok), rate(ceiling)
    agents: dict[str, int] = {}
    for a in answered:
        agents[a.agent] = agents.get(a.agent, 0) + 1
    return {
        "questions": len(answered),
        "answer_rate": answer_rate,
        "ceiling": ceiling_rate,
        "kept": round(answer_rate / ceiling_rate, 3) if ceiling_rate else float("nan"),
        "baseline_rate": rate([contains(a.baseline, a.case) for a in answered]),
        "median_chars": median_chars([a.answer for a in answered]),
        "baseline_median_chars": median_chars([a.baseline for a in answered]),
        "headings": sum(bool(_HEADING.search(a.answer)) for a in answered),
        "markdown": sum(bool(_MARKDOWN.search(a.answer)) for a in answered),
        "internal": sum(internal(a) for a in answered),
        "repeats": sum(repeats(a.answer) for a in answered),
        "agents": agents,
        "lost": sum(c and not o for o, c in zip(ok, ceiling, strict=True)),
    }


def misses(answered: Sequence[Answered], limit: int = MISSES_KEPT) -> list[dict[str, Any]]:
    """The first answers that miss a gold answer their retrieved text holds."""
    found = [a for a in answered if contains(a.chunk_text, a.case) and not contains(a.answer, a.case)]
    return [{"question": a.case.question, "gold": list(a.case.gold), "answer": a.answer} for a in found[:limit]]


def every_answer(answered: Sequence[Answered]) -> list[dict[str, Any]]:
    return [
        {
            "question": a.case.question,
            "expected": list(a.case.gold),
            "ok": contains(a.answer, a.case),
            "answer": a.answer,
        }
        for a in answered
    ]


# -- the run -------------------------------------------------------------------------------------------------------


async def run(names: Sequence[str], quick: bool) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="answers-") as scratch:
        for name in names:
            started = time.perf_counter()
            async with AsyncExitStack() as stack:
                if name == "orchard":
                    service, cases, left_out = await orchard_kb(Path(scratch), stack), orchard_cases(), 0
                elif name == "lihua":
                    service = await quality_kb(name, stack)
                    cases, left_out = lihua_cases()
                else:
                    service, cases, left_out = await quality_kb(name, stack), cmrc_cases(quick), 0
                log("answers", f"{name}: {len(cases)} questions")
                answered = await answer_all(service, cases, name)
            result = figures(answered) | {"duration_s": round(time.perf_counter() - started, 1)}
            if name == "lihua":
                result["yes_no_left_out"] = left_out
            result["answers" if name == "orchard" else "misses"] = (
                every_answer(answered) if name == "orchard" else misses(answered)
            )
            results[name] = result
    return results


def merged(output: Path, results: dict[str, Any], date: str) -> dict[str, Any]:
    """`results` over the datasets of the file it replaces (a run of some datasets keeps the others), with
    `previous`: per dataset run now, the figures (not the listed answers) of its run before, and that run's date."""
    earlier = json.loads(output.read_text(encoding="utf-8")) if output.is_file() else {}
    kept = {k: v for k, v in (earlier.get("results") or {}).items() if k != "duration_s"}
    previous = dict(kept.pop("previous", {}))
    for name in results:
        if name in kept:
            figures = {k: v for k, v in kept[name].items() if k not in ("misses", "answers")}
            previous[name] = figures | {"date": kept[name].get("date", earlier.get("date"))}
    stamped = {name: result | {"date": date} for name, result in results.items()}
    return kept | stamped | {"previous": previous}


def print_table(results: dict[str, Any]) -> None:
    print(f"{'dataset':<10}{'answer':>8}{'ceiling':>9}{'kept':>7}{'first':>7}{'median':>8}{'head':>6}{'intern':>8}")
    for name, r in results.items():
        if name in ("previous", "duration_s"):
            continue
        cells = f"{r['answer_rate']:>8.3f}{r['ceiling']:>9.3f}{r['kept']:>7.3f}{r['baseline_rate']:>7.3f}"
        print(f"{name:<10}{cells}{r['median_chars']:>8.0f}{r['headings']:>6}{r['internal']:>8}   (n={r['questions']})")
    for row in results.get("orchard", {}).get("answers", []):
        if not row["ok"]:
            print(f"  orchard miss: {row['question']} → {row['answer'][:160]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--datasets", default="cmrc,lihua,orchard")
    parser.add_argument("--output", type=Path, help="another result file (development runs)")
    args = parser.parse_args()
    names = [n for n in args.datasets.split(",") if n]
    unknown = set(names) - {"cmrc", "lihua", "orchard"}
    if unknown:
        parser.error(f"unknown datasets: {', '.join(sorted(unknown))}")
    started, clock = datetime.now(UTC), time.perf_counter()
    output = args.output or result_path("answers", args.quick)
    results = asyncio.run(run(names, args.quick))
    print_table(results)
    document = merged(output, results, started.isoformat(timespec="seconds"))
    document["duration_s"] = round(time.perf_counter() - clock, 1)
    parameters = vars(args) | {"output": str(args.output) if args.output else None}
    save_result(output, "answers", machine(), started, parameters, document)


if __name__ == "__main__":
    main()
