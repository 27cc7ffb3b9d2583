"""The built-in web chat page (/ui/) in headless Chromium against the live server: streaming text,
citations, the route decision, history after a reload, stop, errors and clear; and the API's page (/docs) with
the network cut off (tests/js/web_page.mjs)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx

from tests.support.js_clients import ARTIFACTS, chromium_path, run_node
from tests.support.live_server import live_server, llm_settings, make_settings
from tests.support.scripted_llm import Reply, ScriptedLLM

ROOT = Path(__file__).resolve().parents[2]
ORCHARD_TITLES = {
    path.read_text().splitlines()[0].removeprefix("# ")
    for path in (ROOT / "samples" / "orchard" / "documents").glob("*.md")
}
QUESTION = "When was Wrenfield Orchard founded, and by whom?"
# Markup in the answer must show as text: the page never parses model output as HTML.
TOKENS = [
    "Wrenfield",
    " Orchard",
    " was",
    " founded",
    " in",
    " 1921",
    " <b>by</b>",
    " the",
    " Wren",
    " family",
    " [1].",
]
STOP_TOKENS = [f"w{i} " for i in range(60)]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def drive_page(base_url: str, screenshot: Path, **args: Any) -> dict[str, Any]:
    """Run the browser script against a live server; returns what the page showed."""
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot.unlink(missing_ok=True)
    return run_node(
        "web_page.mjs",
        {"baseUrl": base_url, "chromiumPath": chromium_path(), "screenshot": str(screenshot), **args},
        timeout_s=120,
    )


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 10_000


def assert_no_page_problems(seen: dict[str, Any], expected_statuses: set[int]) -> None:
    assert seen["pageErrors"] == []
    for message in seen["consoleErrors"]:
        # Only the failed requests the scenario provokes on purpose; never a CSP violation.
        assert "Content Security Policy" not in message
        status = re.search(r"status of (\d{3})", message)
        assert status and int(status.group(1)) in expected_statuses, message


def test_chat_in_the_browser_streams_cites_routes_keeps_history_and_clears(
    data_dir: Path, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(
        Reply(tokens=TOKENS, delay_s=0.12),
        Reply(tokens=STOP_TOKENS, delay_s=0.1),
        Reply(tokens=["It", " was", " 19", "21"], drop_after=2),
    )
    screenshot = ARTIFACTS / "web-chat.png"
    with live_server(make_settings(data_dir, **llm_settings(scripted_llm))) as server:
        seen = drive_page(
            server.base_url,
            screenshot,
            scenario="chat",
            question=QUESTION,
            kb="orchard",
            agent="naive_rag_agent",
            stopQuestion="Tell me everything about the orchard's apple varieties.",
            errorQuestion="Which cider is the strongest at Wrenfield?",
            tooLong="x" * 8001,
        )
        session = seen["sessionId"]
        server_history = httpx.get(f"{server.base_url}/api/v1/conversations/{session}/messages").json()

    # The selectors: auto + general + each KB; auto + every agent type for a KB.
    assert seen["kbOptions"] == ["", "general", "orchard"]
    assert seen["agentOptions"] == [
        "",
        "deep_research_agent",
        "fusion_agent",
        "graph_agent",
        "hybrid_agent",
        "naive_rag_agent",
    ]

    # Streaming: the text grew in steps while the answer was open, then equals the model's tokens.
    answer = seen["answer"]
    partial = sorted(set(seen["partialLengths"]) - {0})
    assert len(partial) >= 2, seen["partialLengths"]
    assert partial[0] < len("".join(TOKENS))
    assert answer["state"] == "done"
    assert answer["text"] == "".join(TOKENS)
    assert answer["htmlElementsInText"] == 0  # "<b>by</b>" stayed text
    assert answer["markerLinks"] == 1  # [1] links to the first citation
    # The answer cites one source: it alone is listed as cited, the others it was given apart, as consulted.
    assert len(answer["citations"]) == 1, answer
    assert answer["consulted"], answer
    assert all(source["title"] in ORCHARD_TITLES for source in answer["citations"] + answer["consulted"])
    assert all(source["snippet"].strip() for source in answer["citations"] + answer["consulted"])
    assert answer["citations"][0] not in answer["consulted"]
    assert answer["route"].startswith("Route: knowledge base orchard")
    assert "worker orchard:naive_rag_agent:retrieve_only" in answer["route"]
    assert "chosen by the request: the request names orchard" in answer["route"]
    assert answer["route"].endswith("answer: llm")
    assert_png(screenshot)

    # After a reload: the same conversation from the server, with citations and route, and the choices kept.
    assert seen["selectionAfterReload"] == {"kb": "orchard", "agent": "naive_rag_agent"}
    question, stored = seen["afterReload"]
    assert (question["role"], question["text"]) == ("user", QUESTION)
    assert stored["role"] == "assistant" and stored["text"] == "".join(TOKENS)
    assert (stored["citations"], stored["consulted"]) == (answer["citations"], answer["consulted"])
    assert stored["route"] == answer["route"]
    assert stored["markerLinks"] == 1

    # A rejected message (HTTP 400 before the stream): shown, given back for editing, nothing added.
    rejected = seen["rejected"]
    assert "longer than" in rejected["notice"] and "invalid_request" in rejected["notice"]
    assert rejected["messages"] == 2
    assert rejected["inputLength"] == 8001

    # Stop aborts the fetch; the partial answer is kept and shown as partial after a reload.
    stopped = seen["stopped"]
    assert stopped["state"] == "stopped" and "Stopped" in stopped["note"]
    assert stopped["text"].startswith("w0 w1 ") and len(stopped["text"]) < len("".join(STOP_TOKENS))

    # A model failure mid-stream: the error event is shown under the partial text.
    failed = seen["failed"]
    assert failed["state"] == "error"
    assert failed["text"] == "It was"
    assert "model" in failed["error"]

    history = seen["historyWithPartials"]
    assert [m["role"] for m in history] == ["user", "assistant"] * 3
    assert history[3]["text"].startswith("w0 w1 ") and "Partial answer" in history[3]["note"]
    assert history[5]["text"] == "It was" and "model" in history[5]["error"]

    # Clear empties the view and the server's history; a new conversation gets a new session id.
    assert seen["afterClear"]["messages"] == 0
    assert seen["afterClear"]["status"] == "Cleared 6 messages."
    assert seen["afterClearReload"] == 0
    assert server_history["messages"] == []
    assert seen["newSessionId"] != seen["sessionId"]

    assert_no_page_problems(seen, expected_statuses={400})


def test_the_page_works_with_an_api_key_and_the_extractive_answerer(data_dir: Path) -> None:
    # The router may override a requested KB, and must be surer than "tour" alone (0.75) makes it.
    settings = make_settings(
        data_dir,
        AUTH_MODE="api_key",
        API_KEYS="web-test-key=alice",
        KB_AUTO_ROUTE_OVERRIDE="true",
        KB_AUTO_ROUTE_MIN_CONFIDENCE="0.78",
    )
    with live_server(settings) as server:
        seen = drive_page(
            server.base_url,
            ARTIFACTS / "web-chat-auth.png",
            scenario="auth",
            apiKey="web-test-key",
            kb="orchard",
            question="How much does the mill tour cost for an adult?",
            offTopicQuestion="Tell me a joke about penguins.",
            unsureQuestion="Is the tour good?",
        )
    assert "missing credentials" in seen["noticeWithoutKey"] and "API key" in seen["noticeWithoutKey"]
    assert seen["noticeHidden"] is True
    assert seen["kbOptions"] == ["", "general", "orchard"]
    answer = seen["answer"]
    assert answer["state"] == "done"
    assert answer["text"].startswith("Extractive answer") and "£12 per adult" in answer["text"]
    assert answer["citations"][0]["title"] == "Visiting Wrenfield"
    assert 1 <= len(answer["citations"]) <= answer["markerLinks"]  # every source listed as cited is cited
    assert answer["consulted"] and not any(source in answer["citations"] for source in answer["consulted"])
    assert answer["route"].startswith("Route: knowledge base orchard")
    assert answer["route"] == (
        "Route: knowledge base orchard · agent naive_rag_agent (lookup: a look-up of one fact: plain search)"
        " · worker orchard:naive_rag_agent:retrieve_only"
        " · router: orchard (heuristic, confidence 0.95): matched orchard keywords: mill, tour · answer: extractive"
    )
    # A requested KB the router could have overridden and kept: "asked for", never "no knowledge base".
    assert seen["keptRoute"] == (
        "Route: knowledge base orchard · agent naive_rag_agent (other: the knowledge base's default agent)"
        " · worker orchard:naive_rag_agent:retrieve_only · asked for orchard; the router found no better match"
        " (heuristic, confidence 0.00): no knowledge base holds the message's words · answer: extractive"
    )
    # A guess below the threshold went to general chat: it is named as a guess, not as the router's choice.
    unsure = (
        r"Route: general chat \(no retrieval\) · router: no knowledge base fits the message well enough"
        r" \(best guess orchard, heuristic, confidence 0\.7[5-7]\): [^·]*tour[^·]* · answer: extractive"
    )
    assert re.fullmatch(unsure, seen["unsureRoute"]), seen["unsureRoute"]
    assert_no_page_problems(seen, expected_statuses={401})


LIGHTHOUSE = """# The Kestrel Point Lighthouse

## History
The **Kestrel Point Lighthouse** was built in 1887 by the engineer Mara Quennell for the Harbour Board of Saltmere.
Its lamp was first lit on 3 March 1888 by keeper Tobias Fenwick, who tended it for thirty years.

## Visiting
- Tours run on Saturdays at 11:00 and cost £4 per adult.
- The keeper's cottage now houses the Saltmere Maritime Museum.
"""


def test_upload_follow_the_job_ask_about_it_and_open_the_evidence_graph(data_dir: Path, tmp_path: Path) -> None:
    upload = tmp_path / "kestrel-point.md"
    upload.write_text(LIGHTHOUSE)
    shots = {name: ARTIFACTS / f"web-{name}.png" for name in ("empty-state", "documents", "evidence-graph")}
    settings = make_settings(
        data_dir,
        AUTH_MODE="api_key",
        API_KEYS="web-admin-key=ada,web-reader-key=bob",
        ADMIN_USERS="ada",
    )
    with live_server(settings) as server:
        seen = drive_page(
            server.base_url,
            ARTIFACTS / "web-evidence.png",
            scenario="evidence",
            apiKey="web-admin-key",
            readerKey="web-reader-key",
            uploadPath=str(upload),
            uploadTitle="The Kestrel Point Lighthouse",
            kb="orchard",
            question="Who built the Kestrel Point Lighthouse, and when?",
            communityAgent="graph_agent",
            communityQuestion="What are the main themes of Wrenfield Orchard?",
            screenshots={name.split("-")[0]: str(path) for name, path in shots.items()},
        )

    # The start screen: each KB, its description and questions made from what it holds.
    (card,) = seen["emptyState"]
    assert card["kb"] == "orchard" and card["description"].startswith("Wrenfield Orchard")
    assert len(card["examples"]) == 3 and all(example.endswith("?") for example in card["examples"])

    # A reader may not upload: the page says so, and shows no job.
    assert "Only an administrator may upload documents" in seen["readerUpload"]["notice"]
    assert "HTTP 403" in seen["readerUpload"]["notice"] and seen["readerUpload"]["jobHidden"] is True

    # The administrator's upload: the job is followed to its end and the document is listed and readable.
    job = seen["job"]
    assert job["status"].startswith("Job done: 1 of 1 documents · 1 added"), job
    assert job["progress"] == [1, 1] and job["noticeHidden"] is True
    # Its first status read got a 429 (Retry-After: 1): the page waited that long, then read on to the end.
    assert seen["jobPollGaps"] and seen["jobPollGaps"][0] >= 1000, seen["jobPollGaps"]
    assert set(seen["documentsAfter"]) - set(seen["documentsBefore"]) == {"The Kestrel Point Lighthouse"}
    # Read shows the document's markdown rendered: headings, a list and bold text, never the syntax.
    reader = seen["reader"]
    assert reader["title"] == "The Kestrel Point Lighthouse"
    assert "Mara Quennell" in reader["text"] and "History" in reader["text"]
    assert "##" not in reader["text"] and "**" not in reader["text"] and "- Tours" not in reader["text"]
    assert reader["headings"] == ["History", "Visiting"]  # the first heading repeats the title and is left out
    assert reader["listItems"][0].startswith("Tours run on Saturdays") and len(reader["listItems"]) == 2
    assert reader["strong"] == ["Kestrel Point Lighthouse"]

    # The answer cites the uploaded document; its snippets show no markdown syntax.
    answer = seen["answer"]
    assert answer["state"] == "done" and "1887" in answer["text"], answer
    assert answer["citations"][0]["title"] == "The Kestrel Point Lighthouse"
    for source in answer["citations"] + answer["consulted"]:
        assert "**" not in source["snippet"] and "## " not in source["snippet"], source
    assert answer["route"].startswith("Route: knowledge base orchard")
    assert "chosen by the request" in answer["route"]

    # The evidence graph is drawn: nodes and edges in vis-network, on its canvas, and a node's text on a click.
    graph = seen["graph"]
    assert graph["canvases"] >= 1
    assert graph["nodes"] == graph["drawnNodes"] == graph["positioned"] > 1
    assert graph["edges"] == graph["drawnEdges"] > 0
    assert seen["detail"] and "Select a node" not in seen["detail"]

    # Community summaries the graph agent consulted are drawn as diamonds labelled with their titles, each linked
    # (dotted) to entities it contains; a click shows the community's summary.
    community_sources = {i for i in seen["communitySourceIds"] if i.startswith("community:")}
    assert community_sources, seen["communitySourceIds"]
    drawn = seen["communityGraph"]
    assert {node["id"] for node in drawn["communities"]} == community_sources
    assert all(node["shape"] == "diamond" and node["label"] for node in drawn["communities"])
    linked = {edge["from"] for edge in drawn["contains"]}
    assert linked == community_sources
    assert all(edge["toShape"] == "dot" and edge["dashes"] == [2, 4] for edge in drawn["contains"])
    assert " community, " in seen["communityDetail"], seen["communityDetail"]

    # An example question from the start screen asks itself.
    example = seen["example"]
    assert example["emptyHidden"] is True
    assert [m["role"] for m in example["messages"]] == ["user", "assistant"]
    assert example["messages"][0]["text"] == example["asked"]

    for path in shots.values():
        assert_png(path)
    assert_no_page_problems(seen, expected_statuses={401, 403, 429})


def test_the_api_page_renders_with_the_network_cut_off(data_dir: Path) -> None:
    screenshot = ARTIFACTS / "api-docs.png"
    with live_server(make_settings(data_dir)) as server:
        operations = sum(len(item) for item in httpx.get(f"{server.base_url}/openapi.json").json()["paths"].values())
        seen = drive_page(server.base_url, screenshot, scenario="docs")
    assert seen["refused"] == []  # nothing asked for outside the server
    assert seen["swaggerOperations"] == operations > 20
    assert seen["swaggerTitle"].startswith("GraphRAG Router→Worker backend")
    assert_no_page_problems(seen, expected_statuses=set())
    assert_png(screenshot)
