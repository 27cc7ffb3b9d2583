"""Stable ids, derived from content (SPEC §3: never random).

Documents are keyed by content hash. Chunk, entity and community ids include the KB, so that the
same document or name in two KBs yields different records and no query can cross KBs by id.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable

_TRAILING_SPACE = re.compile(r"[ \t]+(?=\n|$)")
_NAME_NOISE = re.compile(r"[\"'“”‘’`*_]+")
_NAME_SPACE = re.compile(r"\s+")
_SEP = "\x1f"


def _digest(*parts: str, length: int = 40) -> str:
    return hashlib.sha256(_SEP.join(parts).encode("utf-8")).hexdigest()[:length]


def normalise_text(text: str) -> str:
    """The form a document is hashed and chunked in: NFC, LF line ends, no trailing blanks."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    return _TRAILING_SPACE.sub("", text).strip()


def document_id(title: str, text: str) -> str:
    """Content hash: the same title and (normalised) text always give the same id, in any KB."""
    payload = f"{unicodedata.normalize('NFC', title.strip())}\n\x00\n{normalise_text(text)}"
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def chunk_id(kb: str, doc_id: str, ordinal: int) -> str:
    return _digest("chunk", kb, doc_id, str(ordinal))


def normalise_entity_name(name: str) -> str:
    """The merge key of an entity name: NFKC, case-folded, quotes and emphasis stripped, spaces collapsed."""
    cleaned = _NAME_NOISE.sub("", unicodedata.normalize("NFKC", name))
    return _NAME_SPACE.sub(" ", cleaned).strip(" .,;:").casefold()


def entity_id(kb: str, name: str) -> str:
    return _digest("entity", kb, normalise_entity_name(name))


def community_id(kb: str, level: int, member_ids: Iterable[str]) -> str:
    """The same members at the same level always give the same id (so summaries can be reused)."""
    return _digest("community", kb, str(level), *sorted(member_ids))
