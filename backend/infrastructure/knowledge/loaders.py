"""Loading plain-text and Markdown files as source documents."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from backend.application.ports.ingestion import SourceDocument
from backend.domain.errors import InvalidRequest

SUPPORTED_SUFFIXES: frozenset[str] = frozenset({".txt", ".md", ".markdown"})
_MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
_H1 = re.compile(r"^#[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


class FileDocumentLoader:
    """DocumentLoader for `.txt` and `.md` files (UTF-8; a BOM is accepted).

    The title is the first level-1 Markdown heading (`# Title`) or else the file name without its
    suffix; the metadata carries the source file name and format.
    """

    def supports(self, path: Path) -> bool:
        return path.suffix.lower() in SUPPORTED_SUFFIXES

    def files(self, paths: Sequence[Path]) -> list[Path]:
        return expand_paths(paths, self)

    def load(self, path: Path) -> list[SourceDocument]:
        if not self.supports(path):
            raise InvalidRequest(f"{path.name}: unsupported file type (supported: {_supported_list()})")
        text = _read_utf8(path)
        if not text.strip():
            return []
        markdown = path.suffix.lower() in _MARKDOWN_SUFFIXES
        title = (first_heading(text) if markdown else None) or path.stem
        metadata = {"source": path.name, "format": "markdown" if markdown else "text"}
        return [SourceDocument(title=title, text=text, metadata=metadata)]


def first_heading(markdown: str) -> str | None:
    """The text of the first `# heading` outside fenced code blocks, if any."""
    in_fence = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        match = None if in_fence else _H1.match(line)
        if match:
            return match.group(1).strip()
    return None


def expand_paths(paths: Iterable[Path], loader: FileDocumentLoader | None = None) -> list[Path]:
    """Files to load: given files as they are, directories walked recursively for supported files.

    Hidden files and folders are skipped; the order is sorted and deterministic; repeats are dropped.
    """
    supported = loader or FileDocumentLoader()
    found: dict[Path, None] = {}
    for path in paths:
        if path.is_dir():
            for file in sorted(path.rglob("*"), key=lambda p: p.relative_to(path).as_posix()):
                if file.is_file() and supported.supports(file) and not _is_hidden(file.relative_to(path)):
                    found.setdefault(file, None)
        elif path.is_file():
            if not supported.supports(path):
                raise InvalidRequest(f"{path.name}: unsupported file type (supported: {_supported_list()})")
            found.setdefault(path, None)
        else:
            raise InvalidRequest(f"no such file or directory: {path}")
    return list(found)


def _read_utf8(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidRequest(f"cannot read {path.name}: {exc.strerror or exc}") from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidRequest(
            f"{path.name} is not UTF-8 text (undecodable byte at offset {exc.start}); "
            "convert it to UTF-8 and ingest it again"
        ) from exc


def _is_hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def _supported_list() -> str:
    return ", ".join(sorted(SUPPORTED_SUFFIXES))
