"""Parser for the GraphRAG tuple format that LLM entity extraction answers in.

    ("entity"<|>name<|>type<|>description)##
    ("relationship"<|>source<|>target<|>description<|>strength)<|COMPLETE|>

Real model output deviates from that often (see the llm_replay fixtures): a missing or lower-case
completion marker, empty `##` records, markdown headings and numbered lists around the records, code
fences, a `"relation"` label, curly quotes, a missing strength, records separated by newlines only, and
a broken `"|>` delimiter. So records are found by where they *start* (an opening parenthesis, or a line
start, followed by a label and the tuple delimiter) rather than by splitting on `##`, and each one ends
where the next begins. Records that still make no sense are skipped and counted; parsing never raises.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

COMPLETION_MARKER = "<|COMPLETE|>"
TUPLE_DELIMITER = "<|>"
RECORD_DELIMITER = "##"

_QUOTES = "\"'`“”‘’„«»"
_Q = re.escape(_QUOTES)
# A record starts at "(" or at a line start (after list numbers, bullets or `##`), then an optionally
# quoted label, then the tuple delimiter.
_LINE_LEAD = r"^[ \t]*(?:\d{1,3}[.)][ \t]*|[-*+][ \t]+)?(?:##[ \t]*)?\(?"
_RECORD_START = re.compile(
    rf"(?:\(|{_LINE_LEAD})[ \t]*[{_Q}]?[ \t]*([A-Za-z_]+)[ \t]*[{_Q}]?[ \t]*<\|>",
    re.MULTILINE,
)
# The record's closing parenthesis: followed by the record delimiter, the marker, a line end or nothing.
_RECORD_END = re.compile(r"\)[ \t]*(?:##|<\|\s*complete|\r?\n|$)", re.IGNORECASE)
# "<|>" and the "|>" that loses its "<" (seen as `"...text."|>9)` in real output).
_FIELD_DELIMITER = re.compile(r"<?/?\|>")
_TRAILING_NOISE = re.compile(r"(?:\s|##|```|<\|complete\|>|\))+$", re.IGNORECASE)
_COMPLETION = re.compile(r"<\|\s*complete\s*\|>", re.IGNORECASE)
_EMPHASIS = re.compile(r"^\*+|\*+$")

_ENTITY_LABELS = frozenset({"entity", "entities", "node"})
_RELATION_LABELS = frozenset({"relationship", "relationships", "relation", "relations", "edge"})


@dataclass(frozen=True, slots=True)
class TupleEntity:
    name: str
    type: str  # lower-case as the model wrote it ("geo", "person"); may be ""
    description: str


@dataclass(frozen=True, slots=True)
class TupleRelationship:
    source: str
    target: str
    description: str
    strength: float | None  # None when the model left it out or wrote no number


@dataclass(frozen=True, slots=True)
class ParsedTuples:
    entities: tuple[TupleEntity, ...]
    relationships: tuple[TupleRelationship, ...]
    skipped: int  # records with a known label that could not be read, or with an unknown label
    complete: bool  # the completion marker was present (in any case)


def parse_tuples(text: str) -> ParsedTuples:
    """Every entity and relationship record in a model's answer, in order of appearance."""
    entities: list[TupleEntity] = []
    relationships: list[TupleRelationship] = []
    skipped = 0
    starts = list(_RECORD_START.finditer(text))
    for index, start in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(text)
        label = start.group(1).lower()
        fields = _fields(text[start.end() : end])
        record: TupleEntity | TupleRelationship | None = None
        if label in _ENTITY_LABELS:
            record = _entity(fields)
        elif label in _RELATION_LABELS:
            record = _relationship(fields)
        if isinstance(record, TupleEntity):
            entities.append(record)
        elif isinstance(record, TupleRelationship):
            relationships.append(record)
        else:
            skipped += 1
    return ParsedTuples(tuple(entities), tuple(relationships), skipped, bool(_COMPLETION.search(text)))


def _fields(body: str) -> list[str]:
    """The fields of one record body (the text after its label), cleaned of quotes and trailing noise."""
    closing = _RECORD_END.search(body)
    if closing is not None:
        body = body[: closing.start()]
    body = _COMPLETION.sub("", body)
    body = _TRAILING_NOISE.sub("", body)
    return [_clean(field) for field in _FIELD_DELIMITER.split(body)]


def _clean(field: str) -> str:
    field = _EMPHASIS.sub("", field.strip()).strip()
    quoted = len(field) >= 2 and field[0] in _QUOTES and field[-1] in _QUOTES
    # Otherwise a lone quote may be left at one end (a truncated record, a quote glued to a broken delimiter).
    field = field[1:-1] if quoted else field.strip('"“”„«»')
    return _EMPHASIS.sub("", field.strip()).strip()  # "**Scrooge**" inside the quotes


def _entity(fields: list[str]) -> TupleEntity | None:
    if len(fields) < 2 or not fields[0]:
        return None
    description = " ".join(field for field in fields[2:] if field)
    return TupleEntity(name=fields[0], type=fields[1].lower(), description=description)


def _relationship(fields: list[str]) -> TupleRelationship | None:
    if len(fields) < 3 or not fields[0] or not fields[1]:
        return None
    strength = _number(fields[-1]) if len(fields) >= 4 else None
    rest = fields[2:-1] if strength is not None else fields[2:]
    description = " ".join(field for field in rest if field)
    return TupleRelationship(source=fields[0], target=fields[1], description=description, strength=strength)


def _number(field: str) -> float | None:
    try:
        value = float(field.strip(_QUOTES + " "))
    except ValueError:
        return None
    return value if math.isfinite(value) else None
