"""The narrower searches a question asks for beside its own.

- Its clauses, when it joins two events in time (clauses.py): each clause ranks its own passage.
- When it names a day, month or year (dates.py): the question and its clauses again, restricted to documents
  of those dates. Their rankings lead; the unrestricted ones follow, so a question about undated documents,
  or a date the KB has nothing for, still gets its ordinary evidence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from backend.graphrag_agent.clauses import question_clauses
from backend.graphrag_agent.dates import DateScope, question_scope
from backend.graphrag_agent.fusion import S, ahead, interleave


@dataclass(frozen=True, slots=True)
class Search:
    """One text to search, optionally restricted to documents of some dates."""

    text: str
    scope: DateScope | None = None


@dataclass(frozen=True, slots=True)
class QuestionFocus:
    """A question's own search, then its clauses' searches, then the date-restricted ones."""

    question: str
    clauses: tuple[str, ...]
    scope: DateScope | None

    @classmethod
    def of(cls, question: str) -> QuestionFocus:
        return cls(question, tuple(question_clauses(question)), question_scope(question))

    def searches(self) -> list[Search]:
        """Every search, the question's own first; `combine` expects their rankings in this order."""
        plain = [Search(text) for text in (self.question, *self.clauses)]
        scoped = [Search(s.text, self.scope) for s in plain] if self.scope is not None else []
        return [*plain, *scoped]

    def extra_searches(self) -> list[Search]:
        """The searches beside the question's own (for an agent that ranks the question its own way)."""
        return self.searches()[1:]

    def combine(self, rankings: Sequence[Sequence[S]], key: Callable[[S], str]) -> list[S]:
        """The rankings of `searches()`, in that order, as one: the date-restricted ones taken in turns ahead of
        the others taken in turns."""
        plain_count = 1 + len(self.clauses)
        plain, scoped = rankings[:plain_count], rankings[plain_count:]
        ordinary = interleave(plain, key=key)
        return ahead(interleave(scoped, key=key), ordinary, key=key) if scoped else ordinary
