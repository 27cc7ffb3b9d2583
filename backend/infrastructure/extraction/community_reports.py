"""Community reports written by a language model, with the extractive summary as the fallback.

The model gets the community's most central entities and strongest internal relations (within a
character budget) and is asked for one JSON object: title, summary, rating (0–10), a rating
explanation and findings. Real models wrap that object in code fences or prose, leave trailing
commas, omit fields or quote the rating; `parse_community_report` accepts all of that. A model
failure or a reply with nothing usable falls back to the extractive summary, with a warning.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from backend.application.ports.chat_model import ChatModel
from backend.domain.conversation import Message, Role
from backend.domain.errors import ModelError
from backend.domain.graph import EntityRecord, RelationRecord
from backend.graphrag_agent.communities import CommunityDraft
from backend.graphrag_agent.community_summaries import (
    MAX_RANK,
    CommunitySummary,
    central_entities,
    clip,
    extractive_summary,
    internal_relations,
    structural_rank,
)

_log = logging.getLogger(__name__)

DEFAULT_MAX_PROMPT_CHARS: Final = 12_000
DEFAULT_MAX_SUMMARY_CHARS: Final = 2_000
_MIN_PROMPT_CHARS: Final = 1_000  # room for the headings and a few lines of each kind
_MAX_ENTITY_DESCRIPTION_CHARS: Final = 400
_MAX_RELATION_DESCRIPTION_CHARS: Final = 300
_MAX_TITLE_CHARS: Final = 120
# Candidate object starts tried in one reply: bounds the work on long garbage.
_MAX_OBJECT_STARTS: Final = 32

REPORT_SYSTEM_PROMPT: Final = (
    "You are an analyst describing one community of a knowledge graph: a group of entities that are "
    "closely connected to each other. Base every statement on the entities and relations you are given; "
    "do not add outside knowledge.\n"
    "Reply with a single JSON object and nothing else, shaped like this:\n"
    '{"title": "...", "summary": "...", "rating": 0.0, "rating_explanation": "...", '
    '"findings": [{"summary": "...", "explanation": "..."}]}\n'
    "- title: a short, specific name for the community that mentions its key entities.\n"
    "- summary: three to five sentences on what holds the community together and how its main "
    "entities relate.\n"
    "- rating: a number from 0 to 10 for how important the community is to the material it comes "
    "from (0 = marginal, 10 = central).\n"
    "- rating_explanation: one sentence justifying the rating.\n"
    "- findings: two to five key observations, each a one-line summary plus a short explanation.\n"
    "Write the text in the language of the entity descriptions."
)

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_NUMBER = re.compile(r"-?\d+(?:[.,]\d+)?")
_DECODER = json.JSONDecoder(strict=False)  # tolerates raw newlines inside strings


class ReportParseError(ValueError):
    """The reply holds no JSON object with a summary or findings."""


@dataclass(frozen=True, slots=True)
class Finding:
    summary: str
    explanation: str = ""


@dataclass(frozen=True, slots=True)
class CommunityReport:
    """A parsed report; `title` may be empty and `rating` is None when the model gave none."""

    title: str
    summary: str
    rating: float | None
    rating_explanation: str
    findings: tuple[Finding, ...]

    def text(self, limit: int = DEFAULT_MAX_SUMMARY_CHARS) -> str:
        """The summary followed by the findings as a list, within `limit` characters."""
        parts = [self.summary] if self.summary else []
        parts += [f"- {f.summary}: {f.explanation}" if f.explanation else f"- {f.summary}" for f in self.findings]
        text = parts[0] if parts else ""
        for part in parts[1:]:
            separator = "\n\n" if text == self.summary else "\n"
            if len(text) + len(separator) + len(part) > limit:
                break
            text = f"{text}{separator}{part}"
        return clip(text, limit)


def parse_community_report(reply: str) -> CommunityReport:
    """The report in a model's reply; raises `ReportParseError` when there is none."""
    raw = _report_object(_THINK_BLOCK.sub("", reply))
    if raw is None:
        raise ReportParseError("no JSON object found in the reply")
    findings = tuple(f for f in (_finding(item) for item in _as_list(raw.get("findings"))) if f is not None)
    summary = _text(raw.get("summary"))
    if not summary and not findings:
        raise ReportParseError("the report has neither a summary nor findings")
    return CommunityReport(
        title=_text(raw.get("title")),
        summary=summary,
        rating=_rating(raw.get("rating")),
        rating_explanation=_text(raw.get("rating_explanation")),
        findings=findings,
    )


def _report_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text` that looks like a report (fences and prose around it ignored)."""
    start = text.find("{")
    tries = 0
    while start != -1 and tries < _MAX_OBJECT_STARTS:
        tries += 1
        tail = text[start:]
        for candidate in (tail, _TRAILING_COMMA.sub(r"\1", tail)):
            try:
                value, _end = _DECODER.raw_decode(candidate)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict) and _looks_like_report(value):
                return value
        start = text.find("{", start + 1)
    return None


def _looks_like_report(value: dict[str, Any]) -> bool:
    """A report has a title, findings or a rating; a finding's {summary, explanation} alone is not one."""
    if value.keys() & {"title", "findings", "rating", "rating_explanation"}:
        return True
    return "summary" in value and "explanation" not in value


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return ""


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _finding(item: Any) -> Finding | None:
    if isinstance(item, str):
        return Finding(item.strip()) if item.strip() else None
    if not isinstance(item, dict):
        return None
    summary, explanation = _text(item.get("summary")), _text(item.get("explanation"))
    if not summary and not explanation:
        return None
    return Finding(summary or clip(explanation, _MAX_TITLE_CHARS), explanation if summary else "")


def _rating(value: Any) -> float | None:
    """A number in [0, 10]: numbers as they are, strings like "7.5", "8/10" or "Rating: 6"."""
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str) and (match := _NUMBER.search(value)):
        number = float(match.group().replace(",", "."))
    if number is None or not math.isfinite(number):
        return None
    return min(MAX_RANK, max(0.0, number))


# -- the prompt -----------------------------------------------------------------------------------


def report_messages(
    draft: CommunityDraft,
    entities: Mapping[str, EntityRecord],
    relations: Sequence[RelationRecord],
    max_chars: int = DEFAULT_MAX_PROMPT_CHARS,
) -> list[Message]:
    """System and user turns for one community; the user turn stays within `max_chars`."""
    inside = internal_relations(draft, relations)
    central = central_entities(draft, entities, inside)
    header = f"Community of {draft.size} entities (hierarchy level {draft.level}).\n"
    entity_lines = [_entity_line(e) for e in central]
    relation_lines = [line for line in (_relation_line(r, entities) for r in inside) if line]
    # Relations get what the entities leave, but never less than a third of the budget.
    entity_budget = max_chars - len(header) - min(sum(len(line) + 1 for line in relation_lines), max_chars // 3)
    entity_block = _bounded_block("Entities (name | type | description):", entity_lines, entity_budget)
    relation_budget = max_chars - len(header) - len(entity_block)
    relation_block = _bounded_block(
        "Relations (source | target | weight | description):", relation_lines, relation_budget
    )
    user = f"{header}\n{entity_block}\n{relation_block}".rstrip()
    return [Message(Role.SYSTEM, REPORT_SYSTEM_PROMPT), Message(Role.USER, user)]


def _one_line(text: str, limit: int) -> str:
    return clip(" ".join(text.split()).replace("|", "/"), limit)


def _entity_line(entity: EntityRecord) -> str:
    description = _one_line(entity.description, _MAX_ENTITY_DESCRIPTION_CHARS)
    return f"{_one_line(entity.name, _MAX_TITLE_CHARS)} | {entity.type} | {description}"


def _relation_line(relation: RelationRecord, entities: Mapping[str, EntityRecord]) -> str:
    source, target = entities.get(relation.source_id), entities.get(relation.target_id)
    if source is None or target is None:
        return ""
    description = _one_line(relation.description, _MAX_RELATION_DESCRIPTION_CHARS)
    names = f"{_one_line(source.name, _MAX_TITLE_CHARS)} | {_one_line(target.name, _MAX_TITLE_CHARS)}"
    return f"{names} | {relation.weight:g} | {description}"


def _bounded_block(heading: str, lines: Sequence[str], budget: int) -> str:
    """The heading and as many lines as fit in `budget` characters, then a count of those left out."""
    kept: list[str] = []
    used = len(heading) + 1
    for line in lines:
        if used + len(line) + 1 > budget - 40:  # room for the "more not shown" note
            break
        kept.append(line)
        used += len(line) + 1
    if len(kept) < len(lines):
        kept.append(f"(… {len(lines) - len(kept)} more not shown)")
    return "\n".join([heading, *(kept or ["(none)"])]) + "\n"


# -- summarizers ----------------------------------------------------------------------------------


class ExtractiveCommunitySummarizer:
    """`CommunitySummarizer` without a model (offline)."""

    async def summarize(
        self,
        kb: str,
        draft: CommunityDraft,
        entities: Mapping[str, EntityRecord],
        relations: Sequence[RelationRecord],
    ) -> CommunitySummary:
        return extractive_summary(draft, entities, relations)


class LlmCommunitySummarizer:
    """`CommunitySummarizer` over a chat model; falls back to the extractive summary (and warns)."""

    def __init__(
        self,
        model: ChatModel,
        *,
        max_prompt_chars: int = DEFAULT_MAX_PROMPT_CHARS,
        max_summary_chars: int = DEFAULT_MAX_SUMMARY_CHARS,
    ) -> None:
        if max_prompt_chars < _MIN_PROMPT_CHARS:
            raise ValueError(f"max_prompt_chars must be at least {_MIN_PROMPT_CHARS}")
        self._model = model
        self._max_prompt_chars = max_prompt_chars
        self._max_summary_chars = max_summary_chars
        self._fallbacks = 0

    @property
    def fallbacks(self) -> int:
        """How many communities got the extractive summary because the model failed."""
        return self._fallbacks

    async def summarize(
        self,
        kb: str,
        draft: CommunityDraft,
        entities: Mapping[str, EntityRecord],
        relations: Sequence[RelationRecord],
    ) -> CommunitySummary:
        messages = report_messages(draft, entities, relations, self._max_prompt_chars)
        try:
            report = parse_community_report(await self._model.complete(messages))
        except (ModelError, ReportParseError) as exc:
            self._fallbacks += 1
            _log.warning(
                "community report for %s (kb %s, level %d) failed, using the extractive summary: %s",
                draft.community_id,
                kb,
                draft.level,
                exc,
            )
            return extractive_summary(draft, entities, relations)
        title = clip(report.title, _MAX_TITLE_CHARS) or extractive_summary(draft, entities, relations).title
        rank = report.rating if report.rating is not None else structural_rank(draft)
        return CommunitySummary(title, report.text(self._max_summary_chars), rank)
