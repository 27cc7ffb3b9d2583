"""The extractive answerer: used when no chat model is configured.

It picks the evidence sentences that best cover the question's terms (rarer terms weigh more),
and says plainly that the answer is extractive.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from backend.domain.retrieval import RetrievalResult
from backend.graphrag_agent.text import content_terms, index_terms, split_sentences

EXTRACTIVE_NOTICE = "Extractive answer (no language model is configured; these are the most relevant passages):"
NO_EVIDENCE_ANSWER = (
    "Extractive mode: I could not find anything about this in the knowledge base. "
    "Try rephrasing the question or choosing another knowledge base."
)
GENERAL_UNAVAILABLE = (
    "Extractive mode: no language model is configured, so I can only answer questions about a knowledge base. "
    "Choose a knowledge base (kb_prefix) or configure LLM_BASE_URL and LLM_MODEL for general chat."
)
_LIST_MARKER = re.compile(r"^(?:[-*+]|\d{1,3}[.)])\s+")
MAX_SENTENCES = 3
MIN_SENTENCE_WORDS = 4


@dataclass(frozen=True, slots=True)
class _Candidate:
    sentence: str
    source_number: int
    score: float


def _candidates(evidence: Sequence[RetrievalResult]) -> list[tuple[str, int, set[str]]]:
    found = []
    for number, result in enumerate(evidence, start=1):
        for sentence in split_sentences(result.evidence):
            if sentence.lstrip().startswith("#"):
                continue  # markdown headings are titles, not answers
            found.append((sentence, number, set(index_terms(sentence))))
    return found


def _score_sentences(question: str, evidence: Sequence[RetrievalResult]) -> list[_Candidate]:
    wanted = content_terms(question)
    candidates = _candidates(evidence)
    if not wanted or not candidates:
        return []
    # Inverse sentence frequency: a term in every sentence tells nothing about which one answers.
    frequency = {term: sum(term in terms for _, _, terms in candidates) for term in wanted}
    weight = {term: math.log(1 + len(candidates) / (1 + count)) for term, count in frequency.items()}
    total = sum(weight.values()) or 1.0
    scored = []
    for sentence, number, terms in candidates:
        coverage = sum(weight[term] for term in wanted if term in terms) / total
        if coverage == 0 or (len(sentence.split()) < MIN_SENTENCE_WORDS and not _has_cjk(sentence)):
            continue
        scored.append(_Candidate(sentence, number, coverage * (1.0 - 0.03 * (number - 1))))
    scored.sort(key=lambda candidate: candidate.score, reverse=True)
    return scored


def _has_cjk(text: str) -> bool:
    return any("\u4e00" <= char <= "\u9fff" for char in text)


def compose_extractive_answer(question: str, evidence: Sequence[RetrievalResult]) -> str:
    if not evidence:
        return NO_EVIDENCE_ANSWER
    chosen: list[_Candidate] = []
    for candidate in _score_sentences(question, evidence):
        if all(candidate.sentence != kept.sentence for kept in chosen):
            chosen.append(candidate)
        if len(chosen) == MAX_SENTENCES:
            break
    if not chosen:
        first = split_sentences(evidence[0].evidence)[:2]
        chosen = [_Candidate(sentence, 1, 0.0) for sentence in first]
    body = " ".join(f"{_LIST_MARKER.sub('', c.sentence)} [{c.source_number}]" for c in chosen)
    return f"{EXTRACTIVE_NOTICE}\n\n{body}"


def stream_pieces(text: str) -> list[str]:
    """Split an answer into word-sized deltas (whitespace kept) so it streams like a model's output."""
    pieces: list[str] = []
    current = ""
    for char in text:
        if char.isspace() and current and not current[-1].isspace():
            pieces.append(current)
            current = ""
        current += char
    if current:
        pieces.append(current)
    return pieces


class ExtractiveAnswerer:
    """Implements `OfflineAnswerer` (`application/ports/chat_model.py`) with the functions above."""

    @property
    def general_answer(self) -> str:
        return GENERAL_UNAVAILABLE

    def compose(self, question: str, evidence: Sequence[RetrievalResult]) -> str:
        return compose_extractive_answer(question, evidence)

    def stream_pieces(self, text: str) -> list[str]:
        return stream_pieces(text)
