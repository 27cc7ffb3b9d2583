"""Loading files as source documents: text, Markdown, PDF, DOCX and JSON / JSON Lines records.

Every format goes through `FileDocumentLoader.load_bytes`, so an uploaded file (name and bytes) and a
file on disk load the same way. A file that cannot be parsed raises `InvalidRequest` naming it; a file
that parses but holds no text yields no document and a warning.
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Final

import docx
import pypdf
from docx.document import Document as DocxDocument
from docx.opc.constants import RELATIONSHIP_TYPE as RT
from docx.opc.parts.coreprops import CorePropertiesPart
from docx.table import Table
from docx.text.paragraph import Paragraph

from backend.application.ports.ingestion import SourceDocument, SourceFile
from backend.domain.errors import InvalidRequest
from backend.domain.text import decode_text

_log = logging.getLogger(__name__)

SUPPORTED_SUFFIXES: frozenset[str] = frozenset({".txt", ".md", ".markdown", ".pdf", ".docx", ".json", ".jsonl"})
_MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
_H1 = re.compile(r"^#[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_DOCX_HEADING = re.compile(r"^Heading ([1-6])$")
# Record fields that become the document itself rather than its metadata.
_RECORD_FIELDS: Final = ("title", "text")

# (file name, content) → documents; the name is their source
_Parser = Callable[[str, bytes], list[SourceDocument]]


class FileDocumentLoader:
    """DocumentLoader for `.txt`, `.md`, `.pdf`, `.docx`, `.json` and `.jsonl` files.

    Titles: text files use the file name; Markdown its first `# heading`; PDF its metadata title;
    DOCX its core-properties title or first Heading 1; records their `title` field. Whatever lacks
    one is named after the file. The metadata carries the file's name and format.
    `SourceDocument.source` is the file's name as `files` gives it: its path relative to the folder it was
    found in, or its own name (a record's adds `#id`); for an upload, the upload's name.
    """

    def supports(self, path: Path) -> bool:
        return path.suffix.lower() in SUPPORTED_SUFFIXES

    def files(self, paths: Sequence[Path]) -> list[SourceFile]:
        return expand_paths(paths, self)

    def load(self, file: SourceFile) -> list[SourceDocument]:
        return _parser_for(file.name)(file.name, _read_bytes(file.path))

    def load_bytes(self, name: str, data: bytes) -> list[SourceDocument]:
        """Documents from an uploaded file; only the last component of `name` is used."""
        base = PurePosixPath(name.replace("\\", "/")).name
        if not base:
            raise InvalidRequest("an uploaded file needs a name")
        return _parser_for(base)(base, data)


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


def expand_paths(paths: Iterable[Path], loader: FileDocumentLoader | None = None) -> list[SourceFile]:
    """Files to load: given files as they are, directories walked recursively for supported files.

    Each is named relative to the directory it was found in, or by its own name when given itself. Hidden
    files and folders are skipped; the order is sorted and deterministic; repeats are dropped (the first
    name stays). Two different files of one name are refused: one would replace the other.
    """
    supported = loader or FileDocumentLoader()
    found: dict[Path, SourceFile] = {}
    for path in paths:
        if path.is_dir():
            for file in sorted(path.rglob("*"), key=lambda p: p.relative_to(path).as_posix()):
                relative = file.relative_to(path)
                if file.is_file() and supported.supports(file) and not _is_hidden(relative):
                    found.setdefault(file.resolve(), SourceFile(file, relative.as_posix()))
        elif path.is_file():
            if not supported.supports(path):
                raise InvalidRequest(f"{path.name}: unsupported file type (supported: {_supported_list()})")
            found.setdefault(path.resolve(), SourceFile(path, path.name))
        else:
            raise InvalidRequest(f"no such file or directory: {path}")
    _check_names_differ(found.values())
    return list(found.values())


def _check_names_differ(files: Iterable[SourceFile]) -> None:
    seen: dict[str, Path] = {}
    for file in files:
        other = seen.setdefault(file.name, file.path)
        if other != file.path:
            raise InvalidRequest(
                f"{other} and {file.path} would both be stored as {file.name!r} (a file is named relative to the "
                "folder given): ingest them into different knowledge bases, or give their common parent folder"
            )


def _parser_for(name: str) -> _Parser:
    parser = _PARSERS.get(PurePosixPath(name).suffix.lower())
    if parser is None:
        raise InvalidRequest(f"{name}: unsupported file type (supported: {_supported_list()})")
    return parser


def _stem(name: str) -> str:
    return PurePosixPath(name).stem or name


# -- text and Markdown ----------------------------------------------------------------------------


def _load_text(name: str, data: bytes) -> list[SourceDocument]:
    text = decode_text(data, name)
    if not text.strip():
        return []
    markdown = PurePosixPath(name).suffix.lower() in _MARKDOWN_SUFFIXES
    title = (first_heading(text) if markdown else None) or _stem(name)
    metadata = {"source": name, "format": "markdown" if markdown else "text"}
    return [SourceDocument(title=title, text=text, metadata=metadata, source=name)]


# -- PDF ------------------------------------------------------------------------------------------


def _load_pdf(name: str, data: bytes) -> list[SourceDocument]:
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        _unlock(name, reader)
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
        title = _pdf_title(reader)
    except InvalidRequest:
        raise
    except Exception as exc:  # untrusted bytes: whatever the parser trips on, the file is at fault
        raise InvalidRequest(f"{name}: not a readable PDF file ({_short(exc)})") from exc
    text = "\n\n".join(page for page in pages if page)
    if not text:
        _log.warning("%s: no extractable text (a scanned or empty PDF?); no document loaded", name)
        return []
    metadata = {"source": name, "format": "pdf", "pages": len(pages)}
    return [SourceDocument(title=title or _stem(name), text=text, metadata=metadata, source=name)]


def _unlock(name: str, reader: pypdf.PdfReader) -> None:
    """Many PDFs are encrypted with an empty user password; others cannot be read."""
    if reader.is_encrypted and reader.decrypt("") == pypdf.PasswordType.NOT_DECRYPTED:
        raise InvalidRequest(f"{name}: the PDF is password-protected")


def _pdf_title(reader: pypdf.PdfReader) -> str:
    info = reader.metadata
    title = info.title if info is not None else None
    return title.strip() if isinstance(title, str) else ""


# -- DOCX -----------------------------------------------------------------------------------------


def _load_docx(name: str, data: bytes) -> list[SourceDocument]:
    try:
        document = docx.Document(io.BytesIO(data))
        blocks = [block for block in _docx_blocks(document) if block]
        title = _docx_core_title(document) or _docx_heading1(document)
    except Exception as exc:  # untrusted bytes: whatever the parser trips on, the file is at fault
        raise InvalidRequest(f"{name}: not a readable DOCX file ({_short(exc)})") from exc
    if not blocks:
        _log.warning("%s: the document has no text; no document loaded", name)
        return []
    metadata = {"source": name, "format": "docx"}
    return [SourceDocument(title=title or _stem(name), text="\n\n".join(blocks), metadata=metadata, source=name)]


def _docx_blocks(document: DocxDocument) -> Iterator[str]:
    """Paragraphs and tables in document order; headings as Markdown headings, for the chunker."""
    for item in document.iter_inner_content():
        if isinstance(item, Paragraph):
            yield _paragraph_text(item)
        elif isinstance(item, Table):
            yield _table_text(item)


def _paragraph_text(paragraph: Paragraph) -> str:
    text = paragraph.text.strip()
    heading = _DOCX_HEADING.match(_style_name(paragraph))
    return f"{'#' * int(heading.group(1))} {text}" if heading and text else text


def _table_text(table: Table) -> str:
    """One line per row, cells separated by " | "; a merged cell is written once."""
    lines = []
    for row in table.rows:
        seen: set[int] = set()
        cells = []
        for cell in row.cells:
            if id(cell._tc) in seen:  # merged cells repeat the same XML element
                continue
            seen.add(id(cell._tc))
            if text := " ".join(cell.text.split()):
                cells.append(text)
        if cells:
            lines.append(" | ".join(cells))
    return "\n".join(lines)


def _docx_core_title(document: DocxDocument) -> str:
    """The Title of the file's core properties; "" for a file without them, which python-docx would title
    "Word Document" (it makes up a core-properties part for such a file)."""
    try:
        part = document.part.package.part_related_by(RT.CORE_PROPERTIES)
    except KeyError:
        return ""
    return (part.core_properties.title or "").strip() if isinstance(part, CorePropertiesPart) else ""


def _docx_heading1(document: DocxDocument) -> str:
    for paragraph in document.paragraphs:
        if _style_name(paragraph) == "Heading 1" and paragraph.text.strip():
            return paragraph.text.strip()
    return ""


def _style_name(paragraph: Paragraph) -> str:
    style = paragraph.style
    return (style.name or "") if style is not None else ""


# -- JSON and JSON Lines records ------------------------------------------------------------------


def _load_json(name: str, data: bytes) -> list[SourceDocument]:
    text = decode_text(data, name)
    if not text.strip():
        return []
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidRequest(f"{name}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from exc
    except _UNPARSABLE as exc:
        raise InvalidRequest(f"{name}: {_unparsable(exc)}") from exc
    if not isinstance(value, list | dict):
        raise InvalidRequest(f"{name}: expected a JSON object or a list of objects")
    records = value if isinstance(value, list) else [value]
    return _records_to_documents(name, "json", enumerate(records, start=1))


def _load_jsonl(name: str, data: bytes) -> list[SourceDocument]:
    text = decode_text(data, name)
    return _records_to_documents(name, "jsonl", _jsonl_records(name, text))


def _jsonl_records(name: str, text: str) -> Iterator[tuple[int, Any]]:
    """(line number, value) per non-blank line."""
    # split("\n"), not splitlines(): U+2028 and friends are legal inside JSON strings.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidRequest(f"{name}: malformed JSON on line {number}, column {exc.colno}: {exc.msg}") from exc
        except _UNPARSABLE as exc:
            raise InvalidRequest(f"{name}: line {number}: {_unparsable(exc)}") from exc


def _records_to_documents(name: str, fmt: str, records: Iterable[tuple[int, Any]]) -> list[SourceDocument]:
    """Records with a non-empty string `text` become documents; the others are counted and skipped."""
    documents: list[SourceDocument] = []
    skipped = 0
    for position, record in records:
        document = _record_document(name, fmt, position, record)
        if document is None:
            skipped += 1
        else:
            documents.append(document)
    if skipped:
        _log.warning("%s: %d record(s) without a text field skipped", name, skipped)
    return documents


def _record_document(name: str, fmt: str, position: int, record: Any) -> SourceDocument | None:
    if not isinstance(record, dict):
        return None
    text = record.get("text")
    if not isinstance(text, str) or not text.strip():
        return None
    raw_title = record.get("title")
    title = str(raw_title).strip() if isinstance(raw_title, str | int | float) else ""
    # The record's own fields win over the loader's provenance keys (a record may have its own "source").
    metadata = {key: value for key, value in record.items() if key not in _RECORD_FIELDS}
    for key, value in (("source", name), ("format", fmt), ("record", position)):
        metadata.setdefault(key, value)
    record_id = record.get("id")
    suffix = record_id if isinstance(record_id, str | int) and not isinstance(record_id, bool) else position
    return SourceDocument(
        title=title or f"{_stem(name)} #{position}", text=text, metadata=metadata, source=f"{name}#{suffix}"
    )


# -- shared ---------------------------------------------------------------------------------------


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InvalidRequest(f"cannot read {path.name}: {exc.strerror or exc}") from exc


# Valid JSON syntax that Python will not turn into values: nesting deeper than its recursion limit, or an
# integer with more digits than `sys.get_int_max_str_digits()`.
_UNPARSABLE = (RecursionError, ValueError)


def _unparsable(exc: Exception) -> str:
    if isinstance(exc, RecursionError):
        return "the JSON is nested too deeply"
    return "the JSON holds a number too large to read"


def _short(exc: Exception) -> str:
    message = " ".join(str(exc).split()) or type(exc).__name__
    return message if len(message) <= 200 else message[:199] + "…"


def _is_hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def _supported_list() -> str:
    return ", ".join(sorted(SUPPORTED_SUFFIXES))


_PARSERS: Final[dict[str, _Parser]] = {
    ".txt": _load_text,
    ".md": _load_text,
    ".markdown": _load_text,
    ".pdf": _load_pdf,
    ".docx": _load_docx,
    ".json": _load_json,
    ".jsonl": _load_jsonl,
}
