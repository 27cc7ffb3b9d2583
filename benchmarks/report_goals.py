"""The goals of latest.json: each goal of the issue (thresholds in benchmarks/goals.py) judged on the sections
benchmarks/report_data.py assembled, with the measured value and met / missed / no data."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.goals import (
    AGENTS,
    GOAL_AGUI_US,
    GOAL_ANSWER_CHARS,
    GOAL_ANSWER_CMRC,
    GOAL_ANSWER_KEPT,
    GOAL_CHOICE_GAP,
    GOAL_FOLLOW_UP_RATIO,
    GOAL_INDEX_S,
    GOAL_INGEST_TTFT_RATIO,
    GOAL_LIHUA_MULTI,
    GOAL_LIHUA_SINGLE,
    GOAL_PERFECT_AT_8,
    GOAL_R_AT_5,
    GOAL_RATIO,
    GOAL_RETRIEVAL_P95_MS,
    GOAL_ROUTING_KB,
    GOAL_ROUTING_P95_MS,
    GOAL_ROUTING_SMALL_TALK,
    GOAL_RSS_MIB,
    GOAL_STREAMS,
    GOAL_SUITE_MIN,
    GOAL_WRITE_P95_MS,
)
from benchmarks.graph_probes import dig
from benchmarks.report_data import (
    BASELINE,
    CHOICE,
    CHOICE_FIGURES,
    FUSION,
    ROUTING_NOTE,
    WIKI_PASSAGES,
    J,
    cells,
    clean,
    fmt,
    label,
    missing,
    num,
)

# -- goals ---------------------------------------------------------------------------------------------------------


def goal(text: str, measured: str, value: Any, ok: bool | str | None, about: Any, note: str = "") -> J:
    """One goal of the issue as measured: met or missed by `ok`, no data when it is None, or the status given."""
    status = ok if isinstance(ok, str) else "no data" if ok is None else "met" if ok else "missed"
    measured = "–" if status == "no data" else measured
    return {"goal": text, "measured": measured, "value": value, "status": status, "source": label(about), "note": note}


def best(rows: J, score: str | Callable[[J], float | None]) -> tuple[str, J]:
    """The agent (not BM25) whose row scores highest by `score` (a function, or a figure of the row), among those
    with a score; ("", {}) for none."""
    rank = score if callable(score) else lambda row: num(row.get(score))
    scores = {a: s for a, row in rows.items() if a not in (BASELINE, CHOICE) and (s := rank(row)) is not None}
    agent = max(scores, key=scores.__getitem__, default="")
    return agent, rows[agent] if agent in scores else {}


def retrieval_goals(latest: J) -> list[J]:
    retrieval = latest["retrieval"]
    about = {key: info["source"] for key, info in retrieval["datasets"].items()}
    goals = []
    for key, figure, limit, text in (
        ("2wiki_dev", "perfect@8", GOAL_PERFECT_AT_8, f"2wiki dev perfect@8 ≥ {GOAL_PERFECT_AT_8} (best agent)"),
        ("2wiki_full", "R@5", GOAL_R_AT_5, f"2wiki R@5 ≥ {GOAL_R_AT_5} (best agent, all {WIKI_PASSAGES:,} passages)"),
    ):
        agent, row = best(retrieval[key], figure)
        value = num(row.get(figure))
        ok = None if value is None else value >= limit
        goals.append(goal(text, f"{agent}: {fmt(value, '.3f')}", value, ok, about[key]))

    def lihua(row: J) -> float | None:  # the best Multi among Single ≥ goal first
        multi, single = num(row.get("multi_all@5")), num(row.get("single_all@5"))
        return None if multi is None or single is None else multi + (1.0 if single >= GOAL_LIHUA_SINGLE else 0.0)

    agent, row = best(retrieval["lihua_dev"], lihua)
    multi, single = (num(row.get(f)) or 0.0 for f in ("multi_all@5", "single_all@5"))
    text = f"LiHua Multi all-evidence@5 ≥ {GOAL_LIHUA_MULTI} while Single ≥ {GOAL_LIHUA_SINGLE}"
    ok = multi >= GOAL_LIHUA_MULTI and single >= GOAL_LIHUA_SINGLE if agent else None
    measured = f"{agent}: Multi {multi:.3f}, Single {single:.3f}"
    goals.append(goal(text, measured, multi if agent else None, ok, about["lihua_dev"]))
    rows, text = retrieval["cmrc_dev"], "CMRC R@1 and R@5 not below BM25 of the same run"
    r1, r5 = (num(dig(rows, BASELINE, f)) for f in ("R@1", "R@5"))
    if r1 is None or r5 is None:
        return [*goals, goal(text, "", None, None, about["cmrc_dev"])]

    def at_least_bm25(row: J) -> bool:
        return (num(row.get("R@1")) or 0.0) >= r1 and (num(row.get("R@5")) or 0.0) >= r5

    def score(row: J) -> float | None:  # agents at or above BM25 first, then by R@1 + R@5
        found = num(row.get("R@1"))
        return None if found is None else found + (num(row.get("R@5")) or 0.0) + 10.0 * at_least_bm25(row)

    agent, row = best(rows, score)
    passing = sum(at_least_bm25(r) for a, r in rows.items() if a != BASELINE)
    measured = f"{agent}: {cells(row, ('R@1 R@5', '.3f'))[0]} vs BM25 {r1:.3f} / {r5:.3f}"
    note = f"{passing} of {len(rows) - 1} agents at or above BM25 on both" if agent else ""
    ok = at_least_bm25(row) if agent else None
    return [*goals, goal(text, measured, num(row.get("R@1")), ok, about["cmrc_dev"], note)]


def choice_goals(latest: J) -> list[J]:
    """The router's default choice against the best single agent, and fusion against its best member."""
    retrieval = latest["retrieval"]
    judged: dict[str, list[tuple[str, bool]]] = {CHOICE: [], FUSION: []}
    for key, figure in CHOICE_FIGURES:
        rows = retrieval[key]
        found = {a: num(r.get(figure)) for a, r in rows.items() if a not in (BASELINE, *judged)}
        singles = {a: v for a, v in found.items() if v is not None}
        if not singles:
            continue
        top = max(singles, key=singles.__getitem__)
        for name, slack in ((CHOICE, GOAL_CHOICE_GAP), (FUSION, 0.0)):
            value = num(dig(rows, name, figure))
            text = f"{key} {figure} {fmt(value, '.3f')} (best {top} {singles[top]:.3f})"
            judged[name].append((text, value is not None and value >= singles[top] - slack))
    texts = {
        CHOICE: f"the router's default choice within {GOAL_CHOICE_GAP} of the best single agent on every dev set",
        FUSION: "fusion_agent at or above its best member on every dev set",
    }
    about = retrieval["datasets"]["cmrc_dev"]["source"]
    return [
        goal(texts[name], "; ".join(t for t, _ in rows), None, all(ok for _, ok in rows) if rows else None, about)
        for name, rows in judged.items()
    ]


def streaming_goals(latest: J) -> list[J]:
    streaming, agui, conc = latest["streaming"], latest["streaming"]["agui"], latest["concurrency"]
    cpu = streaming["passthrough_ratio"]
    whole, structured = agui["us_per_event_whole_run"], agui["us_per_event_structured"]
    worst = None if whole is None or structured is None else max(whole, structured)
    ttft, rate = (num(dig(conc, "ours_over_passthrough", k)) for k in ("ttft_p99", "tokens_per_s"))
    streams, errors = conc.get("streams"), conc.get("errors")
    text = f"streaming within {GOAL_RATIO}x of the pass-through (server CPU per token)"
    goals = [goal(text, f"{fmt(cpu)}x", cpu, None if cpu is None else cpu <= GOAL_RATIO, streaming["source"])]
    text = f"AG-UI overhead per event over the internal stream < {GOAL_AGUI_US:.0f} µs"
    measured = f"{fmt(whole, '.1f')} µs (whole run), {fmt(structured, '.1f')} µs (non-token events)"
    goals.append(goal(text, measured, worst, None if worst is None else worst < GOAL_AGUI_US, agui["source"]))
    text = f"{streams or GOAL_STREAMS} concurrent streams within {GOAL_RATIO}x of the pass-through"
    ok = None if ttft is None or rate is None else ttft <= GOAL_RATIO and rate >= 1 / GOAL_RATIO
    goals.append(goal(text, f"TTFT p99 {fmt(ttft)}x, tokens/s {fmt(rate)}x", ttft, ok, conc["source"]))
    ok = None if streams is None or errors is None else streams >= GOAL_STREAMS and errors == 0
    measured = f"{streams} at once, {conc.get('streams_total')} in all: {errors} errors"
    return [*goals, goal(f"{GOAL_STREAMS} concurrent streams, 0 errors", measured, errors, ok, conc["source"])]


def p95s(latest: J, store: str) -> dict[str, float]:
    """The retrieval latency p95 of each agent measured on `store`."""
    return {a: v for a in AGENTS if (v := num(dig(latest["serving_by_store"], store, a, "p95_ms"))) is not None}


def graph_goals(latest: J) -> list[J]:
    """Per graph store: indexing (on a part of the corpus shown, not measured), writes and retrieval latency."""
    by_store, about, goals = latest["indexing"]["2wiki_by_store"], latest["indexing"]["2wiki_source"] or {}, []
    whole, dates = about.get("mode") == "full", {store: f.get("measured_on") for store, f in by_store.items()}
    for store, f in by_store.items():
        src = about | ({"date": dates[store]} if len(set(dates.values())) > 1 else {})  # a store measured alone
        # The full suite bounds Neo4j to a part of the corpus (graph_indexing --neo4j-passages): its goals say so.
        bounded = whole and f.get("passages") not in (None, WIKI_PASSAGES)
        counts, first = whole and not bounded, f"on the first {fmt(f['passages'], ',.0f')} passages"
        failed = f["failed"] and f"store not measured: {f['failed']}"
        part = "; ".join(filter(None, ["" if counts else f"{first} only", failed]))
        jvm = f["neo4j_jvm_peak_rss_mib"] and f"Neo4j JVM {f['neo4j_jvm_peak_rss_mib']:.0f} MiB more"
        # (goal, figure, limit, unit, note, whether it counts: indexing only on the whole corpus)
        checks = [("2wiki indexing < 3 min", "wall_s", GOAL_INDEX_S, "s", part, counts)]
        rss_note = "; ".join(filter(None, [part, jvm]))
        checks += [("2wiki indexing < 1.5 GiB", "peak_rss_mib", GOAL_RSS_MIB, "MiB", rss_note, counts)]
        for kind, limit in GOAL_WRITE_P95_MS.items():
            refresh = f"with the community refresh (CLI) {fmt(f[f'{kind}_with_refresh_p95_ms'], '.0f')} ms"
            text = "; ".join(filter(None, [f"the write alone, which the API waits for; {refresh}", part]))
            checks += [(f"{kind} one document p95 < {limit / 1000:g} s", f"{kind}_p95_ms", limit, "ms", text, True)]
        for text, key, limit, unit, why, counted in checks:
            ok = None if f[key] is None else (f[key] < limit if counted else "not measured")
            goals.append(goal(f"{text} ({store})", f"{fmt(f[key], '.0f')} {unit}", f[key], ok, src, why))
        known = p95s(latest, store)
        over = [f"{a} {v:.0f} ms" for a, v in known.items() if v >= GOAL_RETRIEVAL_P95_MS[a]]
        worst = max(known, key=lambda a: known[a] / GOAL_RETRIEVAL_P95_MS[a], default="")
        summary = f"over: {', '.join(over)}" if over else f"slowest {worst} {known.get(worst, 0):.0f} ms"
        scope = first if bounded else "" if whole else f"on {about.get('scope', 'a part of the corpus')}"
        text = f"retrieval p95 < 150 ms per agent, deep_research_agent < 500 ms ({store})"
        measured = f"{len(known) - len(over)} of {len(known)} agents; {summary}"
        goals.append(goal(text, measured, known.get(worst), not over if known else None, src, scope if known else ""))
    texts = ["2wiki indexing < 3 min and < 1.5 GiB", "insert p95 < 2 s, delete p95 < 1 s"]
    texts += ["retrieval p95 < 150 ms per agent (deep_research_agent < 500 ms)"]
    return goals or [goal(text, "", None, None, None, missing("graph_indexing")) for text in texts]


def routing_goals(latest: J) -> list[J]:
    """Our router on KB questions and small talk (BM25 as a router alongside), the orchard alone, its latency."""
    section = latest["conversation"]
    ours, bm25, alone, about = section["router"], section["bm25_router"], section["orchard_alone"], section["source"]
    why = section.get("note", "")  # without results: what to run

    def accuracy(key: str, limit: float, text: str, note: str = "") -> J:
        value, measured = ours[key], f"{fmt(ours[key], '.3f')} (BM25 as a router {fmt(bm25[key], '.3f')})"
        return goal(text, measured, value, None if value is None else value >= limit, about, why or note)

    kbs = {kb: r["accuracy"] for kb, r in ours["per_kb"].items() if kb != "general" and r["accuracy"] is not None}
    lowest = min(kbs, key=kbs.__getitem__, default="")
    text = f"routing accuracy on KB questions ≥ {GOAL_ROUTING_KB:.2f} (KBs created without keywords, offline)"
    goals = [accuracy("kb_questions", GOAL_ROUTING_KB, text, lowest and f"lowest: {lowest} {kbs[lowest]:.3f}")]
    text = f"routing accuracy on small talk ≥ {GOAL_ROUTING_SMALL_TALK:.2f}"
    goals.append(accuracy("small_talk", GOAL_ROUTING_SMALL_TALK, text))
    served, n = alone["kb_questions"], fmt(dig(alone, "per_kb", "orchard", "n"), ",.0f")
    text = "orchard served alone: every sample question and paraphrase reaches it"
    measured = f"{fmt(served, '.3f')} over {n} questions; small talk {fmt(alone['small_talk'], '.3f')}"
    alone_note = why or "the only KB, marked default, as scripts/run.sh serves it"
    goals.append(goal(text, measured, served, None if served is None else served == 1.0, about, alone_note))
    follow = section["follow_ups"]
    agents = ("graph_agent", follow.get("default_agent", "hybrid_agent"))
    ratios = {a: num(dig(follow, "perfect_at_8", a, "ratio")) for a in agents}
    worst = min((r for r in ratios.values() if r is not None), default=None)
    text = f"follow-ups: turn-2 perfect@8 ≥ {GOAL_FOLLOW_UP_RATIO} × the whole question's ({', '.join(agents)})"
    measured = ", ".join(f"{a} {fmt(r, '.3f')}" for a, r in ratios.items())
    goals.append(goal(text, measured, worst, None if worst is None else worst >= GOAL_FOLLOW_UP_RATIO, about, why))
    scale = section["at_scale"]
    small = f"{fmt(ours['latency_ms']['p95_ms'], '.1f')} ms with the 4 KBs of the routing set"
    timed = scale if scale.get("latency_ms") else {"latency_ms": ours["latency_ms"]}
    p50, p95 = (timed["latency_ms"][f"p{q}_ms"] for q in (50, 95))
    ok = None if p95 is None else p95 < GOAL_ROUTING_P95_MS
    measured = f"{fmt(p95, '.1f')} ms (p50 {fmt(p50, '.1f')} ms)"
    text = f"routing p95 < {GOAL_ROUTING_P95_MS:.0f} ms with 10 KBs of 5,000 chunks"
    size = f"{fmt(scale.get('kbs'), '.0f')} KBs of {fmt(scale.get('chunks_per_kb'), ',.0f')} chunks"
    note = f"{size}; {small}" if timed is scale else ROUTING_NOTE
    return [*goals, goal(text, measured, p95, ok, about, why or note)]


def answer_goals(latest: J) -> list[J]:
    """Answers without a chat model: CMRC answer rate, LiHua's against its ceiling, length, the orchard, and no
    markdown headings or graph-internal text in any answer."""
    section = latest["answers"]
    sets, about, why = section["datasets"], section["source"], section.get("note", "")
    cmrc, lihua, orchard = sets["cmrc"], sets["lihua"], sets["orchard"]
    value = cmrc["answer_rate"]
    text = f"CMRC dev: the answer holds the gold answer for ≥ {GOAL_ANSWER_CMRC:.2f} of the questions (no model)"
    measured = f"{fmt(value, '.3f')} (retrieved text {fmt(cmrc['ceiling'], '.3f')}, "
    measured += f"first sentence {fmt(cmrc['baseline_rate'], '.3f')})"
    goals = [goal(text, measured, value, None if value is None else value >= GOAL_ANSWER_CMRC, about, why)]
    value = lihua["kept"]
    text = f"LiHua dev single-hop: answer rate ≥ {GOAL_ANSWER_KEPT:.2f} × the retrieved text's (no model)"
    measured = f"{fmt(value, '.3f')}: {fmt(lihua['answer_rate'], '.3f')} of {fmt(lihua['ceiling'], '.3f')}"
    goals.append(goal(text, measured, value, None if value is None else value >= GOAL_ANSWER_KEPT, about, why))
    medians = {name: row["median_chars"] for name, row in sets.items() if row["median_chars"] is not None}
    longest = max(medians, key=medians.__getitem__, default="")
    text = f"median answer ≤ {GOAL_ANSWER_CHARS:.0f} characters on every dataset (the notice line left out)"
    measured = ", ".join(f"{name} {value:.0f}" for name, value in medians.items())
    ok = None if not medians else medians[longest] <= GOAL_ANSWER_CHARS
    goals.append(goal(text, measured, medians.get(longest), ok, about, why))
    value, asked = orchard["answer_rate"], orchard["questions"]
    text = "every orchard question with a written answer is answered correctly (no model)"
    measured = f"{fmt(value, '.3f')} of {fmt(asked, ',.0f')} questions"
    goals.append(goal(text, measured, value, None if value is None else value == 1.0, about, why))
    counted = [row for row in sets.values() if row["headings"] is not None and row["internal"] is not None]
    shown = sum((row["headings"] or 0) + (row["internal"] or 0) for row in counted)
    text = "no answer shows markdown heading syntax or graph-internal text"
    heads, internal = (sum(row[k] or 0 for row in counted) for k in ("headings", "internal"))
    answers = sum(row["questions"] or 0 for row in counted)
    measured = f"{heads:.0f} with headings, {internal:.0f} with graph text in {answers:.0f} answers"
    return [*goals, goal(text, measured, shown, shown == 0 if counted else None, about, why)]


def job_goals(latest: J) -> list[J]:
    """Chat stays fast while an ingestion job runs; two workers share a queue with no document indexed twice."""
    section = latest["ingestion_jobs"]
    about, why, serving = section["source"], section.get("note", ""), section["serving"]
    value, statuses = serving["busy_over_idle_p99"], serving.get("statuses") or []
    text = f"chat first-token p99 during an ingestion through the API ≤ {GOAL_INGEST_TTFT_RATIO}× idle, same run"
    measured = f"{fmt(value)}× ({fmt(serving['busy']['p99'], '.0f')} / {fmt(serving['idle']['p99'], '.0f')} ms) "
    measured += f"over {fmt(serving['passages'], ',.0f')} passages, jobs {', '.join(statuses) or '–'}"
    ok = None if value is None else value <= GOAL_INGEST_TTFT_RATIO and statuses == ["done"]
    goals = [goal(text, measured, value, ok, about, why)]
    two = {name: case for name, case in section["throughput"].items() if name.endswith("/2w")}
    one = {name: case for name, case in section["throughput"].items() if name.endswith("/1w")}
    text = "two workers share one queue with no document indexed twice; throughput next to one worker"
    rates = [f"{n.removesuffix('/1w')} {fmt(c['documents_per_s'], '.1f')}" for n, c in one.items()]
    rates += [f"{n} {fmt(c['documents_per_s'], '.1f')}" for n, c in two.items()]
    measured = "documents/s: " + ", ".join(rates) if rates else ""
    ok = None if not (one and two) else all(case["none_twice"] is True for case in two.values())
    return [*goals, goal(text, measured, len(two) or None, ok, about, why)]


def suite_goals(latest: J) -> list[J]:
    """The suite's own wall time against its budget, for the full run and for `--quick`."""
    goals = []
    for mode, minutes in GOAL_SUITE_MIN.items():
        run, flag = latest["suite"][mode], " --quick" if mode == "quick" else ""
        text, total, steps = f"scripts/bench.sh{flag} < {minutes} min", num(run.get("total_s")), run.get("steps") or []
        if total is None:
            why = f"no suite{flag and '_quick'}.json: run scripts/bench.sh{flag}"
            goals.append(goal(text, "", None, None, None, why))
            continue
        slowest = max(steps or [{}], key=lambda step: step.get("seconds", 0))
        why = f"slowest step: {slowest.get('name')} {fmt(slowest.get('seconds'), '.0f')} s" if slowest else ""
        if run.get("reused_index_build_s"):  # honest about the cache: a first run also builds the indexes
            why += f"; retrieval_quality reused cached indexes ({run['reused_index_build_s']:.0f} s to build)"
        # A suite whose steps failed did not do all its work in that time.
        failed = [step["name"] for step in steps if str(step.get("status")).startswith("FAILED")]
        why = f"failed: {', '.join(failed)}; {why}" if failed else why
        ok = total < minutes * 60 and not failed
        goals.append(goal(text, f"{total / 60:.1f} min", total, ok, run["source"], why))
    return goals


def judge(latest: J) -> list[J]:
    """Every goal, judged on an assembled latest.json (`report_data.assemble`)."""
    areas = [retrieval_goals, choice_goals, routing_goals, answer_goals, streaming_goals, graph_goals]
    areas += [job_goals, suite_goals]
    goals: list[J] = clean([found for goals in areas for found in goals(latest)])
    return goals
