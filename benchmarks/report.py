"""The benchmark report: `results/latest.json` and `REPORT.md` with one PNG plot per area, from the results.

Reads the per-benchmark files in the results directory, a full-mode file before its quick one (retrieval quality
dataset by dataset; graph indexing: `graph_indexing.json`, else the largest `graph_indexing_<N>.json`), and
assembles `latest.json` (benchmarks/report_data.py): one section per area, each naming the file, mode, date and
machine of its source run, and `goals`, each goal of the issue with the measured value and met / missed / no data
(a missing or unreadable input leaves its keys null, with a note). Then, from latest.json alone (this module),
`REPORT.md`: a header, the goals table and per area the tables, a plot under `report/` (matplotlib, Agg) and a
sentence from the numbers. Nothing is measured here; scripts/bench.sh runs this last.

Run:  python -m benchmarks.report [--results benchmarks/results] [--report benchmarks/REPORT.md]
                                  [--plots benchmarks/report]
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from benchmarks.goals import (
    AGENTS,
    GOAL_INDEX_S,
    GOAL_PERFECT_AT_8,
    GOAL_R_AT_5,
    GOAL_RATIO,
    GOAL_RETRIEVAL_P95_MS,
    GOAL_ROUTING_P95_MS,
    GOAL_STREAMS,
    GOAL_WRITE_P95_MS,
)
from benchmarks.graph_probes import ROOT, dig, ratio, rel
from benchmarks.report_data import (
    ANSWER_SETS,
    BASELINE,
    OURS_MODES,
    PEERS,
    RETRIEVAL_SETS,
    WIKI_PASSAGES,
    J,
    assemble,
    cells,
    fmt,
    label,
    load,
    missing,
    num,
    short_date,
)
from benchmarks.report_goals import best, judge, p95s

# -- plots ---------------------------------------------------------------------------------------------------------


def chart(width: float = 8.0, height: float = 4.2) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def bars(axes: Axes, labels: Sequence[str], series: Mapping[str, Sequence[float | None]], across: bool) -> None:
    """One group of bars per label, one bar per series (`across`: horizontal, first label on top); None left out."""
    size = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        kept = [(n + i * size - 0.4 + size / 2, v) for n, v in enumerate(values) if v is not None]
        at, lengths = [p for p, _ in kept], [v for _, v in kept]
        if across:
            drawn = axes.barh(at, lengths, height=size * 0.95, label=name)
        else:
            drawn = axes.bar(at, lengths, width=size * 0.95, label=name)
        axes.bar_label(drawn, fmt="%.2f" if across else "%.0f", fontsize=7, padding=2 if across else 0)
    if across:
        axes.set_yticks(range(len(labels)), labels, fontsize=8)
        axes.invert_yaxis()


def retrieval_plot(latest: J) -> Figure | None:
    retrieval, figures = latest["retrieval"], ("perfect@8", "R@5")
    rows, peers = retrieval["2wiki_dev"], retrieval.get("peers_2wiki_dev") or {}
    published = retrieval.get("hipporag_published_recall@5") or {}
    if not (ours := [a for a, r in rows.items() if any(num(r.get(f)) is not None for f in figures)]):
        return None
    labels = [a if a != BASELINE else "BM25" for a in ours] + [f"peer: {p}" for p in peers]
    labels += [f"published: {name}" for name in published]
    lines = [rows[a] for a in ours] + list(peers.values()) + [{"R@5": v} for v in published.values()]
    fig, axes = chart(8.5, 0.32 * len(labels) + 1.6)
    bars(axes, labels, {f: [num(r.get(f)) for r in lines] for f in figures}, across=True)
    goal_8 = f"goal perfect@8 {GOAL_PERFECT_AT_8}"
    axes.axvline(GOAL_PERFECT_AT_8, color="C0", linestyle="--", linewidth=1, label=goal_8)
    axes.axvline(GOAL_R_AT_5, color="C1", linestyle=":", linewidth=1, label=f"goal R@5 {GOAL_R_AT_5}")
    axes.set_xlim(0, 1.12)
    axes.set_xlabel("share of the 51 2wiki dev questions (perfect@8) / of gold passages (R@5)")
    peers_text = "peers (recorded upstream, ~425 passages), published (1,000 questions)"
    axes.set_title(f"2wiki dev: ours and BM25 (same run), {peers_text}", fontsize=9)
    fig.legend(loc="outside lower center", ncols=4, fontsize=7)
    return fig


def serving_plot(latest: J) -> Figure | None:
    p95 = {store: [num(dig(r, a, "p95_ms")) for a in AGENTS] for store, r in latest["serving_by_store"].items()}
    if not (stores := {f"{s} p95": [v or 0.0 for v in values] for s, values in p95.items() if any(values)}):
        return None
    fig, axes = chart()
    bars(axes, AGENTS, stores, across=False)
    for n, agent in enumerate(AGENTS):
        axes.hlines(GOAL_RETRIEVAL_P95_MS[agent], n - 0.45, n + 0.45, color="black", linestyle="--", linewidth=1)
    axes.plot([], [], color="black", linestyle="--", linewidth=1, label="goal")
    axes.set_xticks(range(len(AGENTS)), [a.replace("_agent", "") for a in AGENTS], fontsize=8)
    axes.set_ylabel("retrieval latency p95 (ms)")
    axes.set_title("Retrieval latency per agent, one question at a time (51 2wiki dev questions)", fontsize=9)
    axes.legend(fontsize=8)
    return fig


def streaming_plot(latest: J) -> Figure | None:
    """Ours / pass-through where higher is worse (throughput inverted to a slowdown)."""
    s, p, r = latest["streaming"], latest["streaming"]["passthrough"], latest["concurrency"]["ours_over_passthrough"]
    n, rate, r = latest["concurrency"]["streams"] or GOAL_STREAMS, num(dig(r, "tokens_per_s")), r or {}
    rows = {
        "added latency per token p50, 1 stream": num(ratio(s["added_us_per_token_p50"], p["added_us_per_token_p50"])),
        "server CPU per token, 1 stream": s["passthrough_ratio"],
        "first token p50, 1 stream": num(ratio(s["ttft_ms_p50"], p["ttft_ms_p50"])),
        f"first token p99, {n} streams": num(r.get("ttft_p99")),
        f"throughput slowdown, {n} streams": round(1 / rate, 3) if rate else None,
        f"server CPU per token, {n} streams": num(r.get("server_cpu_per_token")),
    }
    if not (rows := {name: value for name, value in rows.items() if value is not None}):
        return None
    fig, axes = chart(8.0, 0.4 * len(rows) + 1.4)
    bars(axes, list(rows), {"ours / pass-through": list(rows.values())}, across=True)
    axes.set_xlim(0, max(GOAL_RATIO, *rows.values()) * 1.12)
    axes.axvline(1.0, color="grey", linewidth=1)
    axes.axvline(GOAL_RATIO, color="black", linestyle="--", linewidth=1, label=f"goal {GOAL_RATIO}x")
    axes.set_xlabel("ours / bare FastAPI pass-through (1 = as fast; higher is slower)")
    axes.set_title("Streaming: our server relative to a bare FastAPI pass-through of the same model", fontsize=9)
    fig.legend(loc="outside lower center", ncols=2, fontsize=8)
    return fig


def indexing_plot(latest: J) -> Figure | None:
    """Podcast seconds per piece per system; without podcast results, 2wiki indexing time per store."""
    systems = {n: r for n, r in latest["indexing"]["podcast"].items() if num(r.get("s_per_document")) is not None}
    stores = {s: f["wall_s"] for s, f in latest["indexing"]["2wiki_by_store"].items() if f.get("wall_s") is not None}
    if not systems and not stores:
        return None
    fig, axes = chart()
    if not systems:
        axes.bar_label(axes.bar(list(stores), list(stores.values()), color="C2"), fmt="%.0f s", fontsize=8)
        axes.axhline(GOAL_INDEX_S, color="black", linestyle="--", linewidth=1, label="goal 3 min")
        axes.set_ylabel("2wiki indexing wall time (s)")
        axes.legend(fontsize=8)
        return fig
    labels = [f"{'ours ' if n in OURS_MODES else ''}{n}\n{r.get('documents')} pieces" for n, r in systems.items()]
    drawn = axes.bar(labels, [r["s_per_document"] for r in systems.values()], color="C2")
    axes.bar_label(drawn, fmt="%.2f", fontsize=8)
    axes.tick_params(axis="x", labelsize=8)
    axes.set_ylabel("wall seconds per podcast piece")
    axes.set_title("Indexing podcast transcripts through the same scripted model", fontsize=9)
    return fig


def history_plot(latest: J) -> Figure | None:
    if not (targets := {t: rows for t, rows in latest["history"]["targets"].items() if rows}):
        return None
    fig, axes = chart()
    sessions = sorted({n for rows in targets.values() for n in rows}, key=int)
    for target, rows in targets.items():  # sessions evenly spaced (1, 8, 32): no log axis, whose labels need mathtext
        kept = [(i, rows[n]["turns_per_s"]) for i, n in enumerate(sessions) if n in rows]
        axes.plot([i for i, _ in kept], [v for _, v in kept], marker="o", label=target)
    axes.set_xticks(range(len(sessions)), sessions)
    axes.set_xlabel("concurrent chat sessions")
    axes.set_ylabel("chat turns per second (store calls of one turn)")
    axes.set_ylim(bottom=0)
    axes.set_title("Conversation stores: chat turns per second by concurrent sessions", fontsize=9)
    axes.legend(fontsize=8)
    return fig


PLOTS = {"retrieval": retrieval_plot, "serving": serving_plot, "streaming": streaming_plot}
PLOTS |= {"indexing": indexing_plot, "history": history_plot}


# -- REPORT.md -----------------------------------------------------------------------------------------------------


def table(header: Sequence[str] | str, rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table; a header given as text has its cells between "|"."""
    header = header.split("|") if isinstance(header, str) else header
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |" for row in rows])


def plot_block(name: str, links: dict[str, str], sentence: str) -> str:
    return f"![{name}]({links[name]})\n\n{sentence}" if name in links else f"_No plot: no data._ {sentence}"


def machine_line(machine: J) -> str:
    """CPU, cores and Python: what makes two runs comparable."""
    if "cpu_model" not in machine:
        return str(machine.get("description", "–"))
    return f"{machine.get('cpu_model')}, {machine.get('cpus_usable')} cores usable, Python {machine.get('python')}"


def header(latest: J, links: dict[str, str]) -> str:
    sources = {name: s for name, s in latest["sources"].items() if s}
    described = [s["machine"] for s in sources.values() if s["machine"].get("cpu_model")]
    machines = Counter(machine_line(m) for m in described)
    machine, many = machines.most_common(1)[0][0] if machines else "–", len(machines) > 1
    extra: J = next((m for m in described if m.get("memory_gib")), {})
    if extra:
        machine += f", {extra['memory_gib']} GiB, {extra.get('platform', '')}".rstrip(", ")
    rows = []
    for name, s in sources.items():
        start, end = s["machine"].get("load_average_1m_at_start"), s["machine"].get("load_average_1m_at_end")
        load = "–" if start is None else f"{start}" + (f" → {end}" if end is not None else "")
        mode = s["mode"] + (f" ({s['scope']})" if s["scope"] else "")
        rows.append([name, f"`{s['file']}`", mode, short_date(s["date"]), load, *[machine_line(s["machine"])] * many])
    text = f"Generated by `{latest['generated_by']}` (the last step of `scripts/bench.sh`) on "
    text += f"{short_date(latest['generated_at'])} from `{latest['results_dir']}`; every figure is also in "
    text += "`latest.json` there. Do not edit this file: rerun the benchmarks or the script."
    lines = ["# Benchmark report", "", text, "", f"Machine: {machine}."]
    lines[-1] += " Not every run was on it: see the table." if many else ""
    lines += ["It is shared and has 2 cores: compare figures of one run, not across runs.", ""]
    columns = ["source", "file", "mode", "date", "load 1 min", *["machine"] * many]
    lines += [table(columns, rows) if described else "No result files found."]
    if absent := [name for name, s in latest["sources"].items() if not s]:
        lines += ["", "Not found: " + ", ".join(absent) + "."]
    lines += ["", *[f"- {note}" for note in latest["notes"]]] if latest["notes"] else []
    goals = [[g["goal"], g["measured"], f"**{g['status']}**", g["source"], g["note"]] for g in latest["goals"]]
    return "\n".join([*lines, "", "## Goals", "", table("goal|measured|status|source|note", goals)])


def retrieval_markdown(latest: J, links: dict[str, str]) -> str:
    retrieval = latest["retrieval"]
    datasets, rows = retrieval["datasets"], retrieval["2wiki_dev"]
    parts = ["## Retrieval quality", "", "Zero model calls; offline extractor, local MiniLM, embedded store."]
    for key, (_, figures, title) in RETRIEVAL_SETS.items():
        about, index = datasets[key], datasets[key].get("index")
        parts += ["", f"### {title}", ""]
        if key == "2wiki_full" and about == datasets["2wiki_dev"]:
            parts.append("The 2wiki dev run above was over all passages: its R@2 and R@5 are these figures.")
        elif not about.get("source"):
            parts.append(f"_{about.get('note', 'no data')}._")
        else:
            built = f"; index built in {index['wall_s']} s" if isinstance(index, dict) and "wall_s" in index else ""
            text = f"{fmt(about.get('documents'), ',.0f')} documents, {about.get('questions')} questions; "
            text += f"{label(about['source'])}{built}." + (f" {about['note']}." if about.get("note") else "")
            columns = [*((f, ".3f") for f in figures), ("p50_ms p95_ms", ".1f")]
            body = [[n if n != BASELINE else "BM25 (bm25s)", *cells(r, *columns)] for n, r in retrieval[key].items()]
            parts += [text, "", table(["agent", *figures, "latency p50 / p95 ms"], body)]
    peers, published = retrieval.get("peers_2wiki_dev") or {}, retrieval.get("hipporag_published_recall@5") or {}
    if peers or published:
        columns = [(f, ".3f") for f in ("perfect@8", "R@2", "R@5")]
        body = [[f"peer: {p}", *cells(r, *columns)] for p, r in peers.items()]
        body += [[f"published: {name}", "–", "–", fmt(v, ".3f")] for name, v in published.items()]
        text = f"Peer rows: {retrieval['peers_note']}. Published rows: {retrieval['hipporag_note']}."
        parts += ["", "### 2wiki peers", "", text, "", table("system|perfect@8|R@2|R@5", body)]

    def by_perfect_then_r5(r: J) -> float | None:
        return None if num(r.get("perfect@8")) is None else r["perfect@8"] + (r.get("R@5") or 0) / 10

    agent, row = best(rows, by_perfect_then_r5)
    bm25, top = rows.get(BASELINE) or {}, max(peers, key=lambda p: num(peers[p].get("perfect@8")) or 0.0, default=None)
    text = f"On the 51 2wiki dev questions over {fmt(datasets['2wiki_dev'].get('documents'), ',.0f')} passages "
    text += f"our best agent, {agent}, has all gold passages in its first 8 for {fmt(row.get('perfect@8'), '.3f')} "
    text += f"of the questions and R@5 {fmt(row.get('R@5'), '.3f')} (goals {GOAL_PERFECT_AT_8} and {GOAL_R_AT_5}), "
    text += f"against {fmt(bm25.get('perfect@8'), '.3f')} and {fmt(bm25.get('R@5'), '.3f')} for BM25"
    if top:
        text += f"; the best peer, {top}, recorded {fmt(dig(peers, top, 'perfect@8'), '.3f')} and "
        text += f"{fmt(dig(peers, top, 'R@5'), '.3f')} on a corpus of about 425 passages"
    if "HippoRAG" in published:
        text += f", and HippoRAG published R@5 {fmt(published['HippoRAG'], '.3f')} on 1,000 questions"
    sentence = text + "." if agent else "No 2wiki dev figures for our agents."
    return "\n".join([*parts, "", plot_block("retrieval", links, sentence)])


def conversation_markdown(latest: J, links: dict[str, str]) -> str:
    section, parts = latest["conversation"], ["## Routing", ""]
    ours, bm25, alone = section["router"], section["bm25_router"], section["orchard_alone"]
    if not section["source"] or (ours["kb_questions"] is None and not ours["per_kb"]):
        return "\n".join([*parts, f"_{section.get('note') or label(section['source']) + ': no routing figures'}._"])
    text = "Does a message reach the knowledge base that can answer it? Four KBs created with a description and no "
    text += "keywords (2wiki passages, LiHua-World chat logs, CMRC passages, the orchard sample): each dataset's dev "
    text += "questions should reach its KB, small talk and requests no KB covers should stay in general chat. Our "
    text += "router decides offline, by the KBs' routing profiles and the fulltext index of at most two of them; BM25 "
    text += "as a router sends a message to the KB whose best "
    text += f"document scores highest. {label(section['source'])}."
    kbs = {kb: r["n"] for kb, r in ours["per_kb"].items() if kb != "general"}
    rows = [
        [kb, fmt(n, ",.0f"), *(fmt(dig(x, "per_kb", kb, "accuracy"), ".3f") for x in (ours, bm25))]
        for kb, n in kbs.items()
    ]
    asked = {"kb_questions": sum(num(n) or 0 for n in kbs.values()) if kbs else None}
    asked["small_talk"] = dig(ours, "per_kb", "general", "n")
    for name, key in (("KB questions", "kb_questions"), ("small talk", "small_talk")):
        rows.append([f"**{name}**", fmt(asked[key], ",.0f"), fmt(ours[key], ".3f"), fmt(bm25[key], ".3f")])
    parts += [text, "", table("KB|questions|router|BM25 router", rows), ""]
    quantiles = ("p50", ".1f"), ("p95", ".1f"), ("max", ".0f")
    p50, p95, top = (fmt(ours["latency_ms"][f"{q}_ms"], f) for q, f in quantiles)
    text = f"Routing latency, our router's `route()` per message on the embedded store: p50 {p50} ms, p95 {p95} ms "
    text += f"(max {top} ms) with these 4 KBs"
    scale = section["at_scale"]
    if scale.get("latency_ms"):
        p50, p95, top = (fmt(scale["latency_ms"][f"{q}_ms"], f) for q, f in quantiles)
        text += f"; with {fmt(scale['kbs'], '.0f')} KBs of {fmt(scale['chunks_per_kb'], ',.0f')} chunks each in one "
        text += f"store, over {fmt(scale['messages'], ',.0f')} messages of the set: "
        text += f"p50 {p50} ms, p95 {p95} ms (max {top} ms)"
    parts.append(text + f". Goal: p95 < {GOAL_ROUTING_P95_MS:.0f} ms with 10 KBs of 5,000 chunks.")
    text = f"The orchard served alone (the only KB, marked default): accuracy {fmt(alone['kb_questions'], '.3f')} on "
    text += f"its {fmt(dig(alone, 'per_kb', 'orchard', 'n'), ',.0f')} sample questions and paraphrases, "
    parts += ["", text + f"{fmt(alone['small_talk'], '.3f')} on the small talk (general chat)."]
    seen: Counter[str] = Counter()

    def turn(row: J) -> int:  # the first of each expected KB, then the second, ...
        seen[row["expected"]] += 1
        return seen[row["expected"]]

    if shown := sorted(section["misrouted"], key=turn)[:6]:
        recorded = len(section["misrouted"])
        parts += ["", f"Misrouted by our router (expected → routed), {len(shown)} of the first {recorded} recorded:"]
        parts += [f"- {r['expected']} → {r['routed']}: {r['message']}" for r in shown]
    if follow := section["follow_ups"]:
        text = (
            f'Follow-ups: {follow.get("questions")} 2wiki dev questions asked in two turns ("Tell me about X.", then '
        )
        text += "the question referring to X); perfect@8 of the whole question, of turn 2 as written and of the "
        text += f"standalone query the router builds from it. Example: _{dig(follow, 'example', 'standalone')}_."
        figures = ("whole", ".3f"), ("turn2_as_written", ".3f"), ("turn2_standalone", ".3f"), ("ratio", ".3f")
        rows = [[agent, *cells(row, *figures)] for agent, row in (follow.get("perfect_at_8") or {}).items()]
        parts += ["", text, "", table("agent|whole|turn 2|standalone|standalone / whole", rows)]
    return "\n".join(parts)


def answers_markdown(latest: J, links: dict[str, str]) -> str:
    section, parts = latest["answers"], ["## Answers without a chat model", ""]
    if not section["source"]:
        return "\n".join([*parts, f"_{section.get('note', 'no data')}._"])
    text = "The default run (no chat model) answers new questions by quoting the retrieved chunks (the extractive "
    text += "answerer), through the agent the product picks. Answer: the answer (its notice line left out) holds the "
    text += "gold answer; ceiling: the chunks given to the answerer hold it; first sentence: the top chunk's first "
    text += f"sentence as the answer, in the same run. {label(section['source'])}."
    figures = ("answer_rate ceiling", ".3f"), ("kept", ".3f"), ("baseline_rate", ".3f"), ("median_chars", ".0f")
    counts = ("headings markdown internal repeats", ".0f")
    rows = [
        [title, *cells(section["datasets"][key], ("questions", ",.0f"), *figures, counts)]
        for key, title in ANSWER_SETS.items()
    ]
    header = "dataset|questions|answer / ceiling|answer ÷ ceiling|first sentence|median chars|"
    header += "headings / markdown / graph text / repeats"
    parts += [text, "", table(header, rows)]
    before = [[title, *cells(section["previous"][key], *figures)] for key, title in ANSWER_SETS.items()]
    if any(row[1] != "–" for row in before):
        parts += ["", "The run before it (`previous` in the result file):", ""]
        parts += [table("dataset|answer / ceiling|answer ÷ ceiling|first sentence|median chars", before)]
    if missed := section["orchard_missed"]:
        parts += ["", "Orchard questions answered without their expected answer:"]
        parts += [f"- {row['question']} → {row['answer'][:160]}" for row in missed]
    return "\n".join(parts)


def jobs_markdown(latest: J, links: dict[str, str]) -> str:
    section, parts = latest["ingestion_jobs"], ["## Ingestion jobs", ""]
    if not section["source"]:
        return "\n".join([*parts, f"_{section.get('note', 'no data')}._"])
    serving = section["serving"]
    text = f"Chat turns to the orchard KB, one every {fmt(serving['interval_s'])} s, idle and while "
    text += f"{fmt(serving['passages'], ',.0f')} 2wiki passages are ingested through the API into another KB by "
    text += "the serving process's own worker (embedded stores, offline extractor); first-token time from the "
    text += f"client. {label(section['source'])}."
    phases = [[phase, *cells(serving[phase], ("n", ",.0f"), ("p50 p95 p99 max", ".0f"))] for phase in ("idle", "busy")]
    parts += [text, "", table("phase|turns|first token p50 / p95 / p99 / max (ms)", phases), ""]
    parts += [
        f"p99 busy ÷ idle {fmt(serving['busy_over_idle_p99'])}; each request answered 202 in "
        f"{', '.join(f'{ms:.0f}' for ms in serving.get('requests_202_ms') or [])} ms; the jobs ran at "
        f"{fmt(serving['documents_per_s'], '.1f')} documents/s and were over "
        f"{fmt(serving['submitted_to_done_s'], '.0f')} s after the first request.",
        "",
        "Throughput: `python -m backend worker` processes on this machine, the serving process without its own; "
        "documents/s from the first job's start to the last one's end. embedded = SQLite jobs and graph; neo4j = "
        "Postgres jobs (procrastinate) and Neo4j; llm = a scripted model answering after 200 ms per call, cN = "
        "EXTRACTION_CONCURRENCY N.",
        "",
    ]
    columns = ("passages", ",.0f"), ("documents_per_s", ".1f"), ("working_s", ".1f"), ("model_calls_per_chunk", ".2f")
    rows = [
        [name, *cells(case, *columns), str(case["cpu_s"]), str(case["none_twice"])]
        for name, case in section["throughput"].items()
    ]
    parts.append(
        table(
            "setup / extractor / workers|documents|documents/s|seconds|model calls per chunk|worker CPU s|none twice",
            rows,
        )
    )
    parts += [f"- {name}: not measured ({why})" for name, why in section["throughput_skipped"].items()]
    return "\n".join(parts)


def serving_markdown(latest: J, links: dict[str, str]) -> str:
    by_store, figures = latest["serving_by_store"], latest["indexing"]["2wiki_by_store"]
    about = latest["indexing"]["2wiki_source"] or {}
    scope = about.get("scope") or "–"
    parts = ["## Serving speed", "", f"graph_indexing on {scope}; {label(about)}.", ""]
    if not figures:
        return "\n".join([*parts, f"_{missing('graph_indexing')}._"])
    rows = []
    for a in AGENTS:
        latency = [cells(dig(by_store, s, a), ("p50_ms p95_ms", ".0f"))[0] for s in figures]
        rows.append([a, *latency, f"< {GOAL_RETRIEVAL_P95_MS[a]:.0f}"])
    for kind, limit in GOAL_WRITE_P95_MS.items():
        alone = [f"p95 {fmt(f[f'{kind}_p95_ms'], '.0f')}" for f in figures.values()]
        refreshed = [f"p95 {fmt(f[f'{kind}_with_refresh_p95_ms'], '.0f')}" for f in figures.values()]
        rows.append([f"{kind} one document (write alone)", *alone, f"< {limit:.0f}"])
        rows.append([f"{kind} + community refresh", *refreshed, ""])
    # A store's column: its name, and the passages it ran on when that is not the whole corpus.
    passages = {s: f.get("passages") for s, f in figures.items()}
    headers = {s: f"{s} (first {fmt(n, ',.0f')} passages)" for s, n in passages.items()}
    headers |= {s: s for s, n in passages.items() if n in (None, WIKI_PASSAGES)}
    parts.append(table(["ms, p50 / p95", *headers.values(), "goal p95"], rows))
    for store, why in (latest["serving"].get("stores_not_measured") or {}).items():
        parts += ["", f"{store}: not measured ({why})."]
    said = []
    for store, column in headers.items():
        if known := p95s(latest, store):
            met = sum(v < GOAL_RETRIEVAL_P95_MS[a] for a, v in known.items())
            slowest = max(known, key=lambda a: known[a])
            text = f"on {column} {met} of {len(known)} agents are under their goal and the slowest, {slowest}, "
            said.append(text + f"takes {known[slowest]:.0f} ms at p95 (goal {GOAL_RETRIEVAL_P95_MS[slowest]:.0f} ms)")
    sentence = f"Retrieval latency per agent over the 51 dev questions on {scope}: " + "; ".join(said) + "."
    return "\n".join([*parts, "", plot_block("serving", links, sentence if said else "No retrieval latencies.")])


# (label, section, figure keys, format) of the streaming table's rows, cells as cells() makes them.
STREAMING_ROWS = (
    ("added latency per token p50 / p99 (µs)", "streaming", "added_us_per_token_p50 added_us_per_token_p99", ".1f"),
    ("server CPU per token (µs), 1 stream", "streaming", "cpu_us_per_token", ".1f"),
    ("tokens/s per stream", "streaming", "tokens_per_s", ",.0f"),
    ("first token p50 / p99 (ms), 1 stream", "streaming", "ttft_ms_p50 ttft_ms_p99", ".1f"),
    ("errors, {n} concurrent streams × {waves} waves", "concurrency", "errors", ""),
    ("first token p50 / p99 (ms), {n} streams", "concurrency", "ttft_p50_ms ttft_p99_ms", ",.0f"),
    ("tokens/s in all, {n} streams", "concurrency", "tokens_per_s", ",.0f"),
    ("server CPU per token (µs), {n} streams", "concurrency", "server_cpu_us_per_token", ".0f"),
    ("server peak RSS (MiB)", "concurrency", "peak_rss_mib", ".0f"),
)


def streaming_markdown(latest: J, links: dict[str, str]) -> str:
    s, c, agui = latest["streaming"], latest["concurrency"], latest["streaming"]["agui"]
    n, waves, r = c.get("streams") or "–", c.get("waves") or "–", c.get("ours_over_passthrough") or {}
    rows = []
    for name, area, keys, spec in STREAMING_ROWS:
        ours, theirs = cells(latest[area], (keys, spec)), cells(latest[area]["passthrough"], (keys, spec))
        rows.append([name.format(n=n, waves=waves), *ours, *theirs])
    text = "General chat (no retrieval) with a 0 ms scripted model, our server next to a bare FastAPI pass-through "
    text += f"of the same model in the same run. Single stream: {label(s['source'])}; "
    text += f"concurrent: {label(c['source'])}, history in {c.get('history') or '–'}."
    parts = ["## Streaming and concurrency", "", text, "", table(["", "ours", "pass-through"], rows)]
    if client := s.get("model_client_cpu_us_per_token") or {}:
        methods = ", ".join(f"{m} {fmt(v, '.1f')}" for m, v in client.items())
        client_source = label(s["model_client_source"])
        parts += ["", f"Model client CPU per streamed token (µs, {client_source}): {methods}."]
    if agui.get("source"):
        text = f"AG-UI translation CPU per event ({label(agui['source'])}): "
        text += f"{fmt(agui['us_per_event_whole_run'], '.1f')} µs over a whole run (token frames dominate), "
        text += f"{fmt(agui['us_per_event_structured'], '.1f')} µs for the other events (steps, tool calls, citations)."
        parts += ["", text]
    said = []
    if s["passthrough_ratio"] is not None:
        text = f"One stream at a time our server spends {fmt(s['passthrough_ratio'])}x the pass-through's CPU "
        text += f"per token and adds {fmt(s['added_us_per_token_p50'], '.1f')} µs per token at p50 (pass-through "
        said.append(text + f"{fmt(s['passthrough']['added_us_per_token_p50'], '.1f')} µs)")
    if c.get("streams") is not None:
        text = f"with {c['streams']} concurrent streams its first-token p99 is {fmt(r.get('ttft_p99'))}x and its "
        text += f"throughput {fmt(r.get('tokens_per_s'))}x the pass-through's, with {c.get('errors')} errors in "
        said.append(text + f"{c.get('streams_total')} streams")
    sentence = "; ".join(said) + f" (dashed line: the {GOAL_RATIO}x goal)." if said else "No streaming figures."
    return "\n".join([*parts, "", plot_block("streaming", links, sentence)])


PODCAST = [("documents", ""), ("chunks", ""), ("wall_s", ".1f"), ("s_per_document", ".2f"), ("minilm_s", ".1f")]
PODCAST += [("calls_per_chunk", ".2f"), ("entities", ""), ("relations", ""), ("peak_rss_mib", ".0f")]


def indexing_markdown(latest: J, links: dict[str, str]) -> str:
    indexing = latest["indexing"]
    podcast, stores = indexing["podcast"], indexing["2wiki_by_store"]
    parts = ["## Indexing cost", ""]
    if indexing["source"]:
        rows = []
        for name, r in podcast.items():
            if "status" in r:  # a peer that did not run
                rows.append([name, r["status"], *["–"] * 8])
                continue
            system = ("ours " if name in OURS_MODES else "") + name + (" (failed)" if r.get("failed") else "")
            rows.append([system, *cells(r, *PODCAST)])
        text = f"Podcast transcripts, ours on the first {indexing.get('podcast_documents')} pieces, the peers on the "
        text += f"first {indexing.get('podcast_peer_documents')}, through the same scripted model at 0 ms per call "
        text += f"(ours also at 200 ms); {label(indexing['source'])}. The peers embed with a nearly free hashed bag of "
        text += "words: compare their wall time with ours minus MiniLM."
        columns = "system|pieces|chunks|wall s|s / piece|MiniLM s|calls / chunk|entities|relations|peak RSS MiB"
        parts += [text, "", table(columns, rows)]
    else:
        parts.append(f"_{indexing.get('note')}._")
    index = (("wall_s", ".1f"), ("peak_rss_mib", ".0f"), ("calls_per_chunk", ".2f"))
    rows = [[f"ours, {store}", *cells(f, ("passages", ",.0f"), *index), "–"] for store, f in stores.items()]
    for peer, f in ((peer, f) for peer, f in indexing["peers_2wiki"].items() if "status" not in f):
        rows.append([f"{peer} (measured)", *cells(f, ("documents", ""), *index, ("query_p50_ms query_p95_ms", ".0f"))])
    quoted = (("wall_s", ".0f"), ("peak_rss_mb", ".0f"), ("model_calls_per_chunk", ".1f"))
    for peer, f in (indexing.get("2wiki_peers_quoted") or {}).items():
        rows.append([f"{peer} (quoted in the issue)", "800", *cells(f, *quoted), "–"])
    if rows:
        text = f"2wiki passages ({label(indexing['2wiki_source'])}; peers measured on the first "
        text += f"{indexing.get('peer_passages') or '–'} passages; query = local-mode context only):"
        columns = "system|passages|index wall s|peak RSS MiB|calls / chunk|query p50 / p95 ms"
        parts += ["", text, "", table(columns, rows)]
    ours = [f"{fmt(podcast[m]['s_per_document'])} s {m}" for m in OURS_MODES if dig(podcast, m, "s_per_document")]
    peers = [
        f"{fmt(podcast[p]['s_per_document'])} s for {p} ({podcast[p].get('documents')} pieces)"
        for p in PEERS
        if dig(podcast, p, "s_per_document")
    ]
    if ours or peers:
        text = f"Per podcast piece, ours takes {', '.join(ours)} ({indexing.get('podcast_documents')} pieces; "
        text += f"{fmt(indexing.get('calls_per_chunk'))} model calls per chunk with the model)"
        sentence = text + (f", against {' and '.join(peers)}." if peers else "; no peer ran.")
    elif stores:
        times = ", ".join(f"{s} {fmt(f.get('wall_s'), '.0f')} s" for s, f in stores.items())
        sentence = f"Indexing {dig(indexing, '2wiki_source', 'scope')} takes {times} "
        sentence += f"(goal under {GOAL_INDEX_S:.0f} s on all passages)."
    else:
        sentence = "No indexing figures."
    return "\n".join([*parts, "", plot_block("indexing", links, sentence)])


def history_markdown(latest: J, links: dict[str, str]) -> str:
    history, parts = latest["history"], ["## History store", ""]
    if not history["source"]:
        return "\n".join([*parts, f"_{history.get('note')}._"])
    figures = (("turns_per_s", ".1f"), ("start_p50_ms start_p95_ms", ".1f"), ("append_p50_ms append_p95_ms", ".1f"))
    rows = []
    for target, by_n in history["targets"].items():
        for n, r in sorted(by_n.items(), key=lambda item: int(item[0])):
            rows.append([target, n, *cells(r, *figures, ("cpu_us_per_turn", ",.0f"))])
    text = "One turn = the store calls of one chat turn: start (the conversation, the user message and the 20 "
    text += "messages before it, one statement on Postgres) and append (the answer). The raw asyncpg loop sends one "
    text += "statement per call into copies of the same tables: the floor of what a store must send. "
    text += f"{label(history['source'])}."
    parts += [text, "", table("target|sessions|turns/s|start p50 / p95 ms|append p50 / p95 ms|CPU µs / turn", rows), ""]
    postgres, raw, sqlite = (history["targets"].get(t) or {} for t in ("postgres", "raw_asyncpg", "sqlite"))
    if not postgres:
        return "\n".join([*parts, plot_block("history", links, "No Postgres history-store figures.")])
    top, low = max(postgres, key=int), min(postgres, key=int)

    def rate(rows: J, n: str) -> str:
        return fmt(dig(rows, n, "turns_per_s"), ".0f")

    text = f"At {top} concurrent sessions the Postgres store completes {rate(postgres, top)} turns/s"
    if raw:
        share = ratio(num(dig(postgres, top, "turns_per_s")), num(dig(raw, top, "turns_per_s")))
        text += f", {fmt(share)}x the raw asyncpg loop's {rate(raw, top)}"
    text += f" (SQLite {rate(sqlite, top)})" if sqlite else ""
    text += f"; with {low} session {rate(postgres, low)} against {rate(raw, low)} raw."
    return "\n".join([*parts, plot_block("history", links, text)])


def suite_markdown(latest: J, links: dict[str, str]) -> str:
    parts = ["## The suite's run time", ""]
    for mode, run in latest["suite"].items():
        if not run:
            parts.append(f"_{mode}: no run recorded._")
            continue
        rows = [[step["name"], step["status"], f"{step['seconds']} s"] for step in run.get("steps") or []]
        total = (num(run.get("total_s")) or 0.0) / 60
        text = f"**{mode}** ({label(run['source'])}): {total:.1f} min in all, setup and the services' start included."
        parts += [text, "", table("step|status|wall", rows), ""]
    return "\n".join(parts).rstrip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for option, default, what in (
        ("--results", "results", "the per-benchmark JSON files"),
        ("--report", "REPORT.md", "the Markdown report to write"),
        ("--plots", "report", "where the PNG plots go"),
    ):
        parser.add_argument(option, type=Path, default=ROOT / "benchmarks" / default, help=what)
    args = parser.parse_args()
    results, report, notes = args.results.resolve(), args.report.resolve(), list[str]()
    latest = assemble(results, *load(results, notes), notes, datetime.now(UTC))
    latest["goals"] = judge(latest)
    (results / "latest.json").write_text(json.dumps(latest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    links = {}
    for name, plot in PLOTS.items():  # one PNG per area with data; a stale one of an area without is removed
        fig, path = plot(latest), args.plots.resolve() / f"{name}.png"
        if fig is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(path, format="png", metadata={"Software": None})
            links[name] = Path(os.path.relpath(path, report.parent)).as_posix()
        elif path.exists():
            path.unlink()
    writers = [
        header,
        retrieval_markdown,
        conversation_markdown,
        answers_markdown,
        serving_markdown,
        streaming_markdown,
    ]
    writers += [indexing_markdown, jobs_markdown, history_markdown, suite_markdown]
    text = "\n\n".join(write(latest, links) for write in writers)
    report.write_text(text + "\n", encoding="utf-8")
    counts = Counter(goal["status"] for goal in latest["goals"])
    print(f"wrote {rel(results / 'latest.json')}, {rel(report)} and {len(links)} plots; goals: {dict(counts)}")


if __name__ == "__main__":
    main()
