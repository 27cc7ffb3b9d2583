"""The evaluation datasets of ../shared/datasets as documents to ingest and questions with gold keys.

A *gold key* names what a question needs in the dataset's own terms: a passage title (2wiki), a chat
session timestamp (LiHua-World) or a passage id (CMRC 2018). Retrieved chunks carry the id of their
document, which is a content hash of title and text (`ids.document_id`), so `Dataset.keys_of` maps a
result back to the keys of the source it came from without any help from the product.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from backend.application.ports.ingestion import SourceDocument
from backend.domain import ids
from backend.infrastructure.knowledge.loaders import FileDocumentLoader
from tests.support.datasets import datasets_dir

ROOT = Path(__file__).resolve().parent.parent
DATASETS = datasets_dir()  # $DATASETS_DIR, else ../shared/datasets beside the repository
HIPPORAG_RECALL_AT_5 = {  # 2WikiMultiHopQA, 1,000 questions, this corpus (HippoRAG and HippoRAG 2 papers)
    "BM25": 0.619,
    "ColBERTv2": 0.682,
    "HippoRAG": 0.895,
    "HippoRAG 2 (70B model in the loop)": 0.904,
}


@dataclass(frozen=True, slots=True)
class Question:
    question_id: str
    text: str
    gold: tuple[str, ...]  # gold keys; empty for a question the corpus cannot answer
    kind: str = ""  # LiHua-World: Single, Multi or Null


@dataclass(slots=True)
class Dataset:
    name: str
    language: str
    documents: list[SourceDocument]
    questions: list[Question]
    keys_by_doc: dict[str, set[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.keys_by_doc:
            raise ValueError(f"{self.name}: no gold keys for the documents")

    def keys_of(self, doc_id: str) -> set[str]:
        return self.keys_by_doc.get(doc_id, set())

    def files(self) -> list[Path]:
        """The dataset files the index depends on (for the cache signature)."""
        return sorted({Path(d.source.split("#", 1)[0]) for d in self.documents if d.source})


def _keyed(documents: Sequence[tuple[SourceDocument, str]]) -> tuple[list[SourceDocument], dict[str, set[str]]]:
    keys: dict[str, set[str]] = defaultdict(set)
    for document, key in documents:
        keys[ids.document_id(document.title, document.text)].add(key)
    return [document for document, _ in documents], dict(keys)


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def load_2wiki(passages: int | None = None, root: Path = DATASETS) -> Dataset:
    """2WikiMultihopQA: 6,119 passages (or the first `passages`), 51 dev questions with gold titles.

    With a prefix of the corpus only the questions whose gold passages are all in it are kept.
    """
    folder = root / "2wiki"
    corpus = _json(folder / "corpus.json")[:passages]
    source = (folder / "corpus.json").as_posix()
    documents, keys = _keyed(
        [(SourceDocument(p["title"], p["text"], {}, f"{source}#{i}"), p["title"]) for i, p in enumerate(corpus)]
    )
    titles = {p["title"] for p in corpus}
    questions = [
        Question(q["id"], q["question"], tuple(q["gold_titles"]))
        for q in _json(folder / "questions_dev.json")
        if set(q["gold_titles"]) <= titles
    ]
    return Dataset("2wiki", "en", documents, questions, keys)


def load_lihua(root: Path = DATASETS) -> Dataset:
    """LiHua-World: 442 chat sessions, one document each as the file loader reads them (title = file name);
    213 dev questions whose evidence is a list of session timestamps."""
    folder = root / "lihua"
    session_of_path = {path: stamp for stamp, path in _json(folder / "sessions.json").items()}
    loader = FileDocumentLoader()
    pairs: list[tuple[SourceDocument, str]] = []
    for file in loader.files([folder / "corpus"]):
        stamp = session_of_path[file.path.relative_to(folder).as_posix()]
        # Keyed by the file's own path, not the loader's relative name: `Dataset.files` reads the files.
        source = file.path.resolve().as_posix()
        pairs.extend((replace(document, source=source), stamp) for document in loader.load(file))
    documents, keys = _keyed(pairs)
    questions = [
        Question(q["id"], q["question"], tuple(q["evidence"]), q["type"]) for q in _json(folder / "questions_dev.json")
    ]
    return Dataset("lihua", "en", documents, questions, keys)


def load_cmrc(root: Path = DATASETS) -> Dataset:
    """CMRC 2018 dev: 848 Chinese passages, 1,073 questions with one gold passage id each."""
    folder = root / "cmrc2018"
    source = (folder / "corpus.json").as_posix()
    documents, keys = _keyed(
        [
            (SourceDocument(p["title"], p["text"], {"passage_id": p["id"]}, f"{source}#{p['id']}"), p["id"])
            for p in _json(folder / "corpus.json")
        ]
    )
    questions = [
        Question(q["id"], q["question"], tuple(q["gold_passage_ids"])) for q in _json(folder / "questions_dev.json")
    ]
    return Dataset("cmrc", "zh", documents, questions, keys)
