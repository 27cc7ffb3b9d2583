"""The recorded real-model outputs in tests/fixtures/llm_replay (see its README)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

REPLAY_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "llm_replay"


def replay_file(name: str) -> Path:
    return REPLAY_DIR / name


@cache
def _completions() -> tuple[str, ...]:
    entries = json.loads(replay_file("nano_mock_cache.json").read_text(encoding="utf-8"))
    return tuple(str(entry["return"]) for entry in entries.values())


def recorded_extractions() -> tuple[str, ...]:
    """The 84 entity/relationship extraction outputs (tuple records with `<|>`), in file order."""
    return tuple(text for text in _completions() if "<|>" in text)


def recorded_reports() -> tuple[str, ...]:
    """The 101 community reports (JSON objects with `findings`), in file order."""
    reports = []
    for text in _completions():
        try:
            parsed = json.loads(text)
        except ValueError:
            continue
        if isinstance(parsed, dict) and "findings" in parsed:
            reports.append(text)
    return tuple(reports)
