"""Where the evaluation datasets are, for the tests and for benchmarks/ alike.

`DATASETS_DIR` when it is set, else `shared/datasets` beside the repository (`<repository>/../shared/datasets`),
found from this file's location, never from a path of one machine: CI clones the repository elsewhere with a copy
of `shared/` beside it. A test whose dataset is missing is skipped, or fails under `REQUIRE_REAL_SERVICES=1`
(`tests/support/postgres.py`'s `service_missing`), so CI cannot go green without having run it.
"""

from __future__ import annotations

import os
from pathlib import Path

DATASETS_VARIABLE = "DATASETS_DIR"
REPOSITORY = Path(__file__).resolve().parents[2]
DEFAULT_DATASETS = REPOSITORY.parent / "shared" / "datasets"


def datasets_dir() -> Path:
    """The datasets folder: `$DATASETS_DIR` (an empty value counts as unset), else `../shared/datasets`."""
    configured = os.environ.get(DATASETS_VARIABLE)
    return Path(configured).expanduser() if configured else DEFAULT_DATASETS


def dataset_path(*parts: str) -> Path:
    """A file or folder of the datasets, e.g. `dataset_path("2wiki", "corpus.json")`; it may not exist."""
    return datasets_dir().joinpath(*parts)


def require_dataset(*parts: str) -> Path:
    """`dataset_path(*parts)` for a test: skips the test when it does not exist, fails it under
    `REQUIRE_REAL_SERVICES=1`."""
    path = dataset_path(*parts)
    if not path.exists():
        # Imported here: benchmarks use the functions above without loading pytest and asyncpg.
        from tests.support.postgres import service_missing

        service_missing(
            f"dataset {'/'.join(parts)} is not available at {path} "
            f"(set {DATASETS_VARIABLE} or put shared/datasets beside the repository)"
        )
    return path
