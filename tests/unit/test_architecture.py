"""The layer rules of SPEC §2 (import-linter contracts in pyproject.toml) and the SPEC §13 bans."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def run_import_linter(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(project / "pyproject.toml"), "--no-cache"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(project), "PATH": "/usr/bin:/bin"},
    )


def test_layer_contracts_hold() -> None:
    result = run_import_linter(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "forbidden_import"),
    [
        ("backend/domain/errors.py", "import backend.infrastructure.config.settings"),
        ("backend/graphrag_agent/text.py", "import backend.application.services"),
        ("backend/application/chat/inputs.py", "import backend.infrastructure.logging"),
        ("backend/server/config.py", "import backend.infrastructure.health"),
        ("backend/infrastructure/health.py", "import backend.application.rag.rag_manager"),
        ("backend/application/chat/inputs.py", "import fastapi"),
    ],
)
def test_a_forbidden_import_breaks_the_contracts(tmp_path: Path, module: str, forbidden_import: str) -> None:
    """The check can fail: plant one forbidden import in a copy of the tree."""
    shutil.copytree(ROOT / "backend", tmp_path / "backend", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / module
    target.write_text(target.read_text() + f"\n{forbidden_import}  # planted by the test\n")
    result = run_import_linter(tmp_path)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout.upper()


def test_infrastructure_may_take_only_the_ports_from_application() -> None:
    """The contract lists application's packages by name: a new one must be added to it."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    forbidden = next(
        set(contract["forbidden_modules"])
        for contract in contracts
        if contract["source_modules"] == ["backend.infrastructure"]
        and any(module.startswith("backend.application.") for module in contract["forbidden_modules"])
    )
    application = ROOT / "backend" / "application"
    packages = {path.parent.name for path in application.glob("*/__init__.py")}
    modules = {path.stem for path in application.glob("*.py") if path.stem != "__init__"}
    assert forbidden == {f"backend.application.{name}" for name in (packages | modules) - {"ports"}}


def python_sources(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def test_no_chat_semantics_on_agents_anywhere() -> None:
    # Spelled in pieces so this file does not contain the names it bans.
    ask = "ask"
    banned = re.compile(rf"\b{ask}_stream\b|\b{ask}_with_trace\b|\.{ask}\(|\bdef {ask}\(")
    offenders = [
        str(p) for folder in ("backend", "tests") for p in python_sources(folder) if banned.search(p.read_text())
    ]
    assert offenders == []


def test_no_langgraph_checkpointer_in_backend() -> None:
    checkpoint = "checkpoint"
    banned = re.compile(rf"{checkpoint}er|MemorySaver|langgraph\.{checkpoint}")
    assert [str(p) for p in python_sources("backend") if banned.search(p.read_text())] == []


def test_there_is_no_backend_core_package() -> None:
    assert not (ROOT / "backend" / "core").exists()
