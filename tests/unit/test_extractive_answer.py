"""The extractive answerer: the sentence that answers, of the kind asked, without markdown, graph text or repeats.

The orchard examples quote the sample documents (samples/orchard/documents) as their chunks read.
"""

import re

from backend.domain.retrieval import EvidenceSource, Granularity, RetrievalResult
from backend.infrastructure.llm.extractive import (
    EXTRACTIVE_NOTICE,
    NO_EVIDENCE_ANSWER,
    compose_extractive_answer,
    stream_pieces,
)
from backend.infrastructure.llm.extractive_passages import chunk_sentences
from backend.infrastructure.llm.extractive_questions import AnswerKind, answers, asked, names

VISITING_ACCESS = """## Accessibility

The car park, the farm shop, the café and the accessible toilet are step-free. The main orchard
path is firm gravel and suitable for wheelchairs and pushchairs in dry weather; the grass rows can
be muddy. Two mobility scooters can be borrowed free of charge from the visitor centre."""
PEOPLE_HAMISH = """## Hamish Dunmore, beekeeper

Hamish Dunmore is a volunteer and the orchard's beekeeper. He keeps about 30 hives at Wrenfield and
moves some of them into Hallam's Field at blossom time. Wrenfield honey, sold in the farm shop, comes
from his hives. Hamish is a retired vet and has kept bees since he was a boy."""
CIDERS = """## The ciders

- **Hollow Gold** is the house cider: a medium-dry blend, mostly Dabinett with some Bramley's
  Seedling and Tremlett's Bitter. Strength 6.0% ABV. Sold in 500 ml bottles and 20-litre boxes.
- **Old Tobias** is a single-variety cider made only from Kingston Black apples and named after the
  orchard's founder. It is aged for twelve months in oak and bottle conditioned. Strength 7.2% ABV.
  Only about 1,200 bottles are made each year."""
PEOPLE_DMITRI = """## Dmitri Halloran, head cider maker

Dmitri Halloran has been head cider maker since 2011. He grew up in Cork, trained in winemaking and
spent eight years making wine in the Loire Valley before coming to Wrenfield."""
CALENDAR = """Wrenfield Apple Day is held on the Sunday closest to 21 October: there are apple-tasting tables.

Blossom usually opens in the last week of April, starting with the dessert apples. The orchard celebrates
with Blossom Sunday on the second Sunday in May, when entry to the orchard walks is free."""
WHO_TO_ASK = """## Who to ask

| Question | Person |
|---|---|
| Wholesale cider orders | Ruth Wren-Okafor |
| Honey and bees | Hamish Dunmore |"""


def chunk(text: str, title: str = "doc") -> RetrievalResult:
    return RetrievalResult("chunk-" + title, Granularity.CHUNK, text, EvidenceSource("d-" + title, title, "c"), 0.5)


def graph(granularity: Granularity, text: str, name: str) -> RetrievalResult:
    return RetrievalResult(f"{granularity.value}-{name}", granularity, text, EvidenceSource("", name, ""), 0.9)


def body(answer: str) -> str:
    assert answer.startswith(EXTRACTIVE_NOTICE)
    return answer.removeprefix(EXTRACTIVE_NOTICE).strip()


def sentences_of(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?。！？])\s*(?:\[\d+\]\s*)?", re.sub(r"\s*\[\d+\]", "", text)) if s.strip()]


# -- English question kinds ----------------------------------------------------------------------------------------


def test_who_prefers_the_sentence_naming_a_person_over_a_chance_word_match() -> None:
    answer = body(
        compose_extractive_answer("Who is in charge of the beekeeping?", [chunk(VISITING_ACCESS), chunk(PEOPLE_HAMISH)])
    )
    assert "Hamish Dunmore" in answer
    assert "mobility scooters" not in answer


def test_how_strong_finds_the_strength_in_the_list_item_about_the_cider() -> None:
    answer = body(compose_extractive_answer("How strong is Old Tobias cider?", [chunk(CIDERS)]))
    assert "7.2% ABV" in answer
    assert "6.0% ABV" not in answer  # the other cider's strength


def test_when_prefers_the_sentence_with_the_date_of_the_thing_asked_about() -> None:
    answer = body(compose_extractive_answer("When is Blossom Sunday held?", [chunk(CALENDAR)]))
    assert answer.startswith("The orchard celebrates with Blossom Sunday on the second Sunday in May")


def test_where_prefers_the_sentence_naming_a_place() -> None:
    text = (
        "The pressed pomace is heavy and wet. The pressed pomace goes to Coldharbour Farm next door, where it feeds "
        "the pigs."
    )
    answer = body(compose_extractive_answer("Where does the pressed pomace go?", [chunk(text)]))
    assert answer.startswith("The pressed pomace goes to Coldharbour Farm")


def test_how_many_prefers_the_sentence_with_a_number() -> None:
    text = "Each tonne of apples is washed before pressing. On a full day each tonne gives around 650 litres of juice."
    answer = body(compose_extractive_answer("How many litres of juice does a tonne of apples give?", [chunk(text)]))
    assert answer.startswith("On a full day each tonne gives around 650 litres")


def test_a_compound_question_gets_a_sentence_for_each_of_its_questions() -> None:
    answer = body(compose_extractive_answer("Who is the head cider maker, and since when?", [chunk(PEOPLE_DMITRI)]))
    assert "Dmitri Halloran has been head cider maker since 2011." in answer


def test_a_sentence_opening_with_a_pronoun_brings_the_one_it_refers_to() -> None:
    text = (
        "## Wren's Russet (dessert)\n\nWren's Russet is the orchard's own variety. It grew from a chance seedling "
        "that Tobias Wren found in 1934 beside the east hedge."
    )
    answer = body(compose_extractive_answer("Which seedling did Tobias Wren find in 1934?", [chunk(text)]))
    assert answer.startswith("Wren's Russet is the orchard's own variety. It grew from a chance seedling")


def test_question_kinds_are_read_in_english_and_chinese() -> None:
    kinds = {
        "Who leads the mill tours?": (AnswerKind.PERSON,),
        "When was the orchard founded, and by whom?": (AnswerKind.DATE, AnswerKind.PERSON),
        "Where is lost property kept?": (AnswerKind.PLACE,),
        "How much does the tour cost?": (AnswerKind.NUMBER,),
        "Which cider is the sweetest?": (),
        "What days is the café open?": (AnswerKind.DATE,),
        "Which character betrays the king?": (AnswerKind.PERSON,),
        "氨碱法又可以叫什么？": (AnswerKind.ALIAS,),
        "谁设计了该教堂？": (AnswerKind.PERSON,),
        "陈荣捷卒于哪一年？": (AnswerKind.DATE,),
        "天水围河在哪里？": (AnswerKind.PLACE,),
        "德龙烟铁路全长多少公里？": (AnswerKind.NUMBER,),
    }
    assert {question: asked(question).kinds for question in kinds} == kinds


# -- Chinese ---------------------------------------------------------------------------------------------------------


def test_chinese_question_matches_chinese_evidence() -> None:
    items = [chunk("果园成立于一九五二年。果园有四十英亩。", "历史")]
    answer = body(compose_extractive_answer("果园什么时候成立？", items))
    assert "成立于一九五二年" in answer
    assert "四十英亩" not in answer


def test_chinese_who_prefers_the_sentence_with_a_person() -> None:
    text = "圣约翰教堂是一座哥特式教堂。来自克利夫兰的建筑师亨利·沃尔什设计了这座教堂。教堂于1893年设计建成。"
    answer = body(compose_extractive_answer("谁设计了该教堂？", [chunk(text)]))
    assert answer.startswith("来自克利夫兰的建筑师亨利·沃尔什设计了这座教堂。")


def test_chinese_how_many_prefers_the_sentence_with_a_number() -> None:
    text = "德龙烟铁路是山东省的一条铁路。线路全长548公里，设计时速每小时160公里。该铁路连接德州与烟台。"
    answer = body(compose_extractive_answer("德龙烟铁路全长多少公里？", [chunk(text)]))
    assert "548公里" in answer


def test_chinese_when_prefers_the_sentence_with_a_year() -> None:
    text = "陈荣捷是著名的哲学家。陈荣捷研究宋明理学多年。陈荣捷于1994年病逝于美国。"
    answer = body(compose_extractive_answer("陈荣捷卒于哪一年？", [chunk(text)]))
    assert "1994年" in answer


def test_chinese_where_prefers_the_sentence_with_a_place() -> None:
    text = "天水围河是一条人工水道，建于八十年代。天水围河位于香港新界西北部，是厦村的分界线。"
    answer = body(compose_extractive_answer("天水围河在哪里？", [chunk(text)]))
    assert answer.startswith("天水围河位于香港新界西北部")


# -- what an answer never shows --------------------------------------------------------------------------------------


def test_markdown_is_stripped_and_headings_are_never_quoted() -> None:
    answer = body(
        compose_extractive_answer("How strong is Old Tobias cider and which apple is it made from?", [chunk(CIDERS)])
    )
    assert "Old Tobias is a single-variety cider made only from Kingston Black apples" in answer
    assert "7.2% ABV" in answer
    assert "**" not in answer and "#" not in answer and not answer.startswith("-")


def test_a_table_row_reads_as_its_cells() -> None:
    answer = body(compose_extractive_answer("Who handles wholesale cider orders?", [chunk(WHO_TO_ASK)]))
    assert answer == "Wholesale cider orders: Ruth Wren-Okafor [1]"


def test_graph_results_are_never_quoted_and_markers_cite_the_chunks() -> None:
    evidence = [
        graph(Granularity.COMMUNITY, "A community of 10 entities centred on the beekeeper Hamish Dunmore.", "c1"),
        graph(Granularity.ENTITY, "Hamish Dunmore (person): the beekeeper of the orchard.", "hamish"),
        chunk(PEOPLE_HAMISH, "People"),
        graph(Granularity.RELATIONSHIP, "Hamish Dunmore keeps the beekeeper's hives.", "r1"),
    ]
    answer = body(compose_extractive_answer("Who is the beekeeper?", evidence))
    assert "Hamish Dunmore is a volunteer and the orchard's beekeeper." in answer
    assert "community" not in answer and "(person)" not in answer
    assert set(re.findall(r"\[(\d+)\]", answer)) == {"3"}


def test_graph_results_alone_are_no_answer() -> None:
    evidence = [graph(Granularity.ENTITY, "1989 (date): the year the packing shed burned.", "1989")]
    assert compose_extractive_answer("When did the packing shed burn?", evidence) == NO_EVIDENCE_ANSWER


def test_a_fact_in_two_overlapping_chunks_is_quoted_once() -> None:
    first = "The press runs in autumn. On a full day it presses about two tonnes of apples."
    second = "about two tonnes of apples. On a full day it presses about two tonnes of apples. The pomace feeds pigs."
    answer = body(
        compose_extractive_answer(
            "How many tonnes of apples does the press handle?", [chunk(first), chunk(second, "b")]
        )
    )
    assert answer.count("presses about two tonnes") == 1
    assert not answer.startswith("about")  # a chunk's first words in mid-sentence are not a sentence


def test_answers_are_short() -> None:
    text = " ".join(f"The orchard grows variety number {n} of apples on the slope." for n in range(12))
    answer = body(compose_extractive_answer("What apples does the orchard grow on the slope?", [chunk(text)]))
    assert len(sentences_of(answer)) <= 3


def test_a_chat_question_brings_its_reply_and_a_when_answer_its_session_time() -> None:
    text = (
        "Time: 20260814_15:00\nLiHua: Are you coming to the garage sale?\nAdamSmith: Yes, I can help set up the "
        "tables for the garage sale.\nLiHua: Great, thanks!"
    )
    answer = body(compose_extractive_answer("Who offers to help set up for the garage sale?", [chunk(text)]))
    assert "AdamSmith: Yes, I can help set up the tables" in answer
    dated = body(compose_extractive_answer("When was the garage sale discussed?", [chunk(text)]))
    assert "20260814_15:00" in dated


def test_rare_question_terms_outweigh_common_ones() -> None:
    items = [chunk("The orchard sells apples. The orchard sells cider. The orchard opens at nine in summer.")]
    answer = body(compose_extractive_answer("What time does the orchard open in summer?", items))
    assert answer.startswith("The orchard opens at nine in summer.")


def test_no_evidence_says_so() -> None:
    assert compose_extractive_answer("anything?", []) == NO_EVIDENCE_ANSWER


def test_stream_pieces_rejoin_exactly() -> None:
    text = "Extractive answer:\n\nThe orchard  was founded [1]."
    pieces = stream_pieces(text)
    assert "".join(pieces) == text
    assert len(pieces) > 4


def test_a_chat_message_names_its_speaker_for_who() -> None:
    text = (
        "Time: 20260520_18:00\nTirionFordring: I am looking forward to seeing how the garden evolves, too!\n"
        "Thrall: Absolutely! Excited to see how the garden evolves!\nGiselle: I'm excited for Saturday, everyone!"
    )
    answer = body(compose_extractive_answer("Who is excited to see how the garden evolves?", [chunk(text)]))
    assert answer.startswith("Thrall: Excited to see how the garden evolves!")


def test_every_sentence_of_a_chat_message_is_its_speakers() -> None:
    text = (
        "LiHua: Who is the best ever at the back for Barcelona?\n"
        "JakeWatson: Great question! Honestly, I'd say Puyol was the greatest defender.\n"
        "Ileana: Piqué was the best defender of the club."
    )
    answer = body(
        compose_extractive_answer("Who does JakeWatson consider the best defender of the club?", [chunk(text)])
    )
    assert answer.startswith("JakeWatson: Honestly, I'd say Puyol was the greatest defender.")


def test_a_when_answer_with_a_relative_date_brings_its_calendar_date() -> None:
    text = "Time: 20260301_10:00\nLiHua: Hey Adam, I have transferred this month's rent.\nAdamSmith: Thanks, got it!"
    answer = body(compose_extractive_answer("When did Li Hua tell Adam that the rent was transferred?", [chunk(text)]))
    assert answer.startswith("Time: 20260301_10:00 LiHua: Hey Adam, I have transferred this month's rent.")


def test_a_speaker_written_as_one_word_is_found_by_their_name() -> None:
    text = "LiHua: Hi all! I will bring chips for the movie.\nJakeWatson: Li Hua, soda for the movie would be great."
    answer = body(compose_extractive_answer("What snack will Li Hua bring for the movie?", [chunk(text)]))
    assert answer.startswith("LiHua: I will bring chips for the movie.")


def test_a_sentence_that_says_a_quoted_one_again_at_greater_length_is_left_out() -> None:
    text = "The mill opened in 1998. The mill opened in 1998 after volunteers from the village rebuilt the old barn."
    answer = body(compose_extractive_answer("When did the mill open?", [chunk(text)]))
    assert answer.count("opened in 1998") == 1


def test_a_bracketed_aside_before_a_colon_is_no_label() -> None:
    text = "科罗拉多河蟾蜍（学名：Incilius alvarius）是一种有毒的蟾蜍。毒腺位于眼下，能分泌毒液。"
    answer = body(compose_extractive_answer("科罗拉多河蟾蜍的毒腺位于什么地方？", [chunk(text)]))
    assert answer.startswith("毒腺位于眼下")
    assert "学名:" not in answer


def test_a_question_that_offers_an_answer_of_the_kind_asked_is_a_proposal() -> None:
    text = (
        "WolfgangSchulz: Dinner on Friday sounds good to me.\nLiHua: Great! How about 7 pm for dinner?\n"
        "WolfgangSchulz: Sure, see you then!"
    )
    answer = body(compose_extractive_answer("What time does LiHua propose for dinner?", [chunk(text)]))
    assert answer.startswith("LiHua: How about 7 pm for dinner?")


def test_a_sentence_with_a_pronoun_before_any_name_brings_the_one_it_refers_to() -> None:
    text = (
        "Mara: Honestly, I'd go with Harbour Lights. The way it mixes sailing with old sea songs is lovely.\n"
        "Tomas: Sounds fun!"
    )
    answer = body(compose_extractive_answer("Which show does Mara say mixes sailing with sea songs?", [chunk(text)]))
    assert answer.startswith("Mara: Honestly, I'd go with Harbour Lights. The way it mixes sailing")


def test_a_sentence_saying_nothing_beyond_the_question_brings_the_one_before_it() -> None:
    text = (
        "Nadia: We're launching a new line of rye crackers this week! Perfect for hikers like you.\n"
        "Owen: Nice, I'll try them."
    )
    answer = body(compose_extractive_answer("What does Nadia think is perfect for hikers like Owen?", [chunk(text)]))
    assert answer.startswith("Nadia: We're launching a new line of rye crackers this week! Perfect for hikers")


def test_a_chat_question_is_answered_by_the_next_message_from_someone_else() -> None:
    text = (
        "Mara: Are we still on for the picnic on Sunday? I bought a new blanket.\n"
        "Tomas: Sorry, I am visiting my aunt that day.\nMara: Oh well, next time then."
    )
    answer = body(compose_extractive_answer("Is the picnic on Sunday still on?", [chunk(text)]))
    assert answer.startswith("Mara: Are we still on for the picnic on Sunday? Tomas: Sorry, I am visiting my aunt")


def test_a_pronoun_after_a_name_refers_to_that_name() -> None:
    text = "The shop opens at nine. Corin sells the honey of his bees at the gate."
    answer = body(compose_extractive_answer("Who sells honey at the gate?", [chunk(text)]))
    assert answer.startswith("Corin sells the honey of his bees")


def test_a_compound_word_the_evidence_never_uses_is_found_by_its_two_words() -> None:
    text = "The shop opens at nine. Corin looks after the hives and sells the honey of his bees at the gate."
    answer = body(compose_extractive_answer("Who tends the beehives?", [chunk(text)]))
    assert answer.startswith("Corin looks after the hives")


def test_a_chat_reply_is_about_what_the_message_it_answers_asks() -> None:
    text = (
        "LiHua: Do you know any good gym near the office?\nWolfgangSchulz: Sure, try FitZone on Mill Road.\n"
        "LiHua: Thanks, I will check it out.\nLiHua: The gym near my flat is always too crowded.\n"
        "LiHua: I recommend the new cafe next to it, by the way."
    )
    answer = body(compose_extractive_answer("Which gym did Wolfgang recommend to LiHua?", [chunk(text)]))
    assert "WolfgangSchulz: Sure, try FitZone on Mill Road." in answer


def test_in_a_group_chat_a_reply_may_answer_a_question_asked_messages_before() -> None:
    text = (
        "Emily: Which film should we watch at the club on Friday night? Vote away!\n"
        "Niamh: Great idea! I always liked comedies.\n"
        "Orion: I'd say Heat, for me.\n"
        "Merrick: Tickets are cheaper before six, by the way."
    )
    answer = body(compose_extractive_answer("Which film does Orion want to watch on Friday night?", [chunk(text)]))
    assert answer.startswith("Orion: I'd say Heat")


def test_a_chat_reply_to_a_question_asking_the_same_sort_gives_the_sort() -> None:
    text = (
        "LiHua: Quick question: what kind of pizza is your favourite?\n"
        "WolfgangSchulz: Bro, I'm all about that classic margherita.\n"
        "LiHua: Nice, I like mine spicy.\n"
        "WolfgangSchulz: I prefer to keep it mild, and I'm a fan of that new pizza place downtown."
    )
    answer = body(compose_extractive_answer("What type of pizza does WolfgangSchulz prefer?", [chunk(text)]))
    assert "WolfgangSchulz: Bro, I'm all about that classic margherita." in answer


def test_a_chat_reply_gives_a_reason_without_because() -> None:
    text = (
        "Anna: Why do you go hiking every weekend, Tom?\n"
        "Tom: It clears my head after a long week at the office.\n"
        "Anna: I went hiking in the Alps once.\n"
        "Tom: I go hiking with my brother every weekend, rain or shine."
    )
    answer = body(compose_extractive_answer("Why does Tom go hiking every weekend?", [chunk(text)]))
    assert "It clears my head" in answer


def test_a_reply_gives_the_sort_after_the_exclamation_it_reacts_with() -> None:
    text = (
        "LiHua: Sure! What kind of features do you want in the feedback section?\n"
        "YurikoYamamoto: Awesome! I was thinking of a simple form for users to leave comments.\n"
        "LiHua: I can add a feature for that section next week.\n"
        "YurikoYamamoto: The new booking feature in the feedback section works well."
    )
    answer = body(
        compose_extractive_answer("What kind of features does Yuriko want in the feedback section?", [chunk(text)])
    )
    assert "YurikoYamamoto: I was thinking of a simple form" in answer


def test_a_reply_counts_as_a_sort_only_for_a_question_asking_a_sort_of_the_same_thing() -> None:
    text = (
        "LiHua: Quick question: what kind of music do you like?\n"
        "WolfgangSchulz: Bro, I'm all about that classic margherita.\n"
        "WolfgangSchulz: I prefer a thin crust pizza from the stone oven."
    )
    answer = body(compose_extractive_answer("What type of pizza does WolfgangSchulz prefer?", [chunk(text)]))
    assert answer.startswith("WolfgangSchulz: I prefer a thin crust pizza")
    assert "margherita" not in answer


def test_a_question_asking_for_someones_words_is_answered_by_their_message() -> None:
    text = (
        "Emily: Hey everyone! Got a fun question: Who do you think is the most hateable character in the show?\n"
        "Niamh: What a great topic! I always found Joffrey super hateable. What do you guys think?\n"
        "Orion: Joffrey is up there! But I'd say Ramsay takes the cake for me.\n"
        "Merrick: Ramsay is a solid choice, but I can't stand Cersei either.\n"
        "Quillan: Honestly, the show was a game changer with its characters!\n"
        "Tamara: I think the most hateable has to be Petyr."
    )
    question = "Who is the most hateable character in the show in Orion's opinion?"
    answer = body(compose_extractive_answer(question, [chunk(text)]))
    assert answer.startswith("Orion: Joffrey is up there! But I'd say Ramsay takes the cake for me.")


def test_the_person_whose_words_a_question_asks_for() -> None:
    assert asked("Who is the most hateable character in Orion's opinion?").speaker == "orion"
    assert asked("Why is protein important according to Jennifer Moore?").speaker == "jennifermoore"
    assert asked("What does Li Hua think about the focaccia?").speaker == "lihua"
    assert asked("Which game did Jareth praise for its side quests?").speaker == "jareth"
    assert asked("What snack has Jake mentioned?").speaker == "jake"
    assert asked("Who suggests getting pizza?").speaker == ""  # the person asked for, not a speaker named
    assert asked("What does the press squeeze?").speaker == ""


def test_a_chinese_chat_reply_is_about_what_the_message_it_answers_asks() -> None:
    text = (
        "李华：周末的烧烤聚会你打算带什么饮料？\n王伟：我会带几瓶自制的酸梅汤。\n"
        "李华：太好了！\n王伟：我周末还要去健身房锻炼。"
    )
    answer = body(compose_extractive_answer("王伟打算给烧烤聚会带什么？", [chunk(text)]))
    assert "酸梅汤" in answer
    assert "健身房" not in answer


def test_a_sentence_scoring_nearly_as_well_is_quoted_without_an_answer_of_the_kind_asked() -> None:
    text = (
        "The ferry to Ardmore runs twice a day from May to September. Tickets for the ferry are sold on board. "
        "The ferry leaves from the slipway below the lighthouse steps."
    )
    answer = body(compose_extractive_answer("Where does the Ardmore ferry leave from?", [chunk(text)]))
    assert "The ferry leaves from the slipway below the lighthouse steps." in answer
    assert "Tickets" not in answer  # scores well below the best and names no place


def test_a_chinese_sentence_scoring_nearly_as_well_is_quoted_without_an_answer_of_the_kind_asked() -> None:
    text = "青石镇东邻白河县，西与南山县相邻，北与北川接壤。青石镇盛产茶叶。镇政府设在老槐树下的院子里。"
    answer = body(compose_extractive_answer("青石镇的镇政府在哪里？", [chunk(text)]))
    assert "镇政府设在老槐树下的院子里。" in answer
    assert "茶叶" not in answer


def test_a_chat_message_is_dated_by_the_date_stamp_above_it() -> None:
    later = "Time: 20261002_12:00\nLiHua: Shall we get dinner at the pizza place tonight?\nWolfgangSchulz: Sounds good."
    asked_day = (
        "Time: 20260930_16:00\nLiHua: Shall we get dinner at the noodle bar tonight?\nWolfgangSchulz: Works for me."
    )
    question = "Where does LiHua suggest having dinner on 20260930?"
    answer = body(compose_extractive_answer(question, [chunk(later, "later"), chunk(asked_day, "asked")]))
    assert "noodle bar" in answer
    assert "pizza" not in answer


def test_a_chinese_chat_message_is_dated_by_the_date_stamp_above_it() -> None:
    later = "时间：2026年4月5日\n李华：周末我们去看电影吧？\n王伟：好的。"
    asked_day = "时间：2026年3月1日\n李华：周末一起去爬山吧？\n王伟：好啊，我带水。"
    answer = body(
        compose_extractive_answer("李华在2026年3月1日提议周末做什么？", [chunk(later, "b"), chunk(asked_day, "a")])
    )
    assert "爬山" in answer
    assert "电影" not in answer


def test_a_sentence_with_a_question_term_not_yet_quoted_goes_before_one_more_about_the_name() -> None:
    text = (
        "The Harlow Light Railway opened in 1902. The Harlow Light Railway is owned by the county council. "
        "The Harlow Light Railway carries 2,000 people a day. The line is known for the steep climb up Beacon Hill."
    )
    answer = body(compose_extractive_answer("What is the Harlow Light Railway known for?", [chunk(text)]))
    assert "The line is known for the steep climb up Beacon Hill." in answer
    assert len(sentences_of(answer)) <= 3


def test_a_chinese_sentence_with_a_question_term_not_yet_quoted_goes_before_one_more_about_the_name() -> None:
    text = (
        "红斑鲷是笛鲷科的一种鱼类。红斑鲷体长可达50厘米。红斑鲷分布于西太平洋。红斑鲷的幼鱼体色为红色。"
        "红斑鲷在台湾被称为红鸡鱼。红斑鲷可供食用。\n\n成鱼习性为夜间觅食，白天躲在礁洞里。"
    )
    answer = body(compose_extractive_answer("红斑鲷有什么习性？", [chunk(text)]))
    assert "成鱼习性为夜间觅食" in answer


def test_a_sentence_is_about_its_documents_title_where_it_leaves_the_name_out() -> None:
    items = [
        chunk("Margit Solberg joined the orchard in 1990 and ran the mill for twenty years.", "History of Wrenfield"),
        chunk("Born in Bergen. Learnt to make cider in Normandy before she came to England.", "Margit Solberg"),
    ]
    answer = body(compose_extractive_answer("Where did Margit Solberg learn to make cider?", items))
    assert answer.startswith("Learnt to make cider in Normandy")


def test_a_chinese_term_counts_a_little_by_its_characters() -> None:
    text = "明代张溥有《唐文粹删》，清代王士祯有《唐文粹诗选》。宋代姚铉编。"
    answer = body(compose_extractive_answer("《唐文粹》是由谁编著的？", [chunk(text, "唐文粹")]))
    assert answer.startswith("宋代姚铉编。")


def test_where_prefers_the_sentence_that_says_where_over_one_that_names_places() -> None:
    text = "The cider mill sells bottles to pubs in London and Bristol. The cider mill is located behind the farm shop."
    answer = body(compose_extractive_answer("Where is the cider mill?", [chunk(text)]))
    assert answer.startswith("The cider mill is located behind the farm shop.")


def test_a_chinese_where_prefers_the_sentence_that_says_where() -> None:
    text = "太浩湖的游客多来自旧金山和萨克拉门托。太浩湖位于加利福尼亚州和内华达州的边界上。"
    answer = body(compose_extractive_answer("太浩湖在哪里？", [chunk(text, "太浩湖")]))
    assert answer.startswith("太浩湖位于加利福尼亚州和内华达州的边界上。")


def test_a_sentence_that_names_a_new_answer_is_no_repeat() -> None:
    text = (
        "HaileyJohnson: Good morning! Just a quick reminder that your fresh bread will be delivered today. "
        "Just a quick reminder that Alice is on her way to deliver your fresh bread."
    )
    answer = body(compose_extractive_answer("Who is delivering the fresh bread?", [chunk(text)]))
    assert "Alice" in answer


def test_how_many_prefers_the_number_in_the_unit_asked_for() -> None:
    text = "The juice of 12 orchards is pressed here.\n\nThe juice fills 650 litres a day."
    answer = body(compose_extractive_answer("How many litres of juice are pressed?", [chunk(text)]))
    assert answer.startswith("The juice fills 650 litres a day.")


def test_a_chinese_how_many_prefers_the_number_in_the_unit_asked_for() -> None:
    text = "事故中有379名乘客和机组人员受伤。事故中有25人受伤。"
    answer = body(compose_extractive_answer("事故中有多少人受伤？", [chunk(text)]))
    assert answer.startswith("事故中有25人受伤。")


def test_another_name_is_found_where_the_text_gives_another_translation() -> None:
    text = "齿河盗龙的化石发现于阿根廷。齿河盗龙属又译猛禽盗龙，是兽脚亚目的一属。"
    answer = body(compose_extractive_answer("齿河盗龙又叫什么？", [chunk(text)]))
    assert answer.startswith("齿河盗龙属又译猛禽盗龙")


def test_a_repeat_with_one_more_date_is_still_a_repeat() -> None:
    text = "The mill opened in 1998 in the old barn. The mill opened in the old barn in the spring of 1998."
    answer = body(compose_extractive_answer("When did the mill open?", [chunk(text)]))
    assert answer.count("The mill opened") == 1


def test_a_name_is_read_without_its_possessive_and_without_i_or_an_opening_common_word() -> None:
    assert names("But I’d say Ramsay Bolton takes the cake for me.", frozenset()) == ["Ramsay Bolton"]
    assert names("I’ll bring the cones and Farrah’s ball.", frozenset()) == ["Farrah"]
    assert names("The Lighthouse Cafe opens at eight.", frozenset()) == ["Lighthouse Cafe"]
    assert names("Let’s make sure we work on the weak spots.", frozenset()) == []
    assert "orion" in asked("Who is the most hateable character in Orion's opinion?").focus


def test_a_chinese_where_takes_the_place_a_sentence_says_something_is_at() -> None:
    text = "诺丁汉郡的行政区划中，曼斯菲尔德是第1大镇，萨顿是第2大镇。行政总部位于西布里奇福德。"
    answer = body(compose_extractive_answer("诺丁汉郡的行政总部在哪？", [chunk(text)]))
    assert answer.startswith("行政总部位于西布里奇福德。")


def test_a_chinese_how_many_counts_in_a_unit_the_tagger_does_not_know() -> None:
    text = (
        "《历史也疯狂》是香港亚洲电视1991年制作的电视节目，一共播出了多年。"
        "曾经在1993年于本港台重播第一辑，也曾经在卫视中文台播放。《历史也疯狂》共有三辑，早期以短剧分辑数。"
    )
    answer = body(compose_extractive_answer("《历史也疯狂》一共有几辑?", [chunk(text)]))
    assert answer.startswith("《历史也疯狂》共有三辑")


def test_why_prefers_the_sentence_that_gives_a_reason() -> None:
    text = (
        "The orchard sold perry from its own pear trees for twenty years. Perry sales at the orchard stopped in 1998. "
        "The pear trees had been felled because fireblight had spread through them."
    )
    answer = body(compose_extractive_answer("Why did the orchard stop selling perry?", [chunk(text)]))
    assert "because fireblight" in answer and "twenty years" not in answer
    assert asked("凤头鹦鹉为什么被降级为亚科？").kinds == (AnswerKind.REASON,)


def test_where_someone_is_from_prefers_the_sentence_that_says_so() -> None:
    text = "Agnes Wren lived in Little Merrow and sold fruit in Merrow. Agnes Wren was born in Ashcombe, a market town."
    answer = body(compose_extractive_answer("Where was Agnes Wren from?", [chunk(text)]))
    assert answer.startswith("Agnes Wren was born in Ashcombe")
    origin = answers("袁彭年，字介眉，别号特邱，湖广公安人。", AnswerKind.PLACE, asked("袁彭年是哪里人？"))
    assert "湖广公安" in origin


def test_which_few_in_chinese_asks_for_a_list_not_a_number() -> None:
    question = asked("新角龙类包含哪几类恐龙？")
    assert question.kinds == () and question.listing
    assert asked("这部剧一共有几辑？").kinds == (AnswerKind.NUMBER,)


def test_when_the_question_names_a_documents_subject_another_document_is_not_about_its_focus() -> None:
    evidence = [
        chunk("Every Thursday she sold fruit and honey from a handcart at the market.", "Agnes Wren"),
        chunk("At Merrow market a plaque remembers Agnes Wren and her stall.", "Merrow Market"),
    ]
    answer = body(compose_extractive_answer("What did Agnes Wren sell at the market?", evidence))
    assert answer.startswith("Every Thursday she sold fruit")


def test_a_chinese_sentence_without_a_subject_of_its_own_comes_with_the_one_it_continues() -> None:
    text = (
        "金盏花原产于南欧，是一种常见的园艺植物。金盏花的提取物中含有皂角苷与芳香油，可用来制作化妆品。"
        "可减轻发炎及舒缓肌肤。金盏花的花期很长，作为观赏植物很受欢迎。金盏花也可作为食用色素。"
    )
    answer = body(compose_extractive_answer("金盏花作为化妆品有什么作用？", [chunk(text, "金盏花")]))
    assert "可用来制作化妆品。 可减轻发炎及舒缓肌肤。" in answer


def test_when_someone_died_prefers_the_sentence_that_tells_of_the_death_however_it_is_said() -> None:
    text = "陈荣捷，广东开平人。1966年退休。1978年，当选台湾中央研究院院士。1980年获颁荣誉学位。1994年病逝于美国。"
    answer = body(compose_extractive_answer("陈荣捷卒于哪一年？", [chunk(text, "陈荣捷")]))
    assert answer.startswith("1994年病逝于美国。")
    text = "Margit Solberg came to the valley in 1950. She married Elias in 1952. In 1961 she introduced keeving. "
    text += "She died at Wrenfield in 1998."
    answer = body(compose_extractive_answer("When did Margit Solberg pass away?", [chunk(text, "Margit Solberg")]))
    assert "She died at Wrenfield in 1998." in answer


def test_what_colour_prefers_the_sentence_that_names_a_colour_the_question_does_not() -> None:
    text = "Kingston Black is a cider apple from Somerset. Its trees are slow to crop. The fruit is small and dark red."
    answer = body(compose_extractive_answer("What colour is a Kingston Black apple?", [chunk(text, "Kingston Black")]))
    assert answer.startswith("The fruit is small and dark red.") and "slow to crop" not in answer
    text = "颊鳞雀鲷为雀鲷科的其中一种。本鱼体呈椭圆形而侧扁。眶下骨具鳞，下缘具锯齿。"
    text += "幼鱼时黄色较显著，成鱼后则黄色较淡。"
    answer = body(compose_extractive_answer("颊鳞雀鲷的身体颜色是怎样变化的？", [chunk(text, "颊鳞雀鲷")]))
    assert answer.startswith("幼鱼时黄色较显著")


def test_a_chinese_sentence_opening_with_a_month_comes_with_the_sentence_that_gives_its_year() -> None:
    text = "金华是浙江省的一个城市。1949年5月，中国人民解放军占领金华，设金华县。"
    text += "10月析金华县城区设金华市，1950年撤金华市。"
    answer = body(compose_extractive_answer("金华市是什么时候设立的？", [chunk(text, "金华市")]))
    assert "设金华县。 10月析金华县城区设金华市" in answer


def test_a_question_in_prose_states_what_the_text_answers_and_one_in_a_dialogue_only_asks() -> None:
    prose = (
        "The Feist case was decided by the Supreme Court in 1991 and is often cited. The question in the Feist case "
        "was whether a telephone directory is protected by copyright? The Court held that it is not."
    )
    answer = body(compose_extractive_answer("What was the question in the Feist case?", [chunk(prose)]))
    assert answer.startswith("The question in the Feist case was whether")
    assert "The Court held that it is not." in answer
    chat = (
        "Mia: The Feist case was decided in 1991 and is often cited.\nOmar: So what was the question in the Feist "
        "case?\nMia: Whether a telephone directory is protected by copyright."
    )
    answer = body(compose_extractive_answer("What was the question in the Feist case?", [chunk(chat)]))
    assert not answer.startswith("Omar:")


MARGIT = """In 1952 Elias married Margit Solberg, a Norwegian food chemist who had come to the valley to study
traditional fermentation. Once the mill was running, Margit introduced keeving, an old French method of making
naturally sweet cider, and one of the orchard's ciders is named after her."""
MARGITS_CIDER = """## The ciders

- **Margit's Keeved** is a naturally sweet, lightly sparkling keeved cider made from Dabinett and
  Tremlett's Bitter. Strength 4.5% ABV."""


def test_asked_what_is_named_after_someone_the_answer_is_a_name_that_takes_theirs() -> None:
    question = asked("Which cider is named after Margit Solberg?")
    assert question.kinds == (AnswerKind.NAMESAKE,)
    sentence = "Margit's Keeved is a naturally sweet, lightly sparkling keeved cider."
    assert answers(sentence, AnswerKind.NAMESAKE, question) == ["Margit's Keeved"]
    assert answers("Once the mill was running, Margit introduced keeving.", AnswerKind.NAMESAKE, question) == []
    assert answers("Old Tobias is named after the founder.", AnswerKind.NAMESAKE, question) == []


def test_the_first_sentence_to_name_the_answer_asked_is_quoted_past_the_usual_length() -> None:
    evidence = [chunk(MARGIT, "History"), chunk(MARGITS_CIDER, "Cider")]
    answer = body(compose_extractive_answer("Which cider is named after Margit Solberg?", evidence))
    assert "one of the orchard's ciders is named after her. [1]" in answer
    assert "Margit's Keeved is a naturally sweet" in answer and len(answer) > 250


def test_a_sentence_of_a_quoted_chunk_that_names_the_kind_asked_comes_before_closer_ones_that_do_not() -> None:
    chat = """LiHua: Could you put up the new curtains in the living room?
AdamSmith: Sure, I can help with the curtains!
AdamSmith: The installation needs a drill and two people.
AdamSmith: The rails are available at the hardware store.
AdamSmith: I'm free on Wednesday afternoon."""
    question = "When is AdamSmith available to help with the curtain installation?"
    answer = body(compose_extractive_answer(question, [chunk(chat, "chat")]))
    assert answer.startswith(
        "AdamSmith: Sure, I can help with the curtains! AdamSmith: I'm free on Wednesday afternoon."
    )


def test_what_time_asks_for_a_time_of_day_not_a_day() -> None:
    question = asked("What time do they agree to meet for pizza?")
    assert answers("How about we aim for around 7ish?", AnswerKind.DATE, question) == ["around 7ish"]
    assert answers("See you at 3 PM on Saturday.", AnswerKind.DATE, question) == ["3 PM"]
    assert answers("Saturday is going to be a blast with pizza!", AnswerKind.DATE, question) == []
    assert answers("I went to 2 parties at 2 places.", AnswerKind.DATE, question) == []
    assert answers("Saturday is going to be a blast!", AnswerKind.DATE, asked("When do they meet?")) == ["Saturday"]


def test_what_year_asks_for_a_year_not_a_day() -> None:
    question = asked("Who started the orchard, and in what year?")
    assert answers("It was founded in 1921 by Agnes Wren.", AnswerKind.DATE, question) == ["1921"]
    assert answers("The mill was busiest in the 1950s.", AnswerKind.DATE, question) == ["1950s"]
    assert answers("The year starts with the Wassail in January.", AnswerKind.DATE, question) == []
    assert answers("Which year? Time: 20260221_15:00", AnswerKind.DATE, asked("In which year did it open?")) == [
        "20260221"
    ]


def test_the_name_of_a_thing_is_answered_by_a_name_not_the_speaker() -> None:
    question = asked("What is the name of the gym that Wolfgang recommended?")
    assert AnswerKind.NAME in question.kinds
    assert answers("There's a nice gym called FitZone near you.", AnswerKind.NAME, question) == ["FitZone"]
    assert answers('We watched "The Witcher 3" all night.', AnswerKind.NAME, question) == ["The Witcher 3"]
    assert asked("What is the name of the person who runs the mill?").kinds == (AnswerKind.PERSON,)


def test_what_type_of_a_thing_is_answered_by_the_thing_with_the_word_that_sorts_it() -> None:
    question = asked("What type of press does the mill use?")
    assert question.kinds == (AnswerKind.SORT,)
    assert answers("He installed a rack-and-cloth press that he bought.", AnswerKind.SORT, question) == [
        "rack-and-cloth press"
    ]
    assert answers("The press is used every autumn.", AnswerKind.SORT, question) == []
    assert answers("A new press house opened.", AnswerKind.SORT, question) == []  # "press" sorts the house
    assert answers("Do you prefer turn-based combat?", AnswerKind.SORT, asked("What kind of combat is best?")) == [
        "turn-based combat"
    ]
    text = (
        "# The mill\n\nThe mill presses most days in October, and the Press House Café is used by visitors. "
        "Apples are milled, and the pomace goes on the rack-and-cloth press."
    )
    answer = body(compose_extractive_answer("What type of press does the mill use?", [chunk(text)]))
    assert answer.startswith("Apples are milled, and the pomace goes on the rack-and-cloth press.")


def test_a_sentence_naming_the_noun_a_question_asks_about_comes_first() -> None:
    assert asked("What new hobbies does Wolfgang propose?").head == "hobbi"
    assert asked("What scene from the film does Bronwyn mention?").head == "scene"
    assert asked("What does Li Hua think about the film?").head == ""
    chat = (
        "Bronwyn: Honestly, I'm all about Red Dead Redemption 2.\n"
        "Thane: Red Dead Redemption 2 has so many epic moments!\n"
        "Bronwyn: Red Dead Redemption 2 was emotional from start to end.\n"
        "Helios: Can't believe how emotional Red Dead Redemption 2 got!\n"
        "Bronwyn: I have to say, the scene with Arthur and John on the mountain really hit home."
    )
    question = 'What scene from "Red Dead Redemption 2" does Bronwyn mention as emotional?'
    answer = body(compose_extractive_answer(question, [chunk(chat)]))
    assert "the scene with Arthur and John" in answer


def test_a_chat_message_is_read_without_its_speaker() -> None:
    first, second = chunk_sentences("WolfgangSchulz: Try FitZone on Mill Road. It opens at six.", 1)
    assert (first.label, first.said, second.said) == ("WolfgangSchulz", "Try FitZone on Mill Road.", "It opens at six.")
    question = asked("What is the name of the gym Wolfgang likes?")
    said = " | ".join(answers(first.said, AnswerKind.NAME, question))
    assert "FitZone" in said and "WolfgangSchulz" not in said
    assert "WolfgangSchulz" in answers(first.text, AnswerKind.NAME, question)  # what the label would add
