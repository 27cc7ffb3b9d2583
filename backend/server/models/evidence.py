"""Response bodies of the page's KB views: the graph behind an answer's sources, and example questions."""

from __future__ import annotations

from pydantic import BaseModel, Field

from backend.application.knowledge.evidence import EvidenceEdge, EvidenceGraph, EvidenceNode


class EvidenceNodeOut(BaseModel):
    id: str = Field(description="as the sources name it: `entity:<id>`, `chunk:<id>` or `community:<id>`")
    kind: str = Field(description="`entity`, `chunk` or `community`")
    label: str = Field(description="an entity's name, a chunk's title and number, a community's title")
    detail: str = Field(description="an entity's type and description, a chunk's text, a community's summary (cut)")
    source: bool = Field(description="one of the ids asked for, not only drawn beside one")
    doc_id: str

    @classmethod
    def of(cls, node: EvidenceNode) -> EvidenceNodeOut:
        shown = {"kind": node.kind, "label": node.label, "detail": node.detail, "doc_id": node.doc_id}
        return cls(id=node.node_id, source=node.source, **shown)


class EvidenceEdgeOut(BaseModel):
    source: str
    target: str
    kind: str = Field(
        description="`relation` (entity — entity), `mentions` (chunk → entity) or `contains` (community → entity)"
    )
    label: str
    weight: float
    is_source: bool = Field(description="a relation that is itself one of the ids asked for")

    @classmethod
    def of(cls, edge: EvidenceEdge) -> EvidenceEdgeOut:
        return cls(
            source=edge.source,
            target=edge.target,
            kind=edge.kind,
            label=edge.label,
            weight=edge.weight,
            is_source=edge.edge_source,
        )


class EvidenceGraphOut(BaseModel):
    kb_prefix: str
    nodes: list[EvidenceNodeOut]
    edges: list[EvidenceEdgeOut]
    skipped: list[str] = Field(description="ids asked for that the KB no longer holds, or that are not drawn")

    @classmethod
    def of(cls, kb_prefix: str, graph: EvidenceGraph) -> EvidenceGraphOut:
        return cls(
            kb_prefix=kb_prefix,
            nodes=[EvidenceNodeOut.of(node) for node in graph.nodes],
            edges=[EvidenceEdgeOut.of(edge) for edge in graph.edges],
            skipped=list(graph.skipped),
        )


class ExamplesOut(BaseModel):
    kb_prefix: str
    examples: list[str] = Field(description="questions made from the KB's most mentioned entities and its titles")
