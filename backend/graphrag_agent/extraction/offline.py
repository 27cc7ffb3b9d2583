"""Entity and relation extraction without a model: deterministic, cheap, English and Chinese.

Entities of a chunk:

- the document title (disambiguator such as "(film)" removed): every chunk mentions it, so a passage is
  linked to every other passage that names its title ("title linking");
- English: proper-noun phrases (runs of capitalised words with short connectors: "Boso the Elder",
  "Adalbert II of Tuscany", which also yields "Adalbert II" and "Tuscany"), dates and years, quoted titles,
  chat speakers, and lower-case noun phrases that recur in the document (keyphrases such as "cider mill");
- Chinese: jieba part-of-speech tags (nr person, ns place, nt organisation, nz other; plain nouns only when
  they recur in the document), 《book titles》 and dates.

Relations: entities in the same sentence (weight 1 per sentence, summed; the sentence is the description),
and the title entity with every entity of its chunks (weight 0.5).

Types are guessed from cheap cues ("born in X" → location, "X( died 875)" → person, head words such as
"River" or "University"), otherwise "other". CPU work runs in a worker thread; jieba's dictionary is loaded
once, lazily, and only when Chinese text appears.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from backend.domain import ids
from backend.domain.graph import ChunkRecord, DocumentRecord, Extraction
from backend.graphrag_agent.chinese import jieba_module
from backend.graphrag_agent.extraction.base import OTHER, ExtractionBuilder, trim
from backend.graphrag_agent.text import is_chat, rejoin_after, split_sentences

DESCRIPTION_CHARS = 240
SENTENCE_WEIGHT = 1.0
TITLE_WEIGHT = 0.5
MAX_ENTITIES_PER_SENTENCE = 12  # bounds the pairs of a run-on sentence (12 → 66 pairs)
MAX_RUN_WORDS = 8

# -- word lists (lower-case) -------------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    return text.split()


_FUNCTION_WORDS = frozenset(
    _words(
        """a an the this that these those there here it its he she his her him hers they them their theirs we us
        our ours you your yours i me my mine who whom whose which what where when why how whoever whatever and
        or but nor so yet for of in on at by to from with without within into onto upon over under above below
        about after before during since until till while as than though although because if unless whether
        between among through throughout across along around against toward towards beyond despite near off out
        up down also then thus hence however moreover furthermore meanwhile therefore otherwise instead indeed
        still not no yes all any both each every either neither few many much more most several some such other
        another one two three four five six seven eight nine ten own same is are was were be been being am has
        have had do does did will would shall should can could may might must i'm i've i'll i'd it's he's she's
        that's there's let's don't didn't can't won't isn't wasn't hi hello hey thanks thank ok okay oh wow sure
        great yeah dear please sorry well just really very too only etc vs per via pm let"""
    )
)
_MONTHS = _words("january february march april may june july august september october november december")
_CALENDAR_WORDS = frozenset(
    _MONTHS
    + _words("monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday")
    + _words("mondays tuesdays wednesdays thursdays fridays saturdays sundays weekend weekends")
)
_DEMONYMS = frozenset(
    _words(
        """american british english french german italian spanish portuguese dutch russian chinese japanese korean
        indian irish scottish welsh canadian australian mexican brazilian argentine argentinian chilean peruvian
        swedish norwegian danish finnish icelandic polish czech slovak hungarian austrian swiss belgian greek
        turkish egyptian persian iranian iraqi israeli jewish arab arabic roman byzantine ottoman frankish
        norman saxon latin catholic protestant christian muslim islamic buddhist hindu european african asian
        soviet filipino indonesian thai vietnamese pakistani nigerian ukrainian romanian bulgarian serbian
        croatian yugoslav bolivian colombian venezuelan cuban"""
    )
)
_HONORIFICS = frozenset(
    _words(
        """mr mrs ms miss dr sir dame lord lady king queen prince princess duke duchess earl count countess baron
        baroness emperor empress pope bishop archbishop cardinal president general captain colonel professor
        prof father brother sister margrave marquis marquess viscount tsar czar sultan caliph shah pharaoh
        senator governor mayor judge reverend rev abbot abbess prime minister chancellor secretary chief vice
        deputy crown grand master elder younger baronet knight director member lieutenant major"""
    )
)
_ORG_WORDS = frozenset(
    _words(
        """university college company corporation inc ltd llc records party club fc institute foundation society
        association council bank school academy museum band orchestra group agency ministry department army navy
        church league union committee commission federation airlines studios press publishers newspaper railway
        railways parliament senate court"""
    )
)
_PLACE_WORDS = frozenset(
    _words(
        """river lake valley mountain mountains mount island islands isle county city province state district
        region street road avenue square bay sea ocean abbey castle cathedral palace bridge park forest hill
        hills field coast peninsula kingdom empire republic duchy principality village town parish canton
        prefecture airport station harbour harbor desert gulf cape fort port archipelago strait falls"""
    )
)
_EVENT_WORDS = frozenset(
    _words(
        """war battle siege revolution festival games olympics championship championships cup tournament election
        treaty massacre rebellion uprising crusade conference expedition awards award"""
    )
)
# Capitalised words that name nothing by themselves (headings, generic heads, compass points).
_GENERIC_WORDS = (
    _HONORIFICS
    | _ORG_WORDS
    | _PLACE_WORDS
    | _EVENT_WORDS
    | frozenset(
        _words(
            """north south east west northern southern eastern western central upper lower saint chapter part
            section volume act book page figure table episode series album film song note time date subject see
            introduction summary contents references center centre line route unit house hall new old first
            second third last next great little"""
        )
    )
)
# Frequent non-nouns that can look like concept words in lower-case phrases.
_COMMON_WORDS = frozenset(
    _words(
        """said says made make makes making took take takes taken came come comes went go goes gone got get gets
        gave give gives given used use uses using became become becomes known called named began begin begun
        found find held hold left leave led lead run ran put set saw see seen told tell asked ask turned turn
        began started start started worked work works lived live lives died born moved returned released played
        plays playing won lost including include includes included based located following followed whose later
        early earlier late often usually always never sometimes again once twice already almost even ever much
        little less least good better best bad worse worst big small large long short high low full whole main
        major minor certain various different similar important possible able likely available present former
        current previous final total single real true false free open close near far right wrong way ways thing
        things something anything nothing everything someone anyone everyone people year years day days time
        times part parts number lot lots kind sort type side end place places point around each ago yet back
        away home"""
    )
)
_NOT_CONTENT_WORDS = _FUNCTION_WORDS | _COMMON_WORDS | _CALENDAR_WORDS
_NOT_NAME_WORDS = _GENERIC_WORDS | _FUNCTION_WORDS
_CONNECTORS = frozenset(
    _words("of the de da di del della degli des du van von der den ter la le y bin ibn al el zu upon am")
)
_SPLIT_CONNECTOR = "of"
_ABBREVIATIONS = frozenset(_words("mr mrs ms dr st jr sr prof rev gen col lt capt sgt mt ft no vol"))
_ROMAN = re.compile(r"^(?=[MDCLXVI])M{0,3}(?:C[MD]|D?C{0,3})(?:X[CL]|L?X{0,3})(?:I[XV]|V?I{0,3})$")

# Role words after "X is/was a ..." (and in title disambiguators such as "(film)") → the type of X.
_ROLE_TYPES: dict[str, str] = {
    **dict.fromkeys(
        _words(
            """actor actress singer songwriter musician composer writer author poet novelist journalist politician
            footballer player cricketer athlete coach director producer screenwriter filmmaker cinematographer
            painter artist sculptor architect engineer scientist physicist chemist mathematician philosopher
            historian economist lawyer judge bishop priest king queen prince princess duke duchess count
            countess emperor empress nobleman noblewoman officer general admiral soldier businessman
            businesswoman entrepreneur model dancer comedian presenter rapper diplomat monk nun saint explorer
            inventor physician surgeon teacher professor lord lady margrave consort ruler pharaoh sultan khan
            guitarist drummer photographer rower boxer wrestler swimmer cyclist driver jockey manager activist
            missionary archbishop abbot cardinal pope daughter son wife husband peer owner founder manager maker
            chef farmer beekeeper gardener volunteer"""
        ),
        "person",
    ),
    **dict.fromkeys(
        _words(
            """film movie album song single novel book play opera series sitcom documentary musical poem painting
            game soundtrack anime manga comic miniseries ep"""
        ),
        "work",
    ),
    **dict.fromkeys(
        _words(
            """village town city river lake mountain island county municipality region province district commune
            suburb country state neighbourhood neighborhood parish valley castle mountain peak archipelago"""
        ),
        "location",
    ),
    **dict.fromkeys(
        _words(
            """company band club university college school party organization organisation corporation team brand
            label newspaper publisher agency magazine"""
        ),
        "organization",
    ),
    **dict.fromkeys(_words("battle war festival election tournament championship competition ceremony"), "event"),
}

# -- patterns ------------------------------------------------------------------------------------------------

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_HAS_CJK = re.compile(rf"[{_CJK}]")
_WORD = re.compile(r"[^\W\d_][\w]*(?:['’-][\w]+)*")
_MONTH = "|".join(month.capitalize() for month in _MONTHS)
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})\s+({_MONTH})\s*,?\s+(\d{{3,4}})\b")
_MONTH_DAY_YEAR = re.compile(rf"\b({_MONTH})\s+(\d{{1,2}})\s*,\s*(\d{{3,4}})\b")
_MONTH_YEAR = re.compile(rf"\b({_MONTH})\s+(\d{{4}})\b")
_YEAR = re.compile(r"(?<![\d,.$£€#/:-])\b(1[0-9]{3}|20[0-9]{2})\b(?![\d%]|[.,]\d|\s*(?:%|per cent|percent))")
_CUED_SHORT_YEAR = re.compile(
    r"\b(?:in|since|until|between|died|born|c\.|circa|ca\.)\s+(\d{3})(?:\s*(?:and|or|to|–|-)\s*(\d{3}))?"
    # Not followed by a noun ("in 400 trees"): punctuation, the end, or a function word.
    r"(?=\s*(?:[,.;:)–-]|$|(?:and|or|to|without|with|when|after|before|until|at|in|on|by|as|he|she|it|they)\b))"
)
_QUOTED = re.compile(r"[\"“] ?([A-Z0-9][^\"“”]{1,60}?)[\"”]")
_CJK_DATE = re.compile(r"\d{3,4}年(?:\d{1,2}月(?:\d{1,2}日)?)?")
_BOOK_TITLE = re.compile(r"《([^《》]{1,40})》")
_MARKDOWN_LEAD = re.compile(r"^\s*(?:#{1,6}\s+|[-*+>]\s+|\d{1,3}[.)]\s+)*")
_EMPHASIS = re.compile(r"\*\*|__|`")
_SPEAKER = re.compile(r"^\s*([A-Z][a-z]+(?:[A-Z][a-z]+){0,3}|[A-Z][a-z]+(?: [A-Z][a-z]+){1,3})\s*[:：]\s+(\S.*)$")
_ENDS_WITH_ABBREVIATION = re.compile(
    rf"(?:^|[\s(])(?:[A-Z]|{'|'.join(word.capitalize() for word in sorted(_ABBREVIATIONS))})\.$"
)
# A markdown table row: made a paragraph of its own, so rows are separate sentences.
_TABLE_ROW = re.compile(r"^([ \t]*\|.*)$", re.MULTILINE)
# Where a sentence's first word can start: its beginning, a table cell's, or after a sentence end inside a
# unit (a chat message holds several sentences).
_OPENING = re.compile(r"(?:^|\||[.!?…]\s)[^\w|]*(?=[^\W\d_])")
_CAMEL_HUMP = re.compile(r"[A-Z][a-z]+")
_DISAMBIGUATOR = re.compile(r"\s*\(([^()]*)\)\s*$")
_LEADING_ARTICLE = re.compile(r"^(?:the|a|an)\s+(?=\S)", re.IGNORECASE)
_COPULA = re.compile(r"^[^.;]{0,80}?\b(?:is|was|are|were)\s+(?:an?|the|one of the)\s+((?:[\w'’-]+\s+){0,6}[\w'’-]+)")
# The phrase after "is a" ends at its head noun: "film director and writer" → "film director".
_PHRASE_END = re.compile(r"\b(?:of|who|which|that|in|by|from|and|with|for|at|on|to|born|based|located)\b")
# "X( born ...", "X (died ...)", "X (1204 – 12 April 1237)": a life span follows a person's name.
_PERSON_AFTER = re.compile(
    r"^\s*\(\s*(?:born|died|b\.|d\.|c\.|fl\.|[^()]{0,30}\d{3,4}\s*\)?\s*[-–]\s*[^()]{0,30}\d{3,4}\s*\))"
    r"|^\s+(?:was born|died)\b"
)
# "Dmitri Halloran, head cider maker": a role after the comma.
_APPOSITIVE = re.compile(r"^\s*,\s+(?:an?\s+|the\s+)?((?:[\w'’-]+\s+){0,3}[\w'’-]+)")
# Names listed together ("starring A, B and C") are usually of one kind.
_LIST_GAP = re.compile(r"^\s*(?:,|,?\s+and|,?\s+or|&)\s*$")
_LIST_TYPES = frozenset({"person", "location"})
_PERSON_BEFORE = re.compile(
    r"\b(?:married|marry|son of|daughter of|wife of|husband of|brother of|sister of|father of|mother of|"
    r"widow of|child of|directed by|written by|composed by|produced by|founded by|starring|succeeded|"
    r"married to|marriage to)\s+$"
)
_PLACE_BEFORE = re.compile(
    r"\b(?:born in|died in|located in|based in|situated in|lives in|lived in|moved to|capital of|near|"
    r"village of|town of|city of|raised in|grew up in|headquartered in|province of|"
    rf"(?:{'|'.join(sorted(_HONORIFICS))}|[ivx]+) of)\s+(?:the\s+)?$"
)
# Weaker: a name right after "in", "at" or "near" is most often a place.
_IN_BEFORE = re.compile(r"\b(?:in|at|near)\s+(?:the\s+)?$")
# Capitalised only inside names ("Hall of Fame", "Isle of Man"): no name of their own after an " of " split.
_NAME_PART_NOUNS = frozenset(
    _words(
        """fame life love man men arts science sciences music technology education health defence defense justice
        agriculture commerce interior finance honour honor representatives commons lords peace freedom history
        art literature medicine law letters philosophy hours days years"""
    )
)
# Suffixes of common nouns: "Printing" in "London College of Printing" is no name of its own.
_COMMON_NOUN_SUFFIX = re.compile(r"(?:tion|sion|ment|ness|ity|ance|ence|ous|ive|ism|ics|ology|ing)$")
_CJK_TAG_TYPES = {"nr": "person", "nrfg": "person", "nrt": "person", "ns": "location", "nt": "organization"}
_CJK_WEAK_TAGS = frozenset({"n", "nw"})  # kept only when they recur in the document
_CJK_FUNCTION_CHARS = frozenset("的了与和由在是为及或于将被把原等从向至之其而也都就并又对以")
_CJK_LEADING_PARTICLES = frozenset("的了与和由在是及或被把从至对以而也都就并又")  # never a surname
_NAME_DOTS = frozenset("·・•")


@dataclass(frozen=True, slots=True)
class _Found:
    name: str
    type: str
    weak: bool = False  # a keyphrase: kept only when it recurs in the document


# -- the extractor -------------------------------------------------------------------------------------------


class OfflineExtractor:
    """`Extractor` without a model. Deterministic: the same document always yields the same extraction."""

    def __init__(self, description_chars: int = DESCRIPTION_CHARS) -> None:
        self._description_chars = description_chars

    async def extract(self, kb: str, document: DocumentRecord, chunks: Sequence[ChunkRecord]) -> Extraction:
        # Pure CPU work (and jieba's one-off dictionary load): keep it off the event loop.
        return await asyncio.to_thread(self.extract_sync, kb, document, chunks)

    def extract_sync(self, kb: str, document: DocumentRecord, chunks: Sequence[ChunkRecord]) -> Extraction:
        title = title_entity_name(document.title)
        contexts = {chunk.chunk_id: _ChunkContext.of(chunk.text, title) for chunk in chunks}
        sentences = {chunk_id: context.sentences for chunk_id, context in contexts.items()}
        found = {
            chunk_id: [_sentence_entities(sentence, context) for sentence in context.sentences]
            for chunk_id, context in contexts.items()
        }
        recurring = _recurring_weak_names(found.values())
        builder = ExtractionBuilder(kb)
        for chunk in chunks:
            per_sentence = [[f for f in fs if not f.weak or f.name in recurring] for fs in found[chunk.chunk_id]]
            self._add_chunk(builder, chunk, document.title, title, sentences[chunk.chunk_id], per_sentence)
        return builder.build()

    def _add_chunk(
        self,
        builder: ExtractionBuilder,
        chunk: ChunkRecord,
        full_title: str,
        title: str,
        sentences: list[str],
        found: list[list[_Found]],
    ) -> None:
        chunk_id = chunk.chunk_id
        title_id = None
        if title:
            lead = _first_containing(sentences, title) or (sentences[0] if sentences else "")
            title_type = _title_type(full_title, title, lead)
            title_id = builder.add_entity(chunk_id, title, title_type, trim(lead, self._description_chars))
        first_sentence: dict[str, str] = {}
        for sentence, entities in zip(sentences, found, strict=True):
            description = trim(sentence, self._description_chars)
            sentence_ids: list[str] = []
            for entity in entities:
                entity_id = builder.add_entity(chunk_id, entity.name, entity.type, description)
                if entity_id is not None and entity_id not in sentence_ids:
                    sentence_ids.append(entity_id)
                    first_sentence.setdefault(entity_id, description)
            _relate_all(builder, chunk_id, sentence_ids[:MAX_ENTITIES_PER_SENTENCE], description)
        if title_id is not None:
            for entity_id, description in first_sentence.items():
                builder.add_relation(chunk_id, title_id, entity_id, description, TITLE_WEIGHT)


def _relate_all(builder: ExtractionBuilder, chunk_id: str, entity_ids: list[str], description: str) -> None:
    for i, source in enumerate(entity_ids):
        for target in entity_ids[i + 1 :]:
            builder.add_relation(chunk_id, source, target, description, SENTENCE_WEIGHT)


def _recurring_weak_names(found: Iterable[list[list[_Found]]]) -> frozenset[str]:
    """Weak names (keyphrases) seen in at least two sentences of the document."""
    counts: Counter[str] = Counter()
    for per_sentence in found:
        for entities in per_sentence:
            counts.update({entity.name for entity in entities if entity.weak})
    kept = {name: count for name, count in counts.items() if count >= 2}
    # "head cider" is no phrase of its own when it only ever occurs inside "head cider maker".
    shadowed = {
        part
        for name, count in kept.items()
        if name.count(" ") == 2
        for part in (name.rsplit(" ", 1)[0], name.split(" ", 1)[1])
        if kept.get(part) == count
    }
    return frozenset(kept.keys() - shadowed)


def _first_containing(sentences: list[str], name: str) -> str | None:
    folded = name.casefold()
    return next((s for s in sentences if folded in s.casefold()), None)


# -- titles --------------------------------------------------------------------------------------------------


def title_entity_name(title: str) -> str:
    """The entity a document title stands for: "Theodred II (Bishop of Elmham)" → "Theodred II"."""
    name = " ".join(title.split())
    base = _DISAMBIGUATOR.sub("", name).strip()
    if base and not _HAS_CJK.search(base):
        base = _LEADING_ARTICLE.sub("", base)
    name = base or name
    return name if ids.normalise_entity_name(name) else ""


def _title_type(full_title: str, title: str, lead: str) -> str:
    if _HAS_CJK.search(title):
        return _chinese_title_type(title)
    disambiguator = _DISAMBIGUATOR.search(full_title)
    if disambiguator is not None:
        kind = _role_type(disambiguator.group(1))
        if kind != OTHER:
            return kind
    at = lead.casefold().find(title.casefold())
    after = lead[at + len(title) :] if at >= 0 else lead
    if _PERSON_AFTER.match(after):
        return "person"
    copula = _COPULA.match(after)
    if copula is not None:
        kind = _role_type(copula.group(1))
        if kind != OTHER:
            return kind
    return _name_type(title.split())


def _role_type(phrase: str) -> str:
    """The type of the last role word before the phrase's first preposition or clause word."""
    head = _PHRASE_END.split(phrase.lower(), maxsplit=1)[0]
    kinds = [_ROLE_TYPES.get(word.strip(".,;:()'’\"")) for word in head.replace("-", " ").split()]
    return next((kind for kind in reversed(kinds) if kind is not None), OTHER)


# -- sentences -----------------------------------------------------------------------------------------------


def _sentences(text: str, chat: bool) -> list[str]:
    """Sentences of a chunk; in a chat log (`Speaker: message` lines) each message is one unit."""
    if chat:
        return [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    # `split_sentences` ends a sentence at "St." or "S." in "St. Maurice", "Michael S. Hart": undo that.
    return rejoin_after(split_sentences(_TABLE_ROW.sub(r"\n\1\n", text)), _ENDS_WITH_ABBREVIATION.search)


@dataclass(slots=True)
class _ChunkContext:
    """What the rules need to know about the whole chunk while reading one sentence of it."""

    title: str
    sentences: list[str]
    chat: bool
    title_words: frozenset[str]
    _capitalised: frozenset[str] | None = None

    @classmethod
    def of(cls, text: str, title: str) -> _ChunkContext:
        chat = is_chat(text)
        return cls(title, _sentences(text, chat), chat, frozenset(title.split()))

    @property
    def capitalised_mid_sentence(self) -> frozenset[str]:
        """Capitalised words seen after the first word of some sentence: names, not sentence openers."""
        if self._capitalised is None:
            words = set()
            for sentence in self.sentences:
                _, text = _speaker_and_text(sentence, self.chat)
                openings = _opening_positions(text)
                for match in _WORD.finditer(text):
                    if match.group(0)[0].isupper() and match.start() not in openings:
                        words.add(_strip_possessive(match.group(0)))
            self._capitalised = frozenset(words)
        return self._capitalised


def _sentence_entities(sentence: str, context: _ChunkContext) -> list[_Found]:
    if _HAS_CJK.search(sentence):
        return _chinese_entities(sentence, context.title)
    return _english_entities(sentence, context)


# -- English -------------------------------------------------------------------------------------------------


def _english_entities(sentence: str, context: _ChunkContext) -> list[_Found]:
    found: list[tuple[int, _Found]] = []
    speaker, text = _speaker_and_text(sentence, context.chat)
    if speaker:
        found.append((0, _Found(speaker, "person")))
    masked = _title(_quoted(_dates(text, found), found), context.title, found)
    words = list(_WORD.finditer(masked))
    _proper_nouns(masked, words, text, context, found)
    _keyphrases(masked, words, found)
    found.sort(key=lambda item: item[0])
    return [entity for _, entity in found]


def _speaker_and_text(sentence: str, chat: bool) -> tuple[str, str]:
    """The chat speaker of a message line (or "") and the text to read, markup removed, offsets kept."""
    text = _EMPHASIS.sub("", _MARKDOWN_LEAD.sub("", sentence))
    speaker = _SPEAKER.match(text) if chat else None
    if speaker is None or speaker.group(1).lower() in _NOT_NAME_WORDS:
        return "", text
    return _split_camel(speaker.group(1)), " " * speaker.start(2) + speaker.group(2)


def _dates(text: str, found: list[tuple[int, _Found]]) -> str:
    """Add dates and years; returns `text` with them blanked out so no other rule reads them."""
    chars = list(text)

    def take(start: int, end: int, name: str) -> None:
        if text[start:end].strip() and chars[start] != " ":
            found.append((start, _Found(name, "date")))
            chars[start:end] = " " * (end - start)

    for match in _DAY_MONTH_YEAR.finditer(text):
        take(match.start(), match.end(), f"{int(match.group(1))} {match.group(2)} {match.group(3)}")
    for match in _MONTH_DAY_YEAR.finditer(text):
        take(match.start(), match.end(), f"{int(match.group(2))} {match.group(1)} {match.group(3)}")
    for match in _MONTH_YEAR.finditer("".join(chars)):
        take(match.start(), match.end(), f"{match.group(1)} {match.group(2)}")
    for match in _CUED_SHORT_YEAR.finditer("".join(chars)):
        for group in (1, 2):
            if match.group(group):
                take(match.start(group), match.end(group), match.group(group))
    for match in _YEAR.finditer("".join(chars)):
        take(match.start(), match.end(), match.group(1))
    return "".join(chars)


def _quoted(text: str, found: list[tuple[int, _Found]]) -> str:
    """Short capitalised quoted phrases are usually titles of works ("Silent Music"); blanked out after."""
    for match in _QUOTED.finditer(text):
        name = _LEADING_ARTICLE.sub("", match.group(1).strip(" ,.;:!?"))  # as titles are: "The X" → "X"
        if 1 <= len(name.split()) <= 6 and name.lower() not in _FUNCTION_WORDS:
            found.append((match.start(1), _Found(name, "work")))
            text = text[: match.start()] + " " * (match.end() - match.start()) + text[match.end() :]
    return text


def _title(text: str, title: str, found: list[tuple[int, _Found]]) -> str:
    """The document title where the sentence names it, blanked out so its words are not read again."""
    if not title:
        return text
    at = text.find(title)
    while at >= 0:
        found.append((at, _Found(title, OTHER)))  # its type comes from the title entity
        text = text[:at] + " " * len(title) + text[at + len(title) :]
        at = text.find(title, at + len(title))
    return text


def _proper_nouns(
    masked: str, words: list[re.Match[str]], text: str, context: _ChunkContext, found: list[tuple[int, _Found]]
) -> None:
    openings = _opening_positions(text)
    previous_end = 0
    last_whole: _Found | None = None
    for run in _runs(masked, words):
        start, end = run[0].start(), run[-1].end()
        name = _strip_possessive(masked[start:end]).replace("- ", "-")
        previous = last_whole if last_whole is not None and _LIST_GAP.match(text[previous_end:start]) else None
        last_whole = None
        for index, (at, part) in enumerate(_name_variants(name, start)):
            initial = at in openings
            before, after = text[:at], text[at + len(part) :]
            if _keep_name(part, initial, after, context, whole=index == 0):
                kind = _guess_type(part, before, after, initial)
                if kind == OTHER and index == 0 and previous is not None and previous.type in _LIST_TYPES:
                    kind = previous.type
                found.append((at, _Found(part, kind)))
                last_whole = found[-1][1] if index == 0 else last_whole
        previous_end = end


def _opening_positions(text: str) -> frozenset[int]:
    return frozenset(match.end() for match in _OPENING.finditer(text))


def _runs(text: str, words: list[re.Match[str]]) -> list[list[re.Match[str]]]:
    """Maximal runs of capitalised words joined by single spaces and short connectors."""
    runs: list[list[re.Match[str]]] = []
    current: list[re.Match[str]] = []
    for word in words:
        token = word.group(0)
        joined = bool(current) and _joins(text[current[-1].end() : word.start()], current[-1].group(0))
        if joined and (token == "I" or _is_initial(text, word)):
            current.append(word)  # "World War I", not the pronoun; "Robert A. Stemmle", not the article
        elif _is_capitalised(token) and (joined or not current):
            current.append(word)
        elif _is_capitalised(token):
            runs.append(current)
            current = [word]
        elif joined and token in _CONNECTORS and _connectors_at_end(current) < 2:
            current.append(word)
        else:
            if current:
                runs.append(current)
            current = []
    if current:
        runs.append(current)
    return [trimmed for run in runs if (trimmed := _trim_run(run))]


def _is_capitalised(token: str) -> bool:
    # "You're" and "I'll" are function words too.
    return token[0].isupper() and token.lower().replace("’", "'").split("'")[0] not in _FUNCTION_WORDS


def _is_initial(text: str, word: re.Match[str]) -> bool:
    return len(word.group(0)) == 1 and word.group(0).isupper() and text[word.end() : word.end() + 1] == "."


def _joins(gap: str, previous: str) -> bool:
    if gap == " " or gap == "- ":  # "- ": a hyphen before a line break, kept by some corpora
        return True
    # "St. Maurice", "Michael S. Hart": an abbreviation's full stop does not end the name.
    return gap == ". " and (len(previous) == 1 or previous.lower() in _ABBREVIATIONS)


def _connectors_at_end(run: list[re.Match[str]]) -> int:
    count = 0
    for word in reversed(run):
        if word.group(0) not in _CONNECTORS:
            break
        count += 1
    return count


def _trim_run(run: list[re.Match[str]]) -> list[re.Match[str]]:
    while run and run[-1].group(0) in _CONNECTORS:
        run = run[:-1]
    while run and run[0].group(0).lower() in _DEMONYMS and len(run) > 1:
        run = run[1:]  # "British Prime Minister ..." names the minister, not Britain
    while run and run[0].group(0) in _CONNECTORS:
        run = run[1:]
    return run if len(run) <= MAX_RUN_WORDS else []


def _name_variants(name: str, start: int) -> list[tuple[int, str]]:
    """The name, its parts around " of " ("Adalbert II of Tuscany" → "Adalbert II", "Tuscany"), and the
    name without leading honorifics ("King Lothair II" → "Lothair II"): each with its offset."""
    variants = [(start, name)]
    if f" {_SPLIT_CONNECTOR} " in name:
        offset = start
        for part in name.split(f" {_SPLIT_CONNECTOR} "):
            stripped = _LEADING_ARTICLE.sub("", part) if part.lower().startswith("the ") else part
            variants.append((offset + len(part) - len(stripped), stripped))
            offset += len(part) + len(_SPLIT_CONNECTOR) + 2
    words = name.split()
    lead = 0
    while lead < len(words) - 1 and words[lead].lower().rstrip(".") in _HONORIFICS:
        lead += 1
    if lead > 0 and f" {_SPLIT_CONNECTOR} " not in name:
        rest = " ".join(words[lead:])
        variants.append((start + len(name) - len(rest), rest))
    return variants


def _keep_name(name: str, initial: bool, after: str, context: _ChunkContext, whole: bool = True) -> bool:
    words = name.split()
    lowered = [word.lower().rstrip(".") for word in words]
    if not words or all(word in _NOT_NAME_WORDS or word in _CONNECTORS for word in lowered):
        return False
    if len(words) > 1:
        return True
    word = lowered[0]
    if word in _CALENDAR_WORDS or word in _DEMONYMS or len(word) < 2:
        return False
    if not whole and (_COMMON_NOUN_SUFFIX.search(word) or word in _NAME_PART_NOUNS):
        return False
    if not initial:
        return True
    # A capitalised sentence opener is a name only with some other sign of being one.
    return (
        name in context.title_words
        or name in context.capitalised_mid_sentence
        or after.lstrip().startswith("(")
        or after.startswith(("'s", "’s"))
    )


def _guess_type(name: str, before: str, after: str, initial: bool) -> str:
    if _PERSON_AFTER.match(after):
        return "person"
    appositive = _APPOSITIVE.match(after)
    if appositive is not None and (kind := _role_type(appositive.group(1))) == "person":
        return kind
    if initial:
        copula = _COPULA.match(after)
        if copula is not None and (kind := _role_type(copula.group(1))) != OTHER:
            return kind
    kind = _name_type(name.split())
    if kind != OTHER:
        return kind
    tail = before[-40:].lower()
    if _PERSON_BEFORE.search(tail):
        return "person"
    if _PLACE_BEFORE.search(tail) or _IN_BEFORE.search(tail):
        return "location"
    return OTHER


def _name_type(words: list[str]) -> str:
    """A type from the words of a name: honorifics, Roman numerals and head words."""
    if not words:
        return OTHER
    first, last = words[0].lower().rstrip("."), words[-1].lower().rstrip(".")
    if last in _EVENT_WORDS or (first in _EVENT_WORDS and len(words) > 1):
        return "event"
    if last in _ORG_WORDS or (first in _ORG_WORDS and len(words) > 2 and words[1] == "of"):
        return "organization"
    if last in _PLACE_WORDS or (first in _PLACE_WORDS and len(words) > 1):
        return "location"
    if len(words) > 1 and _ROMAN.match(words[-1]):
        return "event" if words[-2].lower() in _EVENT_WORDS else "person"  # "World War II", "Lothair II"
    if first in _HONORIFICS:
        return "person"
    return OTHER


def _keyphrases(masked: str, words: list[re.Match[str]], found: list[tuple[int, _Found]]) -> None:
    """Lower-case noun-phrase candidates (2–3 content words); kept later only when they recur."""
    content = [_is_content_word(word.group(0)) for word in words]
    # linked[i]: word i and word i + 1 are separated by exactly one space
    linked = [masked[a.end() : b.start()] == " " for a, b in pairwise(words)]
    for i in range(len(words)):
        for size in (3, 2):
            last = i + size - 1
            if last >= len(words) or words[last].group(0).endswith("ed"):
                continue
            if all(content[i : last + 1]) and all(linked[i:last]):
                phrase = " ".join(word.group(0) for word in words[i : last + 1])
                found.append((words[i].start(), _Found(phrase, "concept", weak=True)))


def _is_content_word(token: str) -> bool:
    return token.islower() and len(token) >= 3 and not token.endswith("ly") and token not in _NOT_CONTENT_WORDS


def _strip_possessive(name: str) -> str:
    for suffix in ("'s", "’s"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _split_camel(name: str) -> str:
    """Chat handles such as "LiHua" are written "Li Hua" in messages."""
    humps = _CAMEL_HUMP.findall(name)
    return " ".join(humps) if " " not in name and "".join(humps) == name else name


# -- Chinese -------------------------------------------------------------------------------------------------


def _chinese_entities(sentence: str, title: str) -> list[_Found]:
    found: list[tuple[int, _Found]] = []
    for match in _BOOK_TITLE.finditer(sentence):
        found.append((match.start(), _Found(match.group(1).strip(), "work")))
    # The title and dates are taken whole; jieba reads only the text between them.
    spans = [(m.start(), m.end(), _Found(m.group(0), "date")) for m in _CJK_DATE.finditer(sentence)]
    if title:
        spans += [(m.start(), m.end(), _Found(title, OTHER)) for m in re.finditer(re.escape(title), sentence)]
    position = 0
    for start, end, entity in sorted(spans, key=lambda span: span[0]):
        if start >= position:
            found.extend(_jieba_entities(sentence[position:start], position))
            found.append((start, entity))
            position = end
    found.extend(_jieba_entities(sentence[position:], position))
    found.sort(key=lambda item: item[0])
    return [entity for _, entity in found]


def _jieba_entities(text: str, offset: int) -> list[tuple[int, _Found]]:
    if not text.strip():
        return []
    tokenizer = jieba_module().posseg.dt
    found = []
    for word, tag in _join_transliterations([(str(pair.word), str(pair.flag)) for pair in tokenizer.cut(text)]):
        entity = _tagged_entity(
            word.strip(), tag, known=word in tokenizer.tokenizer.FREQ or _NAME_DOTS.intersection(word)
        )
        if entity is not None:
            found.append((offset, entity))
        offset += len(word)
    return found


def _join_transliterations(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """ "菲利克斯", "·", "克莱因" → "菲利克斯·克莱因": a foreign name is one person."""
    joined: list[tuple[str, str]] = []
    for word, tag in pairs:
        if (
            len(joined) >= 2
            and joined[-1][0] in _NAME_DOTS
            and joined[-2][1] in _CJK_TAG_TYPES
            and tag.startswith("nr")
        ):
            dot = joined.pop()[0]
            joined[-1] = (joined[-1][0] + dot + word, "nr")
        else:
            joined.append((word, tag))
    return joined


def _chinese_title_type(title: str) -> str:
    """A title jieba reads as one tagged word ("赵鹏" nr) gets that word's type."""
    if _BOOK_TITLE.fullmatch(title):
        return "work"
    pairs = _join_transliterations([(str(pair.word), str(pair.flag)) for pair in jieba_module().posseg.dt.cut(title)])
    return _CJK_TAG_TYPES.get(pairs[0][1], OTHER) if len(pairs) == 1 else OTHER


def _tagged_entity(word: str, tag: str, known: object) -> _Found | None:
    if len(word) < 2 or (not _HAS_CJK.search(word) and not (tag == "eng" and word[:1].isupper() and len(word) > 2)):
        return None
    if word[0] in _CJK_LEADING_PARTICLES or (not known and (len(word) > 4 or _CJK_FUNCTION_CHARS.intersection(word))):
        return None  # a "word" across a grammatical particle: "东与龙", "由广茂", "和威廉"
    if tag in _CJK_TAG_TYPES:
        return _Found(word, _CJK_TAG_TYPES[tag])
    if tag == "nz" or tag == "eng":
        return _Found(word, OTHER)
    if tag in _CJK_WEAK_TAGS:
        return _Found(word, "concept", weak=True)
    return None
