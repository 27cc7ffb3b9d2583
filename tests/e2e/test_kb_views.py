"""The web page's KB views over HTTP: the graph behind an answer's sources, and example questions."""

from __future__ import annotations

from pathlib import Path

import httpx

ORCHARD_TITLES = {
    path.read_text().splitlines()[0].removeprefix("# ")
    for path in (Path(__file__).resolve().parents[2] / "samples" / "orchard" / "documents").glob("*.md")
}


async def sources_of(client: httpx.AsyncClient, question: str, agent_type: str) -> list[str]:
    body = {"query": question, "agent_type": agent_type, "top_k": 12}
    response = await client.post("/api/v1/kbs/orchard/retrieve", json=body)
    assert response.status_code == 200, response.text
    return [result["result_id"] for result in response.json()["retrieval_results"]]


async def test_the_evidence_graph_draws_the_sources_their_entities_and_the_relations_between(
    client: httpx.AsyncClient,
) -> None:
    ids = await sources_of(client, "Who founded Wrenfield Orchard and what cider does it make?", "graph_agent")
    assert {source_id.split(":")[0] for source_id in ids} >= {"chunk", "entity"}, ids

    response = await client.get("/api/v1/kbs/orchard/evidence", params=[("id", i) for i in ids])
    assert response.status_code == 200, response.text
    graph = response.json()
    nodes = {node["id"]: node for node in graph["nodes"]}
    # Every source the KB holds is drawn, flagged as a source; a relation is an edge between its two entities.
    for source_id in ids:
        if source_id.startswith("relation:"):
            low, high = source_id.removeprefix("relation:").split("|")
            assert any(
                edge["is_source"] and {edge["source"], edge["target"]} == {f"entity:{low}", f"entity:{high}"}
                for edge in graph["edges"]
            ), source_id
        else:
            assert nodes[source_id]["source"] is True, source_id
    chunks = [node for node in nodes.values() if node["kind"] == "chunk"]
    assert chunks and all(node["label"].rsplit(" #", 1)[0] in ORCHARD_TITLES and node["detail"] for node in chunks)
    assert all(node["label"] for node in nodes.values() if node["kind"] == "entity")
    # Every edge joins two drawn nodes; chunks are joined to the entities they mention.
    assert all(edge["source"] in nodes and edge["target"] in nodes for edge in graph["edges"])
    assert any(edge["kind"] == "mentions" for edge in graph["edges"])
    assert any(edge["kind"] == "relation" for edge in graph["edges"])
    assert graph["skipped"] == []


async def test_chunk_sources_alone_still_draw_the_entities_they_mention(client: httpx.AsyncClient) -> None:
    ids = await sources_of(client, "How much does the mill tour cost?", "naive_rag_agent")
    assert ids and all(source_id.startswith("chunk:") for source_id in ids)
    graph = (await client.get("/api/v1/kbs/orchard/evidence", params=[("id", i) for i in ids])).json()
    kinds = {node["kind"] for node in graph["nodes"]}
    assert kinds == {"chunk", "entity"}
    assert all(not node["source"] for node in graph["nodes"] if node["kind"] == "entity")


async def test_community_sources_are_drawn_with_their_titles_and_linked_to_entities_they_contain(
    client: httpx.AsyncClient,
) -> None:
    ids = await sources_of(client, "What are the main themes of Wrenfield Orchard?", "graph_agent")
    communities = [source_id for source_id in ids if source_id.startswith("community:")]
    assert communities, ids

    graph = (await client.get("/api/v1/kbs/orchard/evidence", params=[("id", i) for i in communities])).json()
    nodes = {node["id"]: node for node in graph["nodes"]}
    assert graph["skipped"] == []
    for community_id in communities:
        node = nodes[community_id]
        assert (node["kind"], node["source"]) == ("community", True)
        assert node["label"] and not node["label"].startswith("Community ") and node["detail"], node
        members = [e["target"] for e in graph["edges"] if e["source"] == community_id]
        assert members and all(e["kind"] == "contains" for e in graph["edges"] if e["source"] == community_id)
        assert all(nodes[member]["kind"] == "entity" and not nodes[member]["source"] for member in members)
    assert all(edge["source"] in nodes and edge["target"] in nodes for edge in graph["edges"])
    # An entity asked for beside a community that contains it is linked to it, not drawn twice.
    member = next(e["target"] for e in graph["edges"] if e["source"] == communities[0])
    both = (await client.get("/api/v1/kbs/orchard/evidence", params=[("id", communities[0]), ("id", member)])).json()
    assert [node["id"] for node in both["nodes"]].count(member) == 1
    assert {"source": communities[0], "target": member} in [
        {"source": e["source"], "target": e["target"]} for e in both["edges"] if e["kind"] == "contains"
    ]


async def test_ids_the_kb_does_not_hold_are_listed_as_skipped_and_bad_requests_are_refused(
    client: httpx.AsyncClient,
) -> None:
    asked = ["chunk:nope", "entity:nope", "relation:a|b", "community:c1", "nonsense", "MATCH (n) DETACH DELETE n"]
    response = await client.get("/api/v1/kbs/orchard/evidence", params=[("id", i) for i in asked])
    assert response.status_code == 200, response.text
    assert response.json() == {"kb_prefix": "orchard", "nodes": [], "edges": [], "skipped": asked}

    unknown = await client.get("/api/v1/kbs/nokb/evidence", params={"id": "chunk:x"})
    assert unknown.status_code in (400, 404) and unknown.json()["error"]["code"] == "unknown_kb"
    too_many = await client.get("/api/v1/kbs/orchard/evidence", params=[("id", f"chunk:{n}") for n in range(101)])
    assert too_many.status_code in (400, 422)
    assert (await client.get("/api/v1/kbs/orchard/evidence")).status_code in (400, 422)


async def test_example_questions_come_from_what_the_kb_holds(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/v1/kbs/orchard/examples")
    assert response.status_code == 200, response.text
    examples = response.json()["examples"]
    assert len(examples) == 3 and len(set(examples)) == 3
    assert examples[0].startswith("What is ") and examples[0].endswith("?")
    assert any(title in example for example in examples for title in ORCHARD_TITLES)
    assert (await client.get("/api/v1/kbs/nokb/examples")).json()["error"]["code"] == "unknown_kb"
