import pytest

from backend.domain.knowledge_base import KnowledgeBase
from backend.domain.worker import ParsedWorkerName, Worker, parse_worker_name


@pytest.mark.parametrize("raw", ["", "   ", None])
def test_empty_is_the_general_route(raw: str | None) -> None:
    assert parse_worker_name(raw) == ParsedWorkerName("", "", "retrieve_only")


def test_one_part_is_a_bare_agent_type() -> None:
    assert parse_worker_name("graph_agent") == ParsedWorkerName("", "graph_agent", "retrieve_only")


def test_two_parts_are_kb_and_agent() -> None:
    assert parse_worker_name("edu:hybrid_agent") == ParsedWorkerName("edu", "hybrid_agent", "retrieve_only")


def test_three_parts_with_retrieve_only() -> None:
    parsed = parse_worker_name(" edu : naive_rag_agent : retrieve_only ")
    assert parsed == ParsedWorkerName("edu", "naive_rag_agent", "retrieve_only")


def test_three_parts_with_empty_mode_means_retrieve_only() -> None:
    assert parse_worker_name("edu:graph_agent:").agent_mode == "retrieve_only"


@pytest.mark.parametrize("raw", ["edu:graph_agent:chat", "edu:graph_agent:RETRIEVE_ONLY", "a:b:legacy"])
def test_three_parts_with_another_mode_are_rejected(raw: str) -> None:
    with pytest.raises(ValueError, match="agent_mode"):
        parse_worker_name(raw)


@pytest.mark.parametrize("raw", ["a:b:retrieve_only:x", "a:b:c:d:e", ":::"])
def test_more_than_three_parts_are_rejected(raw: str) -> None:
    with pytest.raises(ValueError, match="invalid worker_name"):
        parse_worker_name(raw)


def test_a_worker_renders_its_name_with_default_for_the_unprefixed_kb() -> None:
    assert Worker(KnowledgeBase(""), "graph_agent").name == "default:graph_agent:retrieve_only"
    assert Worker(KnowledgeBase("edu"), "graph_agent").name == "edu:graph_agent:retrieve_only"
