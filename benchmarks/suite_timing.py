"""The benchmark suite's own run time, written by scripts/bench.sh after its last benchmark.

Reads one line per step from stdin (`name<TAB>status<TAB>seconds`) and writes a JSON file with the steps, the
suite's total wall time so far (from `--started`: the setup, the services' start and every step, all but the
report that follows) and the budget the issue sets (30 minutes, `--quick` 5). The report turns it into a goal.

    printf 'retrieval_quality\tok\t312\n' | python -m benchmarks.suite_timing benchmarks/results/suite.json \
        --quick 0 --started 1764150000 --budget 1800
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.graph_probes import machine


def steps_from(lines: list[str]) -> list[dict[str, Any]]:
    steps = []
    for line in lines:
        if not line.strip():
            continue
        name, status, seconds = line.rstrip("\n").split("\t")
        steps.append({"name": name, "status": status, "seconds": int(seconds)})
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", type=Path)
    parser.add_argument("--quick", type=int, choices=(0, 1), required=True)
    parser.add_argument("--started", type=int, required=True, help="the suite's start, seconds since the epoch")
    parser.add_argument("--budget", type=int, required=True, help="seconds")
    args = parser.parse_args()
    total = int(time.time()) - args.started
    host = machine()
    host.pop("load_average_1m_at_start")  # this runs at the end: the start was the first step's
    host["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    document = {
        "benchmark": "suite_timing",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": host,
        "parameters": {"quick": bool(args.quick)},
        "total_s": total,
        "budget_s": args.budget,
        "within_budget": total <= args.budget,
        "steps": steps_from(sys.stdin.readlines()),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
