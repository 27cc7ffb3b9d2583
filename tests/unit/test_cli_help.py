"""The command line's help shows what a user must type, verbatim."""

from __future__ import annotations

from typer.testing import CliRunner

from backend.cli import app
from backend.domain.knowledge_base import KB_PREFIX_PATTERN


def test_create_kb_help_shows_the_name_pattern_whole() -> None:
    result = CliRunner().invoke(app, ["create-kb", "--help"], env={"COLUMNS": "160"})
    assert result.exit_code == 0
    assert KB_PREFIX_PATTERN.pattern == "^[a-z0-9_]{1,32}$"
    assert KB_PREFIX_PATTERN.pattern in result.output
