"""Per-request budgets: how many model calls a request may make and by when it must be done.

The budget of the request being served is found through a context variable: every model call of the request
(router, agents, generation; also from the tasks the request starts, which copy the context) charges it
without it being passed through every layer. Each request sets its own; nothing is shared between requests.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass, field

from backend.domain.errors import BudgetExceeded


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One model call of a request, as the debug middleware reports it."""

    model: str
    messages: tuple[tuple[str, str], ...]  # (role, content)
    streamed: bool
    answer: str | None  # None for a streamed call: its answer is the streamed message
    duration_ms: float | None


@dataclass(slots=True)
class RequestBudget:
    """Limits of one request (None: no limit) and the model calls it made."""

    max_model_calls: int | None = None
    timeout_s: float | None = None
    started: float = field(default_factory=time.monotonic)
    calls: list[ModelCall] = field(default_factory=list)
    charged: int = 0

    def charge_model_call(self) -> None:
        """Count one model call; raise when it would go over the limit."""
        if self.max_model_calls is not None and self.charged >= self.max_model_calls:
            raise BudgetExceeded(f"this request reached its limit of {self.max_model_calls} model calls")
        self.charged += 1

    def record(self, call: ModelCall) -> None:
        self.calls.append(call)

    def check_time(self) -> None:
        if self.timeout_s is not None and time.monotonic() - self.started > self.timeout_s:
            raise self.overtime()

    def overtime(self) -> BudgetExceeded:
        """The error of a request that ran past its time limit."""
        return BudgetExceeded(f"this request ran longer than its limit of {self.timeout_s:g} s")

    def model_calls(self) -> Sequence[ModelCall]:
        return tuple(self.calls)


_CURRENT: ContextVar[RequestBudget | None] = ContextVar("request_budget", default=None)


def current_budget() -> RequestBudget | None:
    """The budget of the request being served here, if any (None in scripts and background tasks)."""
    return _CURRENT.get()


@contextmanager
def budget_scope(budget: RequestBudget) -> Iterator[RequestBudget]:
    """Make `budget` the current one for the code inside (and the tasks it starts)."""
    token = _CURRENT.set(budget)
    try:
        yield budget
    finally:
        # Closed from another context (a generator finalised elsewhere), the variable dies with its context.
        with suppress(ValueError):
            _CURRENT.reset(token)
