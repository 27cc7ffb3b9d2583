"""Prompts for answer generation. History is trimmed oldest-first to a token budget."""

from __future__ import annotations

from collections.abc import Sequence

from backend.domain.conversation import Message, Role
from backend.domain.retrieval import RetrievalResult
from backend.domain.tokens import estimate_tokens

RAG_SYSTEM_PROMPT = (
    "You answer questions using only the numbered sources you are given. "
    "Cite the sources that support each statement with their numbers in square brackets, like [1] or [2][3]. "
    "If the sources do not contain the answer, say that the knowledge base does not cover it. "
    "Answer in the language of the question."
)
GENERAL_SYSTEM_PROMPT = "You are a helpful, concise assistant."


def trim_history(history: Sequence[Message], token_budget: int) -> list[Message]:
    """The most recent turns that fit the budget, in chronological order."""
    kept: list[Message] = []
    used = 0
    for turn in reversed(history):
        cost = estimate_tokens(turn.content)
        if used + cost > token_budget:
            break
        kept.append(turn)
        used += cost
    kept.reverse()
    return kept


def format_sources(evidence: Sequence[RetrievalResult]) -> str:
    return "\n\n".join(
        f"[{number}] {result.source.title or result.source.doc_id}\n{result.evidence.strip()}"
        for number, result in enumerate(evidence, start=1)
    )


def _history_turns(history: Sequence[Message], token_budget: int) -> list[Message]:
    return [turn for turn in trim_history(history, token_budget) if turn.content]


def rag_messages(
    question: str, evidence: Sequence[RetrievalResult], history: Sequence[Message], history_budget: int
) -> list[Message]:
    sources = format_sources(evidence) if evidence else "(no sources were found)"
    return [
        Message(Role.SYSTEM, RAG_SYSTEM_PROMPT),
        *_history_turns(history, history_budget),
        Message(Role.USER, f"Sources:\n{sources}\n\nQuestion: {question}"),
    ]


def general_messages(question: str, history: Sequence[Message], history_budget: int) -> list[Message]:
    return [
        Message(Role.SYSTEM, GENERAL_SYSTEM_PROMPT),
        *_history_turns(history, history_budget),
        Message(Role.USER, question),
    ]
