"""Where the tests and benchmarks find the datasets (tests/support/datasets.py), and that a missing dataset
skips a test locally but fails it under REQUIRE_REAL_SERVICES=1."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.support import datasets
from tests.support.datasets import dataset_path, datasets_dir, require_dataset

REPOSITORY = Path(__file__).resolve().parents[2]
SOURCES = ("backend", "benchmarks", "tests", "scripts", "docs", "config", ".ci")
SUFFIXES = {".py", ".sh", ".md", ".toml", ".yaml", ".yml", ""}
SKIPPED_DIRS = {"node_modules", "__pycache__", ".cache", "results", "fixtures"}


def test_datasets_dir_is_the_variable_when_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DATASETS_DIR", str(tmp_path))
    assert datasets_dir() == tmp_path
    assert dataset_path("2wiki", "corpus.json") == tmp_path / "2wiki" / "corpus.json"


@pytest.mark.parametrize("value", [None, ""])
def test_datasets_dir_defaults_to_shared_beside_the_repository(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("DATASETS_DIR", raising=False)
    else:
        monkeypatch.setenv("DATASETS_DIR", value)
    assert (datasets.REPOSITORY / "pyproject.toml").is_file()
    assert datasets.REPOSITORY == REPOSITORY
    assert datasets_dir() == REPOSITORY.parent / "shared" / "datasets"


def test_the_benchmarks_use_the_same_folder() -> None:
    from benchmarks import podcast_indexing, quality_data

    folder = datasets_dir()
    assert (folder, folder / "2wiki") == (quality_data.DATASETS, podcast_indexing.WIKI)
    assert folder / "podcast" / "kevin_scott_podcast.zip" == podcast_indexing.PODCAST


def _sources() -> list[Path]:
    files = [REPOSITORY / "README.md"]
    for top in SOURCES:
        for folder, dirs, names in os.walk(REPOSITORY / top):
            dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]  # pruned, not walked (tests/js/node_modules)
            files += [Path(folder, name) for name in names if Path(name).suffix in SUFFIXES]
    return files


def test_no_source_names_the_datasets_by_this_machines_absolute_path() -> None:
    # The absolute path of the shared folder on this machine (not preceded by `..` or a name): CI clones the
    # repository elsewhere, so only `../shared` (or DATASETS_DIR) finds it there.
    shared = re.compile(r"(?<![\w.])" + re.escape(str(REPOSITORY.parent / "shared")) + r"\b")
    offenders = [
        f"{path.relative_to(REPOSITORY)}:{number}"
        for path in _sources()
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if shared.search(line)
    ]
    assert offenders == []


def test_a_present_dataset_is_its_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "2wiki").mkdir()
    (tmp_path / "2wiki" / "corpus.json").write_text("[]", encoding="utf-8")
    monkeypatch.setenv("DATASETS_DIR", str(tmp_path))
    monkeypatch.setenv("REQUIRE_REAL_SERVICES", "1")
    assert require_dataset("2wiki", "corpus.json") == tmp_path / "2wiki" / "corpus.json"


@pytest.mark.parametrize("value", [None, "0"])
def test_a_missing_dataset_skips_without_real_services_required(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str | None
) -> None:
    monkeypatch.setenv("DATASETS_DIR", str(tmp_path))
    if value is None:
        monkeypatch.delenv("REQUIRE_REAL_SERVICES", raising=False)
    else:
        monkeypatch.setenv("REQUIRE_REAL_SERVICES", value)
    with pytest.raises(pytest.skip.Exception, match=r"dataset 2wiki/corpus\.json is not available"):
        require_dataset("2wiki", "corpus.json")


def test_a_missing_dataset_fails_when_real_services_are_required(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DATASETS_DIR", str(tmp_path))
    monkeypatch.setenv("REQUIRE_REAL_SERVICES", "1")
    with pytest.raises(pytest.fail.Exception, match=r"2wiki/corpus\.json .*REQUIRE_REAL_SERVICES=1"):
        require_dataset("2wiki", "corpus.json")
