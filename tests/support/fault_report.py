"""What each fault test sent, lost and showed its clients, for docs/reliability.md.

Each fault test records one row through the `fault_report` fixture. When `FAULT_REPORT_JSON` names a file,
the rows of the run are written there at the end of the session (benchmarks/reliability.py renders them);
otherwise they are only kept in memory. Recording never replaces an assertion: the tests assert that
nothing was lost before they record it.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.sse import StreamCapture

REPORT_VARIABLE = "FAULT_REPORT_JSON"


@dataclass
class FaultRecord:
    test: str
    fault: str
    injected: str  # how the fault was made
    requests: int  # chat requests sent during the test
    messages_expected: int  # what the store owes the clients (see `owed`)
    messages_stored: int  # of those, found in the store afterwards
    clients_saw: dict[str, int] = field(default_factory=dict)
    notes: str = ""

    @property
    def lost(self) -> int:
        return self.messages_expected - self.messages_stored


@dataclass
class FaultReport:
    records: list[FaultRecord] = field(default_factory=list)

    def add(self, record: FaultRecord) -> None:
        self.records.append(record)

    def to_json(self) -> list[dict[str, Any]]:
        return [asdict(record) | {"lost": record.lost} for record in self.records]


def outcome(capture: StreamCapture) -> str:
    """How one stream ended, as the client saw it."""
    if capture.status_code != 200:
        try:
            code = json.loads(bytes(capture.raw))["error"]["code"]
        except (ValueError, KeyError, TypeError):
            code = "?"
        return f"HTTP {capture.status_code} {code}"
    statuses = capture.statuses
    if not statuses or statuses[-1] != "done" or not capture.raw.endswith(b"\n\n"):
        return "truncated"
    return "error+done" if "error" in statuses else "done"


def owed(capture: StreamCapture) -> int:
    """Messages the store owes for one stream: none for a refused request; for an accepted one the user message
    and the answer (whole or partial, also after a disconnect), unless `done` told the client it was not saved."""
    if capture.status_code != 200:
        return 0
    done = capture.of("done")
    return 1 if done and done[-1]["message_id"] is None else 2


def owed_response(response: Any) -> int:
    """`owed` for a plain (not streamed) chat response: both messages once it is a 200."""
    return 2 if response.status_code == 200 else 0


def tally(outcomes: list[str]) -> dict[str, int]:
    return dict(sorted(Counter(outcomes).items()))


@pytest.fixture(scope="session")
def fault_report_session() -> Iterator[FaultReport]:
    report = FaultReport()
    yield report
    target = os.environ.get(REPORT_VARIABLE)
    if target:
        Path(target).write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")


@pytest.fixture
def fault_report(fault_report_session: FaultReport, request: pytest.FixtureRequest) -> Iterator[_Recorder]:
    recorder = _Recorder(request.node.nodeid)
    yield recorder
    if recorder.record is not None:
        fault_report_session.add(recorder.record)


class _Recorder:
    def __init__(self, test: str) -> None:
        self._test = test
        self.record: FaultRecord | None = None

    def __call__(
        self,
        fault: str,
        injected: str,
        *,
        requests: int,
        messages_expected: int,
        messages_stored: int,
        outcomes: list[str],
        notes: str = "",
    ) -> None:
        self.record = FaultRecord(
            self._test, fault, injected, requests, messages_expected, messages_stored, tally(outcomes), notes
        )
