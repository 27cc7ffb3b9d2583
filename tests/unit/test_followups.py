"""A follow-up that refers back is made to stand alone for routing and retrieval; the stored message is not."""

from __future__ import annotations

from backend.application.chat.inputs import ChatInput
from backend.domain.context import RequestContext
from backend.domain.conversation import Message, Role
from backend.domain.events import RoutedEvent
from backend.domain.routing import QueryMethod
from backend.infrastructure.routing.background import WordfreqRarity
from backend.infrastructure.routing.followups import OfflineFollowUps, refers_back
from tests.support.fakes import FakeAgent, evidence
from tests.support.wiring import wire

FOLLOWUPS = OfflineFollowUps(WordfreqRarity())


def said(*turns: str) -> tuple[Message, ...]:
    """User and assistant turns, alternating, user first."""
    return tuple(Message(Role.USER if n % 2 == 0 else Role.ASSISTANT, text) for n, text in enumerate(turns))


async def test_a_follow_up_that_refers_back_carries_the_earlier_subject() -> None:
    history = said("Tell me about Coulson Wallop.", "Coulson Wallop was an English politician. [1]")
    query = await FOLLOWUPS.standalone("Where did his father study?", history)
    assert query.carried == "Coulson Wallop"  # as written: the graph agents match names by their capitals
    assert query.text == "Where did Coulson Wallop's father study?"  # in place: the question keeps its shape
    assert (query.method, query.note) == (QueryMethod.OFFLINE, "")


async def test_the_latest_user_turn_with_a_subject_is_carried() -> None:
    history = said("Who founded Wrenfield Orchard?", "Agnes Wren. [1]", "thanks!", "You are welcome.")
    assert (await FOLLOWUPS.standalone("When did she die?", history)).carried == "founded Wrenfield Orchard"


async def test_two_subjects_take_the_places_of_the_first_and_the_second() -> None:
    history = said("Tell me about Aas Ka Panchhi and Phoolwari.", "…")
    query = await FOLLOWUPS.standalone("Which film was released first, the first one or the second one?", history)
    assert query.text == "Which film was released first, Aas Ka Panchhi or Phoolwari?"


async def test_a_reference_in_no_known_form_gets_the_subject_appended() -> None:
    query = await FOLLOWUPS.standalone("它栖息在哪里？", said("松鸦是什么鸟？", "…"))
    assert query.text == f"它栖息在哪里？ {query.carried}"


async def test_a_title_of_everyday_words_is_carried_by_its_capitals() -> None:
    for earlier, subject in (
        ("Tell me about Changed It.", "Changed It"),
        ("Tell me about Gaby: A True Story.", "Gaby: A True Story"),
        ("Tell me about Aas Ka Panchhi and Phoolwari.", "Aas Ka Panchhi and Phoolwari"),
    ):
        assert (await FOLLOWUPS.standalone("Who sang that one?", said(earlier, "…"))).carried == subject


async def test_a_message_that_names_its_own_subject_stands_alone() -> None:
    history = said("Tell me about Coulson Wallop.", "…")
    for message in ("Who directed the film that won the Palme d'Or in 1994?", "When was Mugain born?"):
        query = await FOLLOWUPS.standalone(message, history)
        assert (query.text, query.carried, query.method) == (message, "", QueryMethod.AS_WRITTEN), message


async def test_nothing_is_carried_without_history_or_without_a_reference() -> None:
    assert (await FOLLOWUPS.standalone("Where did his father study?", ())).carried == ""
    history = said("Tell me about Coulson Wallop.", "…")
    assert (await FOLLOWUPS.standalone("What is the capital of France?", history)).carried == ""


async def test_chinese_follow_ups_carry_the_chinese_subject() -> None:
    history = said("松鸦是什么鸟？", "松鸦是鸦科的鸟类。[1]")
    assert refers_back("它栖息在哪里？")
    query = await FOLLOWUPS.standalone("它栖息在哪里？", history)
    assert "松鸦" in query.carried and query.text.startswith("它栖息在哪里？")


async def test_retrieval_searches_the_standalone_query_and_the_stored_message_is_as_written() -> None:
    """The follow-up names neither a person nor the KB: the carried words route it and retrieval finds them."""
    agent = FakeAgent(results=[evidence("chunk:1", "Hamish Dunmore keeps about 30 hives.", 0.9, "People")])
    wired = wire(agent)
    ctx = RequestContext("r1", "alice", "s1")
    first = await wired.stream.prepare(ctx, ChatInput(session_id="s1", message="Who is Hamish Dunmore at the orchard?"))
    [event async for event in wired.stream.events(first)]
    follow_up = ChatInput(session_id="s1", message="What did he do before?")
    turn = await wired.stream.prepare(RequestContext("r2", "alice", "s1"), follow_up)
    events = [event async for event in wired.stream.events(turn)]
    routed = next(event for event in events if isinstance(event, RoutedEvent))
    assert routed.decision.query == "What did Hamish Dunmore at the orchard do before?"
    assert routed.decision.query_method == "offline"
    assert routed.decision.kb_prefix == "orchard"
    assert agent.calls[-1][0] == "What did Hamish Dunmore at the orchard do before?"
    conversation = await wired.store.find_conversation_id("alice", "s1")
    assert conversation is not None
    stored = await wired.store.list_messages(conversation)
    asked = [m.content for m in stored if m.role is Role.USER]
    assert asked == ["Who is Hamish Dunmore at the orchard?", "What did he do before?"]
