"""Run the official JavaScript clients of tests/js (AG-UI HttpAgent, playwright-core) against a live server.

scripts/test.sh installs them (scripts/services/clients.sh). Without them a test is skipped locally and fails
when REQUIRE_REAL_SERVICES=1 (CI).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

JS_DIR = Path(__file__).resolve().parents[1] / "js"
ARTIFACTS = Path(__file__).resolve().parents[2] / ".test-artifacts"


def _unavailable(reason: str) -> None:
    if os.environ.get("REQUIRE_REAL_SERVICES") == "1":
        pytest.fail(f"{reason} (REQUIRE_REAL_SERVICES=1)")
    pytest.skip(reason)


def require_node_clients() -> None:
    if shutil.which("node") is None:
        _unavailable("Node.js is not installed")
    if not (JS_DIR / "node_modules" / "@ag-ui" / "client").is_dir():
        _unavailable("the JavaScript clients are not installed (scripts/services/clients.sh)")


def chromium_path() -> str:
    require_node_clients()
    path = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        _unavailable("Chromium is not installed (scripts/services/clients.sh installs it)")
    return str(path)


def run_node(script: str, args: dict[str, Any], timeout_s: float = 60) -> dict[str, Any]:
    """Run tests/js/<script> with `args` as JSON in argv; the script prints one JSON object on its last line."""
    require_node_clients()
    completed = subprocess.run(
        ["node", str(JS_DIR / script), json.dumps(args)],
        cwd=JS_DIR,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if completed.returncode != 0:
        raise AssertionError(f"{script} exited {completed.returncode}:\n{completed.stdout}\n{completed.stderr}")
    lines = completed.stdout.strip().splitlines()
    assert lines, f"{script} printed nothing; stderr:\n{completed.stderr}"
    result: dict[str, Any] = json.loads(lines[-1])
    return result
