"""What a question asks for, read from its words, and whether a sentence holds an answer of that kind.

The kinds are a person (who, 谁), a date or time (when, 何时), a place (where, 哪里), a number or quantity
(how many, how much, how strong, 多少, 几), another name (also called, 又叫), a reason (why, 为什么), a colour
(what colour, 什么颜色) and a name given after someone (named after). A question may ask for more than one
("When was it founded, and by whom?"). The answers of a kind a sentence holds are its matching
expressions that are not already in the question: a capitalised name the question does not use, a year,
a month, a number with its unit, a place after "in" or "at" or 位于, "also known as" or 又名, "because" or
因为, a colour word, a name that takes a word of the one it is named after; "what time" asks for a time of
day (3 PM, around 7ish), which a day does not give. Chinese sentences are read with jieba's parts of
speech (person and place names, time words, numerals). A sentence states an answer when it says where
something is or where someone is from, tells of the birth or death asked about, or counts in the unit
the question counts in. Question terms are compared by stem, so "beekeeping" finds "beekeeper", and "how
strong" asks about a strength. A question may ask for someone's words: "according to Lachlan", "in Orion's
opinion", "What does Jake recommend?".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

import snowballstemmer  # type: ignore[import-untyped]

from backend.graphrag_agent.chinese import jieba_module
from backend.graphrag_agent.text import STOPWORDS, fulltext_query_terms, index_terms, is_cjk


class AnswerKind(StrEnum):
    PERSON = "person"
    DATE = "date"
    PLACE = "place"
    NUMBER = "number"
    ALIAS = "alias"  # another name of the thing asked about
    REASON = "reason"  # why something is or happened
    COLOUR = "colour"
    NAMESAKE = "namesake"  # a name given after the one the question names ("named after Margit": Margit's Keeved)
    SORT = "sort"  # a kind of a thing ("What type of press"): the thing with the word that sorts it ("hand press")
    NAME = "name"  # the name of a thing ("What is the name of the gym", "What is it called"): a name or a title


# Kinds held by the phrase that introduces the answer ("also known as", "because"), not by the answer itself.
CUED_KINDS = frozenset({AnswerKind.ALIAS, AnswerKind.REASON})
_ALIAS_WORDS = r"又名|又称|又叫|也叫|也称|亦称|别称|别名|俗称|简称|原名|旧称|本名|通称|全称|又译|亦译|或译|又作|亦作"
_ASKS = (  # (kind, the question words that ask for it), checked in this order
    (
        AnswerKind.DATE,
        r"\bwhen\b|\bwhat\s+(?:year|date|day|month|time|century|decade)s?\b|\bwhich\s+(?:year|date|day|month|century)s?\b"
        r"|\bsince\s+when\b|\bhow\s+long\s+ago\b|何时|什么时候|什么时间|哪一?年|哪一?天|哪个?月|何年|几月|几号|几点|哪个时期|哪个朝代|年份",
    ),
    (
        AnswerKind.PERSON,
        r"\bwho\b|\bwhom\b|\bwhose\b|\bwhich\s+(?:person|people|member|employee|friend|character|player|actor|actress|"
        r"singer|artist|author|writer|student|teacher|colleague|neighbou?r)s?\b|\bwhat\s+is\s+the\s+name\s+of"
        r"\s+the\s+(?:person|man|woman)\b|谁|哪位|何人|什么人",
    ),
    (
        AnswerKind.PLACE,
        r"\bwhere\b|\b(?:what|which)\s+(?:place|city|country|town|village|region|state|county|location|address|"
        r"room|building|street|venue)\b|哪里|哪儿|何处|何地|在哪|哪个(?:国家|城市|地方|省|地区|国)|什么地方",
    ),
    (
        AnswerKind.NUMBER,
        r"\bhow\s+(?:many|much|long|old|far|big|tall|high|strong|heavy|large|often|fast|deep|wide)\b|"
        r"\bwhat\s+(?:percentage|number|amount|price|cost|age|size|strength|temperature)\b|多少|(?<!哪)几(?!乎)|多大|多长|多高|"
        r"多久|多重|多远|多深|多宽",
    ),
    (
        AnswerKind.ALIAS,
        r"\b(?:also|otherwise)\s+(?:called|known)\b|\b(?:other|another|full|short)\s+name\b|\bnickname|"
        rf"{_ALIAS_WORDS}|还叫|又(?:可以|可|被|能)(?:叫|称)|叫什么名|什么别名",
    ),
    (AnswerKind.REASON, r"\bwhy\b|\bfor\s+what\s+reason\b|为什么|为何|何故|什么原因|原因是什么"),
    (AnswerKind.COLOUR, r"\b(?:what|which)\s+colou?rs?\b|颜色|什么色|何色"),
    (AnswerKind.NAMESAKE, r"(?-i:\b(?:named\s+(?:after|for)|in\s+honou?r\s+of)\s+[A-Z])"),  # then a name
    (AnswerKind.SORT, r"\b(?:what|which)\s+(?:types?|kinds?|sorts?)\s+of\s+\w"),
    (AnswerKind.NAME, r"\bthe\s+name\s+of\b|\bwhat\s+(?:is|was|are|were)\s+(?:\w+\s+){1,4}called\b"),
)
_ALIAS = re.compile(
    r"\b(?:also|otherwise|formerly|commonly)\s+(?:called|known\s+as|named)\b|\bnicknamed\b|\ba\.?k\.?a\.?\b|"
    rf"\bshort\s+for\b|{_ALIAS_WORDS}",
    re.IGNORECASE,
)
_REASON = re.compile(
    r"\b(?:because|due\s+to|owing\s+to|thanks\s+to|as\s+a\s+result|so\s+that|in\s+order\s+to|named\s+after)\b|"
    r"因为|由于|因此|所以|以致|为了|以便|得名|原因",
    re.IGNORECASE,
)
_ASKS_ORIGIN = re.compile(r"哪里人|哪儿人|何地人|何处人|哪国人|籍贯|\bwhere\b.*\b(?:from|born)\b", re.IGNORECASE)
_ORIGIN_CJK = re.compile(r"([^，。；、,;（(]{2,})人(?=[。，；）)]|$)")  # 湖广公安人。: the place before 人
_ORIGIN = re.compile(rf"{_ORIGIN_CJK.pattern}|\b(?:born\s+in|comes?\s+from|native\s+of)\b", re.IGNORECASE)
# A death or a birth, however it is said: a question about one is answered by a sentence that tells of it.
_LIFE_EVENTS = (
    re.compile(r"卒|逝世|去世|病逝|过世|死|殁|\bdie[ds]?\b|\bdeath\b|\bpass(?:ed|es)?\s+away\b", re.IGNORECASE),
    re.compile(r"出生|生于|诞生|\bborn\b|\bbirth", re.IGNORECASE),
)
_COLOUR = re.compile(
    r"[浅深暗淡亮]?[黑白红黄蓝绿紫灰褐棕橙粉金银青赤橘]+色|\b(?:light|dark|pale|bright)?\s?(?:red|orange|yellow|green|blue|"
    r"purple|violet|pink|brown|black|white|grey|gray|golden|silver)\b",
    re.IGNORECASE,
)
_LOCATED_CJK = r"位于|坐落|地处|座落"
_LOCATED = re.compile(rf"\b(?:located|situated)\b|\blies\s+(?:in|on|at|near)\b|{_LOCATED_CJK}", re.IGNORECASE)
_LOCATED_AT = re.compile(rf"(?:{_LOCATED_CJK})[于在]?([^，。；、,;:：（(）)]{{2,}})")  # the place named after it
_AUXILIARY = r"(?:is|are|was|were|do|does|did|has|have|had|can|could|will|would|should)\b"
# The thing a "what type of" question asks a kind of: its last noun before the verb ("type of food event did": event).
_SORTED = re.compile(
    r"\b(?:types?|kinds?|sorts?)\s+of\s+(?:\w+\s+)?([a-z]+)\b"
    rf"(?=\s+{_AUXILIARY}|\s*[?,]|$)",
    re.IGNORECASE,
)
# A word, the word after it and the one after that, overlapping: the sort, the thing and what follows it.
_SORTING = re.compile(r"\b([a-z][\w'’-]*)(?=\s+([a-z]+)\b(?:\s+([a-z]+))?)", re.IGNORECASE)
# The noun a "what"/"which" question asks about: the last word before its verb or a preposition, past at most two
# words ("What new hobbies does", "What scene from"); none when a verb comes first ("What does Li Hua think").
_ASKED_HEAD = re.compile(
    rf"\b(?:what|which)\s+(?:(?!{_AUXILIARY})[\w'’-]+\s+){{0,2}}?(?!{_AUXILIARY})([a-z]+)"
    rf"(?=\s+(?:{_AUXILIARY}|(?:from|of|in|on|for|that|about)\b))",
    re.IGNORECASE,
)
_COUNTED = re.compile(r"\bhow\s+many\s+([a-z]+)", re.IGNORECASE)  # the noun it counts
_CJK_NUMERALS = "一二两三四五六七八九十百千万亿零〇"
_COUNTED_CJK = re.compile(r"(?:多少|几)([\u4e00-\u9fff])")  # the counter or unit after it
_ASK_PATTERNS = tuple((kind, re.compile(pattern, re.IGNORECASE)) for kind, pattern in _ASKS)
_NAMED_AFTER = re.compile(r"\b(?:named\s+(?:after|for)|in\s+honou?r\s+of)\s+(.*)", re.IGNORECASE)
_LISTING = re.compile(
    r"\b(?:list|name\s+(?:all|the)|what\s+are\s+(?:the|some)|which\s+\w+\s+(?:are|were)|"
    r"what\s+\w+\s+(?:are|were)\s+(?:there|offered|available|sold|grown))\b|哪些|有哪|哪几|列出",
    re.IGNORECASE,
)

_MONTHS = (
    r"January|February|March|April|May|June|July|August|September|October|November|December|"
    r"Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
)
_WEEKDAYS = r"Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday|Mondays|Tuesdays|Wednesdays|Thursdays|Fridays"
# A year: "1921", "the 1950s", or the year of a 20260301 stamp.
_YEAR_FORMS = r"\b(?:1[0-9]\d\d|20\d\d)s?\b|(?<!\d)(?:19|20)\d{6}(?!\d)"
_DATE = re.compile(
    rf"{_YEAR_FORMS}|\b(?:{_MONTHS})\b|\b(?:{_WEEKDAYS}|Saturdays|Sundays)\b|"
    r"(?<!\d)\d{1,2}:\d{2}(?!\d)|\b\d{1,2}\s?(?:am|pm|a\.m\.|p\.m\.)|\b(?:spring|summer|autumn|winter|today|tomorrow|"
    r"yesterday|tonight|noon|midnight|weekend|weekends)\b|\b(?:this|next|last|every)\s+(?:week|month|year|morning|"
    r"evening|night)\b|\bcentury\b|\b\d+\s+(?:days?|weeks?|months?|years?)\s+(?:ago|later|after|before)\b|"
    r"\d+\s*(?:年|月|日|号)|[一二三四五六七八九十〇零]+(?:年|月|日)|世纪|年代|朝|时期|年间|星期|周[一二三四五六日末]|"
    r"公元|春季|夏季|秋季|冬季",
    re.IGNORECASE,
)
# A time of day, for a question that asks "what time": "3 PM", "18:30", "around 7ish", noon.
_CLOCK = re.compile(
    r"(?<!\d)\d{1,2}:\d{2}(?!\d)|\b\d{1,2}(?::\d{2})?\s?(?:am|pm|a\.m\.|p\.m\.)|\b(?:noon|midnight)\b|"
    r"\b(?:at|around|about|by)\s+\d{1,2}(?:ish|\s*o['’]clock)?(?=\s*(?:[?!.,;)]|$))",
    re.IGNORECASE,
)
# The dates a question's answer is among, by what it asks: a time of day, a year, or any date.
_ASKED_DATES = (
    (re.compile(r"\bwhat\s+time\b", re.IGNORECASE), _CLOCK),
    (re.compile(r"\b(?:what|which)\s+year\b", re.IGNORECASE), re.compile(_YEAR_FORMS)),
)
# A date on the calendar (a year, a month, a day of a month), not one relative to when it was said ("tomorrow").
_CALENDAR_DATE = re.compile(
    rf"{_YEAR_FORMS}|\b(?:{_MONTHS})\b|\d+\s*(?:年|月|日|号)|"
    r"[一二三四五六七八九十〇零]+(?:年|月|日)|世纪|年代|公元",
    re.IGNORECASE,
)
_YEAR = re.compile(r"(?:1[0-9]|20)\d\ds?")
_NUMBER = re.compile(
    r"\d|[£$€¥%％]|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|"
    r"fifty|sixty|seventy|eighty|ninety|hundred|thousand|million|billion|dozen|half|several|once|twice)\b|"
    r"[一二两三四五六七八九十百千万亿]+\s*[个位名种件条次年岁米元块座所本部集只头张台辆份倍层届场项家人]",
    re.IGNORECASE,
)
_PLACE_AFTER = re.compile(r"\b(?:in|at|from|near|to|into|on|behind|beside|outside|inside)\s+(?:the\s+)?([A-Z][\w'’-]+)")
_PLACE_WORDS = re.compile(
    r"\b(?:street|road|lane|avenue|square|city|town|village|county|country|province|state|river|valley|lake|"
    r"mountain|island|farm|park|hall|centre|center|café|cafe|shop|station|airport|school|university|hospital|"
    r"church|office|room|house|building|cellar|barn|field|garden|restaurant|hotel|library|museum|stadium|gym|"
    r"studio|home|apartment|basement|kitchen|beach|harbour|harbor|port|bay|north|south|east|west)s?\b",
    re.IGNORECASE,
)
_NAME = re.compile(
    r"(?<![A-Za-z])[A-Z][a-z'’]+(?:[A-Z][a-z]+)+(?![a-z])|(?<![A-Za-z])[A-Z][A-Za-z0-9'’.-]*(?:\s+[A-Z][A-Za-z0-9'’.-]*)+"
    r"|(?<![A-Za-z])[A-Z][A-Za-z0-9'’-]+"
)
_PRONOUN_I = re.compile(r"I(?:['’](?:m|d|ll|ve))?")
_POSSESSIVE = re.compile(r"['’]s?$")
_CAMEL = re.compile(r"[a-z][A-Z]")  # a name written as one word ("LiHua", "JakeWatson")
_QUESTION_WORDS = frozenset(
    [
        "who",
        "whom",
        "whose",
        "what",
        "when",
        "where",
        "which",
        "why",
        "how",
        "is",
        "are",
        "was",
        "were",
        "do",
        "does",
        "did",
        "can",
        "could",
        "will",
        "would",
        "the",
        "a",
        "an",
    ]
)
_CALENDAR = re.compile(rf"^(?:{_MONTHS}|{_WEEKDAYS}|Saturdays|Sundays)$")
# "How strong": the answer names the strength. English measure adjectives and the nouns of their measures.
_MEASURES = {
    "strong": "strength",
    "long": "length",
    "high": "height",
    "tall": "height",
    "wide": "width",
    "deep": "depth",
    "heavy": "weight",
    "old": "age",
    "far": "distance",
    "big": "size",
    "large": "size",
    "fast": "speed",
    "hot": "temperature",
    "cold": "temperature",
    "often": "frequency",
}
_HOW_ADJECTIVE = re.compile(r"\bhow\s+(" + "|".join(_MEASURES) + r")\b", re.IGNORECASE)
# "When was it founded, and by whom?": a second question joined by "and" (or a comma) and a question word.
_SECOND_QUESTION = re.compile(
    r",?\s+and\s+(?=(?:who|whom|what|when|where|which|how|why|since|by\s+whom|in\s+what|from\s+what)\b)|"
    r",\s+(?=(?:who|what|when|where|which|how)\b)",
    re.IGNORECASE,
)
_TITLE = re.compile(r"《([^》]+)》|“([^”]+)”|\"([^\"]+)\"")
# The person whose words a question asks for: "according to Lachlan", "in Orion's opinion", "What does Jake
# recommend", "Jake mentions": a capitalised name (not a question word) before or after a verb of saying or thinking.
_PERSON = r"(?!(?:Who|What|Which|How)\b)([A-Z][\w-]*(?:\s+[A-Z][\w-]*)*)"
_SAYING = r"(?:think|say|mention|suggest|recommend|believe|prefer|praise|consider|find|feel|propose|remind|describe)"
_SPEAKER = re.compile(
    rf"\b(?i:according\s+to)\s+{_PERSON}|\b(?i:in)\s+{_PERSON}['’]s\s+(?i:opinion|view)\b"
    rf"|\b(?i:does|did|do)\s+{_PERSON}\s+{_SAYING}\b|\b{_PERSON}\s+{_SAYING}(?:s|d|ed)\b"
)
_stemmer = snowballstemmer.stemmer("english")


@dataclass(frozen=True, slots=True)
class Asked:
    """What a question asks for: its kinds of answer, whether it wants a list, and its terms by stem."""

    text: str
    kinds: tuple[AnswerKind, ...]
    listing: bool
    terms: tuple[str, ...]
    words: frozenset[str]  # the question's words as written, lower-cased (a sentence's answer must be new)
    focus: tuple[str, ...]  # the names and titles the question is about, lower-cased ("blossom sunday", "战国无双3")
    parts: tuple[str, ...] = ()  # the questions of a compound question ("When was it founded", "by whom"), or ()
    unit: str = ""  # what a "how many" question counts in, by stem ("litr" of "how many litres", 人 of 多少人), or ""
    origin: bool = False  # it asks where someone is from ("where was she born", 哪里人, 籍贯)
    event: re.Pattern[str] | None = None  # the birth or death it asks the date or place of (`_LIFE_EVENTS`)
    namesake: frozenset[str] = frozenset()  # the words of the name something is named after, lower-cased
    head: str = ""  # the noun a "what"/"which" question asks about, by stem, when it is one of its terms ("scene")
    sort_of: str = ""  # the noun a "what type of" question asks a kind of, by stem ("press"), or ""
    dates: re.Pattern[str] = _DATE  # an answer of the DATE kind: a time of day for "what time", a year for "what year"
    speaker: str = ""  # the person whose words it asks for, lower-cased without spaces ("according to Lachlan")


def asked(question: str) -> Asked:
    kinds = tuple(kind for kind, pattern in _ASK_PATTERNS if pattern.search(question))
    if AnswerKind.NAME in kinds and len(kinds) > 1:  # "the name of the person" asks for a person
        kinds = tuple(kind for kind in kinds if kind is not AnswerKind.NAME)
    if AnswerKind.DATE in kinds and AnswerKind.NUMBER in kinds and re.search(r"how\s+long\s+ago", question, re.I):
        kinds = tuple(kind for kind in kinds if kind is not AnswerKind.NUMBER)
    measures = [_MEASURES[adjective.lower()] for adjective in _HOW_ADJECTIVE.findall(question)]
    found = [stem(term) for term in [*fulltext_query_terms(question), *measures]]
    terms = tuple(dict.fromkeys(found))
    words = frozenset(index_terms(question))
    parts = tuple(part.strip() for part in _SECOND_QUESTION.split(question) if part.strip())
    listing = bool(_LISTING.search(question))
    unit = _unit(question)
    compound = parts if len(parts) > 1 else ()
    origin = bool(_ASKS_ORIGIN.search(question))
    event = next((e for e in _LIFE_EVENTS if e.search(question)), None)
    dates = next((found for asks, found in _ASKED_DATES if asks.search(question)), _DATE)
    focus = _focus(question)
    head = _ASKED_HEAD.search(question)
    head_term = stem(head.group(1).lower()) if head else ""
    namesake, sort_of = _namesake(question), _sort_of(question)
    return Asked(
        question,
        kinds,
        listing,
        terms,
        words,
        focus,
        compound,
        unit,
        origin,
        event,
        namesake,
        head_term if head_term in terms else "",
        sort_of,
        dates,
        _speaker(question),
    )


def _speaker(question: str) -> str:
    found = _SPEAKER.search(question)
    name = next((group for group in found.groups() if group), "") if found else ""
    return name.replace(" ", "").lower()


def _sort_of(question: str) -> str:
    found = _SORTED.search(question)
    return stem(found.group(1).lower()) if found else ""


def _namesake(question: str) -> frozenset[str]:
    """The words of the name after "named after" ("Which cider is named after Margit Solberg?": margit, solberg)."""
    after = _NAMED_AFTER.search(question)
    named = names(after.group(1), frozenset()) if after else []
    return _name_words(named[0]) if named else frozenset()


def _unit(question: str) -> str:
    """The noun a "how many" question counts ("how many litres": "litr"), or the first character of the unit a
    Chinese one counts in (多少人: 人, 几辑: 辑, 多少公里: 公)."""
    english = _COUNTED.search(question)
    if english:
        return stem(english.group(1).lower())
    chinese = _COUNTED_CJK.search(question)
    return chinese.group(1) if chinese else ""


def _titles(text: str) -> list[str]:
    """The quoted titles of a text: 《战国无双3》, "Black Myth: Wukong"."""
    return ["".join(groups).strip() for groups in _TITLE.findall(text)]


def _focus(question: str) -> tuple[str, ...]:
    """Quoted titles and runs of capitalised words (two or more, or one past the first word) of the question; in
    a Chinese question its first noun (the subject: "张世昌的职业是什么" is about 张世昌)."""
    titles = _titles(question)
    named = [n for n in names(question, frozenset()) if len(n) > 2]
    if not titles and any(is_cjk(char) for char in question):
        nouns = [w for w, flag in _tagged(question) if flag.startswith(("n", "eng")) and len(w) > 1 and is_cjk(w[0])]
        named = [*nouns[:1], *named]
    return tuple(dict.fromkeys(f.lower() for f in [*titles, *named] if f))


@lru_cache(maxsize=16384)
def stem(term: str) -> str:
    """An English word's stem; CJK terms and numbers as they are."""
    if is_cjk(term) or not term.isalpha():
        return term
    return str(_stemmer.stemWord(term))


def stems(text: str) -> frozenset[str]:
    return frozenset(stem(term) for term in index_terms(text) if term not in STOPWORDS)


def answers(sentence: str, kind: AnswerKind, question: Asked, lower_words: frozenset[str] = frozenset()) -> list[str]:
    """The answers of `kind` that `sentence` holds and the question does not already state (empty: it holds none).

    An alias is held where the sentence introduces one ("also known as", 又名): the answer is that phrase.

    `lower_words`: the words the evidence writes in lower case somewhere; a sentence's capitalised first word
    that is not among them is taken for a name ("Sam leads the tours"; not "Tickets cost £8")."""
    if kind is AnswerKind.ALIAS:
        return _ALIAS.findall(sentence)
    if kind is AnswerKind.REASON:
        return _REASON.findall(sentence)
    if kind is AnswerKind.NAMESAKE:  # a name that takes a word of the one asked about and adds its own
        found = [name for name in names(sentence, lower_words) if _name_words(name) & question.namesake]
        return _new(found, question)
    if kind is AnswerKind.COLOUR:  # not a colour the question names ("Kingston Black")
        return _new_in(sentence, [found.strip() for found in _COLOUR.findall(sentence)], question)
    if any(is_cjk(char) for char in sentence):
        return _answers_chinese(sentence, kind, question)
    if kind is AnswerKind.DATE:
        return _new(question.dates.findall(sentence), question)
    if kind is AnswerKind.NUMBER:  # a year is a date, not a quantity
        found = re.findall(r"[\w.,£$€¥%]*\d[\w.,%]*|" + _NUMBER.pattern, sentence, re.I)
        return _new([f for f in found if not _YEAR.fullmatch(f.strip(".,"))], question)
    if kind is AnswerKind.PLACE:
        places = _PLACE_AFTER.findall(sentence) + _PLACE_WORDS.findall(sentence)
        return _new(places, question)
    if kind is AnswerKind.SORT:
        return _sorts(sentence, question)
    if kind is AnswerKind.NAME:
        return _new([*names(sentence, lower_words), *_titles(sentence)], question)
    people = [name for name in names(sentence, lower_words) if not _PLACE_WORDS.search(name.split()[-1])]
    return _new(people, question)


def states(sentence: str, kind: AnswerKind, question: Asked) -> bool:
    """Does `sentence` state an answer of `kind` as the question asks it, rather than only hold one: for a place,
    says where something is ("lies in", 位于) or, asked where someone is from, where ("born in", 湖广公安人); for a
    place or date of a birth or death, tells of it (卒 asked, 病逝 told); for a number, counts in the question's
    unit ("650 litres" for "how many litres", 25人 for 多少人)?"""
    if kind is AnswerKind.PLACE:
        located = _LOCATED.search(sentence) or (question.origin and _ORIGIN.search(sentence))
        if located:
            return True
    if kind in (AnswerKind.PLACE, AnswerKind.DATE) and question.event is not None:
        return bool(question.event.search(sentence))  # "卒于哪一年": 1994年病逝于美国
    if kind is AnswerKind.NUMBER and question.unit:
        if is_cjk(question.unit):
            return bool(_counted_cjk(sentence, question))
        counted = re.finditer(r"\d[\d,.]*\s+([A-Za-z-]+)(?:\s+([A-Za-z]+))?", sentence)  # "400 young trees"
        return any(stem(word.lower()) == question.unit for match in counted for word in match.groups() if word)
    return False


def holds_calendar_date(sentence: str, question: Asked) -> bool:
    """Does `sentence` hold a date on the calendar that the question does not state ("Time: 20260131_14:00",
    "in May 2019", 1994年), rather than only one relative to when it was said ("tomorrow", "last week")?"""
    return bool(_new_in(sentence, _CALENDAR_DATE.findall(sentence), question))


def calendar_dates(text: str) -> list[str]:
    """The dates on the calendar `text` states (years, months, days of a month: `holds_calendar_date`)."""
    return [found for found in _CALENDAR_DATE.findall(text) if found.strip()]


def names(sentence: str, lower_words: frozenset[str]) -> list[str]:
    """Capitalised words and runs of them (not months or weekdays), without a possessive ending ("Orion's":
    Orion) and without "I" in any form ("I'll"); at the sentence's start, without the words the evidence also
    writes in lower case ("But Ramsay" is Ramsay; "Tickets" alone is no name)."""
    found = []
    for match in _NAME.finditer(sentence):
        words = [w for w in match.group(0).split() if not _PRONOUN_I.fullmatch(w)]
        while match.start() == 0 and words and _common(words[0], lower_words) and not _CAMEL.search(words[0]):
            words.pop(0)  # a sentence's first word is capitalised anyway
        if not words or all(_CALENDAR.match(w) for w in words) or words[0].lower() in _QUESTION_WORDS:
            continue
        if len(words) == 1 and _NUMBER.fullmatch(words[0]):
            continue
        found.append(_POSSESSIVE.sub("", " ".join(words)))
    return found


def _sorts(sentence: str, question: Asked) -> list[str]:
    """The thing a "what type of" question asks about after a word that sorts it and the question lacks, and not
    before a word that it sorts in turn ("a rack-and-cloth press", "turn-based combat"; not "the press", not
    "the new pizza place")."""
    found = [
        (word, noun)
        for word, noun, after in _SORTING.findall(sentence)
        if stem(noun.lower()) == question.sort_of and (not after or after.lower() in STOPWORDS)
    ]
    return [f"{word} {noun}" for word, noun in found if word.lower() not in STOPWORDS | question.words]


def _name_words(name: str) -> frozenset[str]:
    """A name's words, lower-cased, without possessive endings ("Margit's Keeved": margit, keeved)."""
    return frozenset(_POSSESSIVE.sub("", word).lower() for word in name.split())


def _common(word: str, lower_words: frozenset[str]) -> bool:
    """Is the word one the evidence writes in lower case, a stopword (with its contraction: "Don't") or "Let's"?"""
    lower = word.lower().replace("’", "'")
    if {lower, lower.replace("'", "’")} & lower_words:
        return True
    return lower in STOPWORDS or lower.split("'")[0] in STOPWORDS or lower == "let's"


def _new(found: list[str], question: Asked) -> list[str]:
    """The found expressions that are not simply words of the question."""
    new = []
    for expression in found:
        words = [w for w in index_terms(expression) if w not in STOPWORDS]
        if words and not all(w in question.words for w in words):
            new.append(expression)
    return new


_CJK_TAGS = {AnswerKind.PERSON: ("nr",), AnswerKind.PLACE: ("ns",), AnswerKind.DATE: ("t",), AnswerKind.NUMBER: ("m",)}


def _answers_chinese(sentence: str, kind: AnswerKind, question: Asked) -> list[str]:
    found = []
    if kind is AnswerKind.DATE:
        found = _new_cjk(_DATE.findall(sentence), question)
    elif kind is AnswerKind.NUMBER:
        found = _new_cjk([*_NUMBER.findall(sentence), *_counted_cjk(sentence, question)], question)
    elif kind is AnswerKind.PLACE:
        origins = _ORIGIN_CJK.findall(sentence) if question.origin else []
        found = _new_cjk([*_LOCATED_AT.findall(sentence), *origins], question)
    elif kind is AnswerKind.PERSON:
        found = _new(names(sentence, frozenset()), question)  # a Latin name in Chinese text ("建筑师Henry A. Walsh")
    tags = _CJK_TAGS[kind]
    return [*found, *(word for word, flag in _tagged(sentence) if flag.startswith(tags) and word not in question.text)]


def _counted_cjk(sentence: str, question: Asked) -> list[str]:
    """The counts in the Chinese unit the question asks for (三辑 for 几辑), which the tagger may not know."""
    if not question.unit or not is_cjk(question.unit):
        return []
    return re.findall(rf"(?:\d[\d,.]*|[{_CJK_NUMERALS}]+)\s*{re.escape(question.unit)}", sentence)


def _new_in(sentence: str, found: list[str], question: Asked) -> list[str]:
    """`_new_cjk` for expressions found in a Chinese sentence, else `_new`."""
    return _new_cjk(found, question) if any(is_cjk(char) for char in sentence) else _new(found, question)


def _new_cjk(found: list[str], question: Asked) -> list[str]:
    return [expression for expression in found if expression.strip() and expression.strip() not in question.text]


@lru_cache(maxsize=4096)
def _tagged(sentence: str) -> tuple[tuple[str, str], ...]:
    return tuple((str(pair.word), str(pair.flag)) for pair in jieba_module().posseg.dt.cut(sentence))
