"""The limits every chat request gets (SPEC §10 "per-request budgets"), set by the composition root."""

from __future__ import annotations

from dataclasses import dataclass

from backend.domain.budget import RequestBudget


@dataclass(frozen=True, slots=True)
class BudgetPolicy:
    """Each request's limits (None: none): model calls, and seconds from the start of its answer."""

    max_model_calls: int | None = None
    timeout_s: float | None = None

    def new(self) -> RequestBudget:
        return RequestBudget(self.max_model_calls, self.timeout_s)
