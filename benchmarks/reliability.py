"""Run the fault tests (tests/faults) and write their results into docs/reliability.md.

Each fault test records what it injected, how many chat requests it sent, how many messages the store owed
its clients and how many it holds afterwards, and how each client's request ended
(tests/support/fault_report.py). This runs the tests once, with `FAULT_REPORT_JSON` set, reads those records
and pytest's JUnit report (durations and results), and replaces the table between the markers in
docs/reliability.md. It exits 1 when a test failed or a message was lost.

They need what the tests need: the PostgreSQL 15 server binaries (private clusters; the shared server is never
touched) and Java 17 with scripts/services/neo4j.sh's build (a private Neo4j). Set REQUIRE_REAL_SERVICES=1 to
make a missing one fail instead of skip.

Run:  python -m benchmarks.reliability [--no-doc] [extra pytest arguments after --]
Writes benchmarks/results/reliability.json and the table in docs/reliability.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "reliability.json"
DOC = ROOT / "docs" / "reliability.md"
BEGIN, END = "<!-- reliability-table:begin -->", "<!-- reliability-table:end -->"
# Rows in the order of the list of faults.
ORDER = (
    "test_postgres_faults",
    "test_neo4j_faults",
    "test_model_faults",
    "test_disconnects",
    "test_sigterm",
    "test_ingestion_job_faults",
)


@dataclass(frozen=True)
class Outcome:
    nodeid: str
    result: str  # passed, failed, skipped
    seconds: float


def run_tests(extra: list[str], workdir: Path) -> tuple[list[dict[str, Any]], list[Outcome], int]:
    records_path, junit_path = workdir / "faults.json", workdir / "junit.xml"
    command = [sys.executable, "-m", "pytest", "tests/faults", "-p", "no:cacheprovider", "-q"]
    command += [f"--junitxml={junit_path}", *extra]
    env = os.environ | {"FAULT_REPORT_JSON": str(records_path)}
    completed = subprocess.run(command, cwd=ROOT, env=env, check=False)
    records = json.loads(records_path.read_text()) if records_path.exists() else []
    return records, read_junit(junit_path), completed.returncode


def read_junit(path: Path) -> list[Outcome]:
    if not path.exists():
        return []
    outcomes = []
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "").replace(".", "/")
        nodeid = f"{module}.py::{case.get('name', '')}"
        if case.find("failure") is not None or case.find("error") is not None:
            result = "failed"
        elif case.find("skipped") is not None:
            result = "skipped"
        else:
            result = "passed"
        outcomes.append(Outcome(nodeid, result, float(case.get("time", "0"))))
    return outcomes


def _position(record: dict[str, Any]) -> int:
    module = Path(record["test"].partition("::")[0]).stem
    return ORDER.index(module) if module in ORDER else len(ORDER)


def _saw(counts: dict[str, int]) -> str:
    return ", ".join(f"{count}× {what}" for what, count in counts.items())


def _test_link(nodeid: str) -> str:
    path, _, name = nodeid.partition("::")
    return f"[`{name}`](../{path})"


def render(records: list[dict[str, Any]], outcomes: list[Outcome]) -> str:
    by_test = {outcome.nodeid: outcome for outcome in outcomes}
    lines = [
        "| fault | injected | test | requests | owed / stored / **lost** | what the clients saw | notes "
        "| time | result |",
        "|---|---|---|---:|---|---|---|---:|---|",
    ]
    for record in sorted(records, key=_position):
        outcome = by_test.get(record["test"])
        seconds = f"{outcome.seconds:.1f} s" if outcome else "?"
        lines.append(
            f"| {record['fault']} | {record['injected']} | {_test_link(record['test'])} | {record['requests']} "
            f"| {record['messages_expected']} / {record['messages_stored']} / **{record['lost']}** "
            f"| {_saw(record['clients_saw'])} | {record['notes']} | {seconds} "
            f"| {outcome.result if outcome else '?'} |"
        )
    recorded = {record["test"] for record in records}
    others = [outcome for outcome in outcomes if outcome.nodeid not in recorded]
    if others:
        lines += ["", "Tests of the same faults without a row of their own (in process, or not passed):", ""]
        lines += ["| test | time | result |", "|---|---:|---|"]
        lines += [f"| {_test_link(o.nodeid)} | {o.seconds:.2f} s | {o.result} |" for o in others]
    total = sum(outcome.seconds for outcome in outcomes)
    lost = sum(record["lost"] for record in records)
    passed = sum(outcome.result == "passed" for outcome in outcomes)
    lines += [
        "",
        f"{passed} of {len(outcomes)} tests passed in {total:.0f} s of test time; "
        f"messages or documents lost: **{lost}**. "
        f"Generated {datetime.date.today().isoformat()} on {platform.machine()}, Python {platform.python_version()}, "
        f"by `python -m benchmarks.reliability`.",
    ]
    return "\n".join(lines)


def update_doc(table: str, begin_marker: str = BEGIN, end_marker: str = END) -> None:
    """Replace what stands between the two markers of docs/reliability.md (also used by benchmarks.load)."""
    text = DOC.read_text(encoding="utf-8")
    head, begin, rest = text.partition(begin_marker)
    _, end, tail = rest.partition(end_marker)
    if not begin or not end:
        raise SystemExit(f"{DOC} has no {begin_marker} … {end_marker} markers")
    DOC.write_text(f"{head}{begin_marker}\n{table}\n{end_marker}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the fault tests and write docs/reliability.md's table.")
    parser.add_argument("--no-doc", action="store_true", help="only write the JSON results")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="reliability-") as tmp:
        records, outcomes, returncode = run_tests(args.pytest_args, Path(tmp))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"records": records, "tests": [o.__dict__ for o in outcomes]}, indent=2) + "\n")
    table = render(records, outcomes)
    if not args.no_doc:
        update_doc(table)
    print(table)
    lost = sum(record["lost"] for record in records)
    return 1 if returncode != 0 or lost else 0


if __name__ == "__main__":
    raise SystemExit(main())
