"""File loaders: PDF, DOCX, JSON and JSON Lines (plus text and Markdown through `load_bytes`).

Every fixture is generated here: a hand-written PDF, DOCX files built with python-docx.
"""

from __future__ import annotations

import io
import json
import logging
import re
import zipfile
from pathlib import Path

import docx
import pypdf
import pytest
from docx.enum.text import WD_BREAK

from backend.domain.errors import InvalidRequest
from backend.domain.text import UnstorableText
from backend.infrastructure.knowledge.loaders import FileDocumentLoader, expand_paths

LOADER = FileDocumentLoader()


def minimal_pdf(pages: list[str], title: str | None = None) -> bytes:
    """A valid PDF with one line of Helvetica text per page (ASCII, no parentheses or backslashes)."""
    count = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(count))
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {count} >>",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, text in enumerate(pages):
        content = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET"
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {5 + 2 * i} 0 R >>"
        )
        objects.append(f"<< /Length {len(content)} >>\nstream\n{content}\nendstream")
    info = f"{len(objects) + 1} 0 R" if title is not None else None
    if title is not None:
        objects.append(f"<< /Title ({title}) >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{offset:010d} 00000 n \n" for offset in offsets).encode()
    trailer = f"<< /Size {len(objects) + 1} /Root 1 0 R{f' /Info {info}' if info else ''} >>"
    out += f"trailer\n{trailer}\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def blank_pdf(user_password: str | None = None) -> bytes:
    writer = pypdf.PdfWriter()
    writer.add_blank_page(612, 792)
    if user_password is not None:
        writer.encrypt(user_password=user_password, owner_password="owner", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


# -- PDF ------------------------------------------------------------------------------------------


def test_pdf_pages_are_joined_and_titled_from_the_metadata() -> None:
    data = minimal_pdf(["Scrooge keeps the counting-house cold.", "Marley was dead to begin with."], "A Carol")

    [document] = LOADER.load_bytes("carol.pdf", data)

    assert document.title == "A Carol"
    assert "Scrooge keeps the counting-house cold." in document.text
    assert document.text.index("counting-house") < document.text.index("Marley was dead")
    assert "\n\n" in document.text
    assert document.metadata == {"source": "carol.pdf", "format": "pdf", "pages": 2}
    assert document.source == "carol.pdf"


def test_pdf_without_a_title_is_named_after_the_file() -> None:
    [document] = LOADER.load_bytes("annual-report.pdf", minimal_pdf(["Revenue grew."]))

    assert document.title == "annual-report"


def test_a_pdf_without_text_yields_no_document_and_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="backend.infrastructure.knowledge.loaders"):
        assert LOADER.load_bytes("scan.pdf", blank_pdf()) == []

    assert any("scan.pdf" in r.getMessage() and "no extractable text" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "data",
    [b"", b"this is not a PDF at all", b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog", bytes(range(256)) * 4],
    ids=["empty", "text", "truncated", "binary"],
)
def test_a_corrupt_pdf_is_an_invalid_request_naming_the_file(data: bytes) -> None:
    with pytest.raises(InvalidRequest, match=r"^broken\.pdf: not a readable PDF"):
        LOADER.load_bytes("broken.pdf", data)


def test_a_password_protected_pdf_is_refused_and_an_empty_password_is_tried() -> None:
    with pytest.raises(InvalidRequest, match=r"locked\.pdf: the PDF is password-protected"):
        LOADER.load_bytes("locked.pdf", blank_pdf(user_password="secret"))
    assert LOADER.load_bytes("owner-only.pdf", blank_pdf(user_password="")) == []


# -- DOCX -----------------------------------------------------------------------------------------


def docx_bytes(document: docx.document.Document) -> bytes:
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def report_docx(title: str | None = None) -> bytes:
    document = docx.Document()
    if title is not None:
        document.core_properties.title = title
    document.add_paragraph("Preface before any heading.")
    document.add_heading("Quarterly Report", level=1)
    document.add_paragraph("Sales rose in the north.")
    table = document.add_table(rows=3, cols=3)
    for r, row in enumerate([["Region", "Q1", "Q2"], ["North", "10", "12"], ["South", "", "9"]]):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    table.cell(0, 1).merge(table.cell(0, 2)).text = "Quarters"
    document.add_heading("Outlook", level=2)
    paragraph = document.add_paragraph("Growth continues.")
    paragraph.add_run().add_break(WD_BREAK.LINE)
    paragraph.add_run("Risks remain.")
    document.add_paragraph("   ")
    return docx_bytes(document)


def test_docx_paragraphs_and_table_cells_come_in_document_order() -> None:
    [document] = LOADER.load_bytes("q3.docx", report_docx())

    assert document.text.split("\n\n") == [
        "Preface before any heading.",
        "# Quarterly Report",
        "Sales rose in the north.",
        "Region | Quarters\nNorth | 10 | 12\nSouth | 9",
        "## Outlook",
        "Growth continues.\nRisks remain.",
    ]
    assert document.metadata == {"source": "q3.docx", "format": "docx"}


def test_docx_title_prefers_core_properties_then_the_first_heading_1_then_the_file_name() -> None:
    assert LOADER.load_bytes("q3.docx", report_docx(title="Q3 Board Pack"))[0].title == "Q3 Board Pack"
    assert LOADER.load_bytes("q3.docx", report_docx())[0].title == "Quarterly Report"
    plain = docx.Document()
    plain.add_paragraph("Just text.")
    assert LOADER.load_bytes("memo.docx", docx_bytes(plain))[0].title == "memo"


def without_core_properties(data: bytes) -> bytes:
    """The DOCX as some writers make it: no docProps/core.xml, and no relationship to it."""
    output = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(output, "w") as target:
        for item in source.infolist():
            if item.filename != "docProps/core.xml":
                content = source.read(item)
                if item.filename == "_rels/.rels":
                    content = re.sub(rb"<Relationship [^>]*core-properties[^>]*/>", b"", content)
                target.writestr(item, content)
    return output.getvalue()


def test_a_docx_without_core_properties_is_titled_as_if_it_had_no_title() -> None:
    data = without_core_properties(report_docx(title="Dropped with the part"))
    assert b"core-properties" not in zipfile.ZipFile(io.BytesIO(data)).read("_rels/.rels")
    # python-docx makes up a core-properties part titled "Word Document" for such a file.
    assert LOADER.load_bytes("q3.docx", data)[0].title == "Quarterly Report"
    plain = docx.Document()
    plain.add_paragraph("Just text.")
    assert LOADER.load_bytes("memo.docx", without_core_properties(docx_bytes(plain)))[0].title == "memo"


def test_an_empty_docx_yields_no_document(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="backend.infrastructure.knowledge.loaders"):
        assert LOADER.load_bytes("blank.docx", docx_bytes(docx.Document())) == []
    assert any("blank.docx" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("data", [b"", b"PK\x03\x04 not really a zip", minimal_pdf(["x"])], ids=["empty", "zip", "pdf"])
def test_a_corrupt_docx_is_an_invalid_request_naming_the_file(data: bytes) -> None:
    with pytest.raises(InvalidRequest, match=r"^broken\.docx: not a readable DOCX"):
        LOADER.load_bytes("broken.docx", data)


# -- JSON and JSON Lines --------------------------------------------------------------------------


def test_a_json_list_of_records_becomes_one_document_each(caplog: pytest.LogCaptureFixture) -> None:
    records = [
        {"id": "faq-1", "title": "Opening hours", "text": "We open at nine.", "lang": "en", "tags": ["faq"]},
        {"title": "No text here"},
        {"text": "Untitled but useful.", "source": "https://example.invalid/page"},
        {"title": "Blank", "text": "   "},
        {"title": "Wrong type", "text": 42},
        "not a record",
    ]
    with caplog.at_level(logging.WARNING, logger="backend.infrastructure.knowledge.loaders"):
        documents = LOADER.load_bytes("faq.json", json.dumps(records).encode())

    assert [(d.title, d.text) for d in documents] == [
        ("Opening hours", "We open at nine."),
        ("faq #3", "Untitled but useful."),
    ]
    assert documents[0].metadata == {
        "id": "faq-1",
        "lang": "en",
        "tags": ["faq"],
        "source": "faq.json",
        "format": "json",
        "record": 1,
    }
    assert documents[1].metadata["source"] == "https://example.invalid/page"  # the record's own field wins
    assert [d.source for d in documents] == ["faq.json#faq-1", "faq.json#3"]
    assert any("4 record(s) without a text field skipped" in r.getMessage() for r in caplog.records)


def test_a_json_object_is_one_record() -> None:
    [document] = LOADER.load_bytes("one.json", b'{"title": "Only", "text": "One record."}')

    assert (document.title, document.text, document.metadata["record"]) == ("Only", "One record.", 1)


def test_malformed_json_names_the_line() -> None:
    data = b'[\n  {"title": "a", "text": "b"},\n  {"title": "c" "text": "d"}\n]'

    with pytest.raises(InvalidRequest, match=r"^bad\.json: malformed JSON at line 3, column 17"):
        LOADER.load_bytes("bad.json", data)


def test_json_that_is_not_records_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="expected a JSON object or a list of objects"):
        LOADER.load_bytes("scalar.json", b'"just a string"')


def test_jsonl_has_one_record_per_line_and_skips_blank_lines() -> None:
    lines = [
        json.dumps({"title": "First", "text": "Line one.", "author": "ann"}),
        "",
        json.dumps({"title": "Second", "text": "Has a line\u2028separator inside."}, ensure_ascii=False),
        json.dumps({"title": "No text"}),
    ]

    documents = LOADER.load_bytes("notes.jsonl", "\n".join(lines).encode())

    assert [d.title for d in documents] == ["First", "Second"]
    assert documents[1].text == "Has a line\u2028separator inside."
    assert documents[0].metadata == {"author": "ann", "source": "notes.jsonl", "format": "jsonl", "record": 1}
    assert documents[1].metadata["record"] == 3  # the line number
    assert [d.source for d in documents] == ["notes.jsonl#1", "notes.jsonl#3"]


def test_malformed_jsonl_names_the_line() -> None:
    data = b'{"title": "ok", "text": "fine"}\n\n{"title": broken}\n'

    with pytest.raises(InvalidRequest, match=r"^bad\.jsonl: malformed JSON on line 3, column 11"):
        LOADER.load_bytes("bad.jsonl", data)


@pytest.mark.parametrize(
    ("name", "data", "refused"),
    [
        ("deep.json", b'{"text": "x", "n": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
        ("deep.jsonl", b'{"text": "x", "n": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "line 1: the JSON is nested"),
        ("big.json", b'{"text": "x", "n": ' + b"9" * 5000 + b"}", "a number too large to read"),
        ("big.jsonl", b'{"text": "ok"}\n{"text": "x", "n": ' + b"9" * 5000 + b"}", "line 2: the JSON holds a number"),
    ],
)
def test_json_that_python_cannot_read_is_refused_naming_the_file(name: str, data: bytes, refused: str) -> None:
    with pytest.raises(InvalidRequest, match=rf"^{re.escape(name)}: .*{refused}"):
        LOADER.load_bytes(name, data)


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("nul.txt", b"KES\x00TREL-55"),
        ("nul.md", b"# Title\n\nbefore\x00after"),
        ("raw-surrogate.txt", b"bad \xed\xa0\x80 bytes"),
        ("utf16.txt", "text".encode("utf-16")),
    ],
)
def test_text_files_no_store_can_hold_are_refused_naming_the_file(name: str, data: bytes) -> None:
    with pytest.raises(UnstorableText, match=rf"^{re.escape(name)} "):
        LOADER.load_bytes(name, data)


def test_records_files_must_be_utf8() -> None:
    with pytest.raises(InvalidRequest, match="not UTF-8"):
        LOADER.load_bytes("latin.jsonl", '{"text": "café"}'.encode("latin-1"))


# -- files on disk and uploads --------------------------------------------------------------------


def test_a_file_on_disk_and_its_upload_load_alike(tmp_path: Path) -> None:
    file = tmp_path / "carol.pdf"
    file.write_bytes(minimal_pdf(["Bah humbug."], "Carol"))

    [from_disk] = [document for found in LOADER.files([file]) for document in LOADER.load(found)]
    [uploaded] = LOADER.load_bytes("carol.pdf", file.read_bytes())

    assert from_disk == uploaded  # the same source too: an upload of a changed file replaces the ingested one
    assert uploaded.source == "carol.pdf"


def test_sources_are_relative_to_the_folder_given_never_absolute(tmp_path: Path) -> None:
    folder = tmp_path / "handbook"
    (folder / "policies").mkdir(parents=True)
    (folder / "intro.md").write_text("# Intro\n\nWelcome.", "utf-8")
    (folder / "policies" / "leave.md").write_text("# Leave\n\nTwenty days.", "utf-8")
    (folder / "policies" / "faq.jsonl").write_text('{"id": "q1", "text": "Ask HR."}', "utf-8")

    documents = [document for file in LOADER.files([folder]) for document in LOADER.load(file)]

    assert [d.source for d in documents] == ["intro.md", "policies/faq.jsonl#q1", "policies/leave.md"]
    assert [d.metadata["source"] for d in documents] == ["intro.md", "policies/faq.jsonl", "policies/leave.md"]
    assert [d.title for d in documents] == ["Intro", "faq #1", "Leave"]
    alone = [document for file in LOADER.files([folder / "policies" / "leave.md"]) for document in LOADER.load(file)]
    assert [(d.source, d.metadata["source"]) for d in alone] == [("leave.md", "leave.md")]


def test_two_files_of_one_name_are_refused(tmp_path: Path) -> None:
    for name in ("2024/notes.md", "2025/notes.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("Notes.", "utf-8")

    with pytest.raises(InvalidRequest, match=r"would both be stored as 'notes\.md'"):
        LOADER.files([tmp_path / "2024", tmp_path / "2025"])
    assert [f.name for f in LOADER.files([tmp_path])] == ["2024/notes.md", "2025/notes.md"]
    assert [f.name for f in LOADER.files([tmp_path / "2024", tmp_path / "2024" / "notes.md"])] == ["notes.md"]


def test_an_upload_name_keeps_only_its_last_component() -> None:
    [document] = LOADER.load_bytes("..\\..\\secret/dir\\notes.md", b"# Notes\n\nText.")

    assert (document.title, document.source, document.metadata["source"]) == ("Notes", "notes.md", "notes.md")


@pytest.mark.parametrize("name", ["", "folder/", "archive.zip", "README"])
def test_unsupported_or_nameless_uploads_are_refused(name: str) -> None:
    with pytest.raises(InvalidRequest):
        LOADER.load_bytes(name, b"data")


def test_text_uploads_behave_like_text_files() -> None:
    [document] = LOADER.load_bytes("hours.TXT", "\ufeffOpen daily.".encode())

    assert (document.title, document.text, document.metadata) == (
        "hours",
        "Open daily.",
        {"source": "hours.TXT", "format": "text"},
    )


def test_directories_are_walked_for_every_supported_format(tmp_path: Path) -> None:
    for name in ["a.pdf", "b.docx", "c.json", "d.jsonl", "e.md", "f.txt", "g.xlsx", ".hidden.json"]:
        (tmp_path / name).write_bytes(b"")

    found = [p.name for p in expand_paths([tmp_path], LOADER)]

    assert found == ["a.pdf", "b.docx", "c.json", "d.jsonl", "e.md", "f.txt"]
    assert LOADER.files([tmp_path]) == expand_paths([tmp_path])
