"""The one check for text entering the service: what no store can hold is refused, naming where it was.

Two kinds of character are never stored: NUL (Postgres `text` cannot hold it, and SQLite would hand it to
every later reader) and an unpaired UTF-16 surrogate (no encoder can write it back; JSON lets a client send
one as `\\ud800`). Bytes that claim to be text must be UTF-8: Python's strict decoder also refuses encoded
surrogates, and a UTF-16 or UTF-32 body shows up as NUL characters. Every entry point calls this module — HTTP
bodies, uploaded files and their names, the documents an ingestion writes — so each store sees only text the
others can hold too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from backend.domain.errors import InvalidRequest

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_MAX_NAME = 60


class UnstorableText(InvalidRequest):
    """Text that no store can hold, or bytes that are not UTF-8 text."""

    code = "unstorable_text"


def describe(character: str) -> str:
    if character == "\x00":
        return "a NUL character (U+0000)"
    return f"an unpaired UTF-16 surrogate (U+{ord(character):04X})"


def problem_in(text: str) -> str | None:
    """What makes `text` unstorable, or None."""
    found = _UNSTORABLE.search(text)
    return None if found is None else describe(found.group())


def check_text(value: Any, where: str) -> None:
    """Raise `UnstorableText` naming the first string in `value` (nested lists and dicts, keys included) that
    holds NUL or a lone surrogate; `where` names `value` itself (`file notes.txt`; "" for a request body, whose
    fields are then named as a client wrote them: `messages[0].content`)."""
    for path, text, is_key in _strings(value, where):
        problem = problem_in(text)
        if problem is not None:
            place = f"a key in {path or 'the body'}" if is_key else (path or "the body")
            raise UnstorableText(f"{place} contains {problem}, which cannot be stored")


def decode_text(data: bytes, where: str) -> str:
    """`data` as UTF-8 (a leading BOM dropped), checked like any other text."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise UnstorableText(
            f"{where} is not UTF-8 text (invalid byte at offset {error.start}); convert it to UTF-8"
        ) from error
    check_text(text, where)
    return text


def field_name(key: str) -> str:
    """A key as it may appear in an error message: short, and never itself unstorable."""
    if problem_in(key) is not None:
        return "?"
    return key if len(key) <= _MAX_NAME else key[: _MAX_NAME - 1] + "…"


def _strings(value: Any, where: str) -> Iterator[tuple[str, str, bool]]:
    """(path, string, is a key) for every string in `value`, iteratively: nesting depth costs no stack."""
    pending: list[tuple[str, Any]] = [(where, value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, str):
            yield path, item, False
        elif isinstance(item, dict):
            for key, inner in item.items():
                if isinstance(key, str):
                    yield path, key, True
                name = field_name(str(key))
                pending.append((f"{path}.{name}" if path else name, inner))
        elif isinstance(item, list | tuple):
            pending.extend((f"{path}[{index}]", inner) for index, inner in enumerate(item))
