"""The extractive answerer: used when no chat model is configured.

It quotes the sentence or sentences of the retrieved chunks that answer the question, cites each with the
number of its source, and says plainly that the answer is extractive. Only chunk text is quoted: entity,
relationship and community results are the graph's own summaries, not the documents' words.

How a sentence scores:
- by the question terms it holds, rarer terms weighing more;
- a term of its document's title counts as its own: a document's sentences are about what its title names, even
  where they leave it out ("Born in 1994." on a page titled with a person's name);
- terms of its context count for less: its heading and the sentences before it in its paragraph or list item
  ("Strength 7.2% ABV." under "Old Tobias" is about Old Tobias), the chat message it replies to when that one asks
  ("Any good gym near you?" "Try FitZone."), and the date stamp above it ("Time: 20260930_16:00");
- a chat message's speaker counts as a term of each of its sentences;
- a compound word the evidence never uses counts by its two words ("beehives" by "bee" and "hive"), and a Chinese
  term the sentence lacks counts a little by the characters of it that it holds (编 for 编著);
- more when it holds an answer of the kind the question asks for (a person, a date, a place, a number, a reason, a
  colour: `extractive_questions`; a chat message's speaker is a person; a chat reply to a question asking the same
  sort or reason about the same thing gives one in the sentence that opens it, after any exclamation that only
  reacts: "Awesome!"), and more again when it states the answer as asked: says where something is ("lies in", 位于)
  or where someone is from (湖广公安人) for a where-question, tells of the birth or death asked about (病逝 for 卒),
  counts in the unit a how-many question names ("650 litres", 25人);
- more when it names the question's focus (half when only its chunk does); when the question writes the title of
  some documents, only their sentences can be about its focus;
- less when, in a chat, it asks a question itself, unless it offers an answer of the kind asked ("How about 7
  pm?"); in prose a question states what the text goes on to answer;
- less when, in a chat, someone else says it than the speaker whose words the question asks for ("in Orion's
  opinion", "What does Jake recommend?").

What is quoted:
- the best sentence (for a compound question, the best for each of its questions);
- further ones while they score close to it, fit a short answer and do not repeat one quoted already (share most
  of the shorter one's content words, itself or what it brings, and, for a who-question, name no person the quoted
  ones lack: "Alice is on her way with your bread" after "Your bread will be delivered today" is news). One that
  holds a question term not yet quoted or an answer of the kind asked goes before one that only names again what
  is asked about. One without an answer of the kind asked is quoted only when it scores nearly as well as the best
  (an uncertain choice: both are quoted);
- with each, what it needs to be read alone: the sentence before it in its block when it leans on it (it opens
  with a pronoun or, in Chinese, with a month whose year comes before, has a pronoun before any name, or says
  nothing the question does not: "Perfect for fitness lovers like you."), a quoted question's reply (in a chat,
  the next message by someone else), the next sentence when it goes on with this one (a Chinese sentence with no
  subject of its own: 可减轻发炎), and for an answer to "when" without a calendar date ("tomorrow", "last week")
  the nearest date above it in its chunk.
Sentences are quoted in the order they were chosen in, each run from one source followed by its citation marker.
When nothing in the evidence shares a term with the question, the first sentence of the top chunk stands in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby, islice

from backend.domain.retrieval import Granularity, RetrievalResult
from backend.graphrag_agent.text import cjk_presence, fulltext_terms, is_cjk
from backend.infrastructure.llm.extractive_passages import Sentence, chunk_sentences
from backend.infrastructure.llm.extractive_questions import (
    CUED_KINDS,
    AnswerKind,
    Asked,
    answers,
    asked,
    calendar_dates,
    holds_calendar_date,
    names,
    states,
    stem,
    stems,
)

EXTRACTIVE_NOTICE = "Extractive answer (no language model is configured; these are the most relevant passages):"
NO_EVIDENCE_ANSWER = (
    "Extractive mode: I could not find anything about this in the knowledge base. "
    "Try rephrasing the question or choosing another knowledge base."
)
GENERAL_UNAVAILABLE = (
    "Extractive mode: no language model is configured, so I can only answer questions about a knowledge base. "
    "Ask about one of them (choose it, or name it as kb_prefix in an API request); general chat needs a language "
    "model, which the server's operator configures (LLM_BASE_URL and LLM_MODEL)."
)
MAX_SENTENCES = 3
MAX_LIST_SENTENCES = 6
MAX_CHARS = 250  # the sentences quoted after the first stop where the answer would grow past this
CONTEXT_WEIGHT = 0.5  # a question term in the sentence's heading or paragraph, against one in the sentence
CHARACTER_WEIGHT = 0.3  # a Chinese term the sentence lacks, by the share of its characters it holds
KIND_WEIGHT = 0.5  # how much an answer of the asked kind adds to a sentence's term score
FOCUS_WEIGHT = 0.5  # how much naming the question's focus (a name, a title) adds
CLOSE_ENOUGH = 0.3  # a further sentence's score against the best one's
# A further sentence that scores this close to the best is quoted even without an answer of the kind asked: kinds
# are read from surface cues that miss some answers ("leaves from the slipway" names no place the cues know), so a
# near tie is an uncertain choice, and quoting both beats betting on one.
UNSURE = 0.7
SAME_TERMS = 0.8  # a further sentence that brings no question term the quoted ones lack, against one that does
REPLY_REACH = 3  # how many messages back a chat reply may answer a question
REACTION_WORDS = 3  # at most this many words make an exclamation a reaction ("That sounds great!")
# Kinds whose answer a chat reply may give in words no cue reads: a sort by its name ("margherita"), a reason
# without "because" ("It clears my head.").
_UNMARKED = frozenset({AnswerKind.SORT, AnswerKind.REASON})
QUESTION_PENALTY = 0.5  # a sentence that asks a question, against one that states
OTHER_SPEAKER = 0.5  # a chat message by someone else than the person whose words are asked, against theirs
RANK_DECAY = 0.03  # per place of its source in the evidence
STAMP_WORDS = 4  # at most this many words after its label make a line a date stamp ("Time: 20260930_16:00")
MIN_PART = 3  # letters of each word of a compound word
REPEATED = 0.7  # share of the shorter one's terms that two sentences share when one repeats the other
_QUALIFIER = re.compile(r"\s*[(（][^()（）]*[)）]\s*$")  # a title's bracketed qualifier: "加拿大广场 (温哥华)"
_ASKS = re.compile(r"[?？][^\w?？]*$")
_EXCLAIMS = re.compile(r"[!！][^\w!！]*$")
_CONTINUES = re.compile(r"^(?:[这此该其它也并可为]|因为|由于)")  # see `_continues`
_YEARLESS_START = re.compile(r"(?:\d{1,2}|[一二三四五六七八九十]{1,3})月")  # 10月析…: its year is said before
_PRONOUN_START = re.compile(r"^(?:he|she|it|they|this|these|that|those|his|her|its|their|him|them)\b|^[他她它其该此]")
# A third-person pronoun inside a sentence; it refers back to an earlier sentence unless a name comes before it.
_PRONOUN = re.compile(r"\b(?:he|she|it|they|his|her|its|their|him|them)\b", re.IGNORECASE)
# Greetings and reactions: words of a chat message that add nothing to what it says.
_INTERJECTIONS = frozenset(
    stem(w)
    for w in [
        "hey",
        "hi",
        "hello",
        "thanks",
        "thank",
        "wow",
        "yeah",
        "ok",
        "okay",
        "oh",
        "yes",
        "sure",
        "great",
        "really",
    ]
)


@dataclass(frozen=True, slots=True)
class _Scored:
    sentence: Sentence
    score: float
    words: frozenset[str]  # its terms, by stem
    answers: frozenset[str]  # the answers of the kinds the question asks for that it holds
    held: frozenset[str]  # the question terms it holds itself (a CJK term: at least half of it)

    @property
    def typed(self) -> bool:
        """Does it hold an answer of a kind the question asks for?"""
        return bool(self.answers)


class _Passages:
    """The quotable sentences of the evidence's chunks, and how much of a question term each holds, itself or
    in its context (its heading and the sentences before it in its block)."""

    def __init__(self, evidence: Sequence[RetrievalResult]) -> None:
        chunks = {n: r.evidence.lower() for n, r in enumerate(evidence, start=1) if r.granularity is Granularity.CHUNK}
        self.titles = {n: evidence[n - 1].source.title.lower() for n in chunks}
        self.title_stems = {n: stems(title) for n, title in self.titles.items()}
        self.sentences = [
            s for n, r in enumerate(evidence, start=1) if n in chunks for s in chunk_sentences(r.evidence, n)
        ]
        self.chunks = chunks
        self.dialogues = frozenset(s.source for s in self.sentences if s.label)  # chunks of labelled lines
        self.index = {sentence: n for n, sentence in enumerate(self.sentences)}
        labelled = [_labelled(s, None) for s in self.sentences]  # a message's speaker is in each of its sentences
        self.texts = [text.lower() for text in labelled]
        self.stems = [stems(text) for text in labelled]  # as written, so "LiHua" is also "li" and "hua"
        self.replied = [self._replied_to(i) for i in range(len(self.sentences))]
        self.stamps = frozenset(i for i, s in enumerate(self.sentences) if _is_stamp(s))
        self.speakers = frozenset(
            _speaker_key(s) for i, s in enumerate(self.sentences) if s.label and i not in self.stamps
        )
        contexts = [self._context(i) for i in range(len(self.sentences))]
        self.context_texts = [text for text, _ in contexts]
        self.context_stems = [found for _, found in contexts]
        self.lower_words = frozenset(w for s in self.sentences for w in re.findall(r"\b[a-z][\w'’-]*", s.text))
        self.vocabulary: frozenset[str] = frozenset().union(*self.stems)
        self._parts: dict[str, tuple[str, ...]] = {}

    def _context(self, index: int) -> tuple[str, frozenset[str]]:
        sentence = self.sentences[index]
        before = [
            self.sentences[i].text
            for i in range(index - 1, -1, -1)
            if self.sentences[i].source == sentence.source and self.sentences[i].block == sentence.block
        ]
        framing = [sentence.heading, sentence.label, *before, *self.replied[index], *self._stamp(index)]
        text = " ".join(framing)
        return text.lower(), stems(text)

    def _stamp(self, index: int) -> list[str]:
        """The nearest date stamp above the sentence in its chunk: a labelled line that only states a date (a chat
        session's "Time: 20260930_16:00", a record's "Date: 12 May 2019"); it dates what follows as a heading
        names it."""
        sentence = self.sentences[index]
        for step in range(index - 1, -1, -1):
            earlier = self.sentences[step]
            if earlier.source != sentence.source:
                break
            if step in self.stamps:
                return [earlier.text]
        return []

    def _replied_to(self, index: int) -> list[str]:
        """In a chat, the sentences of the message a message replies to: the nearest of the few before it that asks,
        by someone else, since the speaker's own last message. A reply answers in the question's words, not its own
        ("What kind of pizza is your favourite?" "Bro, I'm all about that classic margherita."), and in a group
        several replies follow one question."""
        sentence = self.sentences[index]
        if not sentence.label:
            return []
        earlier = [s for s in self.sentences[:index] if s.source == sentence.source and s.block != sentence.block]
        for _, message in islice(groupby(reversed(earlier), key=lambda s: s.block), REPLY_REACH):
            said = list(message)[::-1]
            if said[0].label in ("", sentence.label):  # not a chat, or the speaker already replied
                return []
            if any(_is_question(s.text) for s in said):
                return [s.text for s in said]
        return []

    def voices(self, person: str) -> frozenset[str]:
        """The speakers of the evidence that are `person` (lower-cased, without spaces); a name may be a speaker's
        first name ("jake": JakeWatson)."""
        return frozenset(s for s in self.speakers if s.startswith(person)) if person else frozenset()

    def said_by_another(self, index: int, voices: frozenset[str]) -> bool:
        """Is the sentence a chat message by someone else than the person of `voices`, who speaks in the evidence?
        "What does Jake recommend?" asks for Jake's words, not those of the friend he talks to."""
        sentence = self.sentences[index]
        return (
            bool(voices) and bool(sentence.label) and index not in self.stamps and _speaker_key(sentence) not in voices
        )

    def opens(self, index: int) -> bool:
        """Does the sentence open what its chat message says: its first sentence, or the first after short
        exclamations that only react to what was said ("Awesome! I was thinking of a simple form.")?"""
        sentence = self.sentences[index]
        if _reacts(sentence):
            return False
        for step in range(index - 1, -1, -1):
            earlier = self.sentences[step]
            if earlier.source != sentence.source or earlier.block != sentence.block:
                break
            if not _reacts(earlier):
                return False
        return True

    def presence(self, term: str, index: int) -> tuple[float, float]:
        """(in the sentence, in its context): 1 or 0 for a word; for a CJK term the share of it found."""
        if is_cjk(term[0]):
            return _cjk_share(term, self.texts[index]), _cjk_share(term, self.context_texts[index])
        parts = self.parts(term)
        own, context = self.stems[index], self.context_stems[index]
        if parts:
            return sum(p in own for p in parts) / len(parts), sum(p in context for p in parts) / len(parts)
        return float(term in own), float(term in context)

    def titled(self, term: str, index: int) -> float:
        """How much of the term the title of the sentence's document holds (as `presence` measures it)."""
        source = self.sentences[index].source
        if is_cjk(term[0]):
            return _cjk_share(term, self.titles[source]) if self.titles[source] else 0.0
        words, parts = self.title_stems[source], self.parts(term)
        return float(term in words or (bool(parts) and all(part in words for part in parts)))

    def parts(self, term: str) -> tuple[str, ...]:
        """A compound word the evidence never uses, as the two words of it that the evidence does use ("beehives":
        "bee", "hive"); else ()."""
        if term not in self._parts:
            self._parts[term] = self._split(term)
        return self._parts[term]

    def _split(self, term: str) -> tuple[str, ...]:
        if term in self.vocabulary or not term.isalpha() or len(term) < 2 * MIN_PART:
            return ()
        for cut in range(MIN_PART, len(term) - MIN_PART + 1):
            head, tail = term[:cut], term[cut:]
            ends = sorted((w for w in self.vocabulary if w.startswith(tail) and len(w) <= len(tail) + 1), key=len)
            if head in self.vocabulary and ends:
                return head, ends[0]
        return ()

    def neighbour(self, sentence: Sentence, step: int) -> Sentence | None:
        """The sentence `step` places after `sentence` (before it when negative) in its chunk, if any."""
        index = self.index[sentence] + step
        found = self.sentences[index] if 0 <= index < len(self.sentences) else None
        return found if found is not None and found.source == sentence.source else None

    def reply(self, sentence: Sentence) -> Sentence | None:
        """The sentence after `sentence` in its chunk; in a chat, the first of the next message by someone else."""
        step = 1
        while (found := self.neighbour(sentence, step)) is not None and sentence.label and found.label:
            if found.label != sentence.label and found.block != sentence.block:
                return found
            step += 1
        return found

    def dated_before(self, sentence: Sentence, question: Asked) -> Sentence | None:
        """The nearest sentence above `sentence` in its chunk that holds a date."""
        for index in range(self.index[sentence] - 1, -1, -1):
            earlier = self.sentences[index]
            if earlier.source != sentence.source:
                return None
            if holds_calendar_date(earlier.text, question):
                return earlier
        return None


def _is_stamp(sentence: Sentence) -> bool:
    """Is it a labelled line that only states a date ("Time: 20260930_16:00")?"""
    value = sentence.said.strip(" :：")
    return bool(sentence.label) and bool(calendar_dates(value)) and len(value.split()) <= STAMP_WORDS


def _speaker_key(sentence: Sentence) -> str:
    return sentence.label.replace(" ", "").lower()


def _reacts(sentence: Sentence) -> bool:
    """Is it a short exclamation of a chat message ("Awesome!", "That sounds great!", 太好了！), a reaction to what was
    said?"""
    said = sentence.said.rstrip()
    return bool(sentence.label) and _EXCLAIMS.search(said) is not None and len(fulltext_terms(said)) <= REACTION_WORDS


def _cjk_share(term: str, text: str) -> float:
    """`cjk_presence`, or when the text holds none of the term's bigrams, a little for its characters."""
    found = cjk_presence(term, text)
    if found:
        return found
    return CHARACTER_WEIGHT * sum(char in text for char in term) / len(term)


def _weights(question: Asked, presence: list[list[tuple[float, float]]], emphasis: frozenset[str]) -> list[float]:
    """Per question term: inverse sentence frequency (a term in every sentence tells nothing about which one
    answers), doubled for the `emphasis` terms (those of one part of a compound question)."""
    count = len(presence)
    return [
        (1.0 + (term in emphasis)) * math.log(1 + count / (1 + sum(row[t][0] for row in presence)))
        for t, term in enumerate(question.terms)
    ]


def _about_focus(question: Asked, passages: _Passages, index: int, named: frozenset[int]) -> float:
    """1 when the sentence names the question's focus, half when only its chunk does, else 0; 0 as well when the
    question names the subject of some documents (`named`, by `_named_documents`) and the sentence is in another."""
    if not question.focus or (named and passages.sentences[index].source not in named):
        return 0.0
    if any(name in passages.texts[index] for name in question.focus):
        return 1.0
    chunk = passages.chunks[passages.sentences[index].source]
    return 0.5 if any(name in chunk for name in question.focus) else 0.0


def _named_documents(question: Asked, passages: _Passages) -> frozenset[int]:
    """The sources whose document's subject the question names: their title, without a bracketed qualifier
    ("加拿大广场 (温哥华)"), written in the question."""
    text = question.text.lower()
    named = set()
    for source, title in passages.titles.items():
        subject = _QUALIFIER.sub("", title).strip()
        if len(subject) < 2:
            continue
        # Chinese has no spaces between words: 吊钟 is named in 吊钟花如何繁殖.
        if subject in text if is_cjk(subject[0]) else re.search(rf"(?<!\w){re.escape(subject)}(?!\w)", text):
            named.add(source)
    return frozenset(named)


def _score(
    question: Asked, passages: _Passages, kinds_asked: tuple[AnswerKind, ...], emphasis: frozenset[str] = frozenset()
) -> list[_Scored]:
    named = _named_documents(question, passages)
    voices = passages.voices(question.speaker)
    presence = [[passages.presence(term, i) for term in question.terms] for i in range(len(passages.sentences))]
    weights = _weights(question, presence, emphasis)
    total = sum(weights) or 1.0
    scored = []
    for index, sentence in enumerate(passages.sentences):
        row = presence[index]
        found = sum(
            weight * max(own, CONTEXT_WEIGHT * context, passages.titled(term, index))
            for term, weight, (own, context) in zip(question.terms, weights, row, strict=True)
        )
        if not found:
            continue
        found_answers = {kind: _answers(sentence, kind, question, passages) for kind in kinds_asked}
        for kind in _echoed(question, passages, index, kinds_asked):
            found_answers[kind] = found_answers[kind] or [sentence.said]
        kinds = frozenset(kind for kind, held in found_answers.items() if held)
        stated = sum(states(sentence.text, kind, question) for kind in kinds)  # "lies in", "650 litres"
        share = (len(kinds) + stated) / len(kinds_asked) if kinds_asked else 0.0
        boost = (1.0 + KIND_WEIGHT * share) * (1.0 + FOCUS_WEIGHT * _about_focus(question, passages, index, named))
        # In a dialogue a question asks and its reply answers, unless it offers an answer itself ("How about 7 pm?").
        # In prose a sentence that ends in a question mark states the question the text goes on to answer.
        dialogue = sentence.source in passages.dialogues
        asking = QUESTION_PENALTY if dialogue and _is_question(sentence.text) and not kinds else 1.0
        score = found / total * boost * asking * (1.0 - RANK_DECAY * (sentence.source - 1))
        if passages.said_by_another(index, voices):
            score *= OTHER_SPEAKER
        held = frozenset(t for t, (own, _) in zip(question.terms, row, strict=True) if own >= 0.5)
        said = frozenset(answer for held in found_answers.values() for answer in held)
        scored.append(_Scored(sentence, score, passages.stems[index], said, held))
    scored.sort(key=lambda s: (-s.score, s.sentence.source, s.sentence.position))
    return scored


def _answers(sentence: Sentence, kind: AnswerKind, question: Asked, passages: _Passages) -> list[str]:
    """The answers of `kind` the sentence holds, without its label; a chat message's speaker is one for a who-question
    (a person, not a name asked)."""
    label = sentence.label if kind is AnswerKind.PERSON else ""
    texts = [text for text in (sentence.said, label) if text]
    return [answer for text in texts for answer in answers(text, kind, question, passages.lower_words)]


def _echoed(
    question: Asked, passages: _Passages, index: int, kinds_asked: tuple[AnswerKind, ...]
) -> frozenset[AnswerKind]:
    """The kinds of `_UNMARKED` answer the sentence gives as the opening of a chat reply to a question that asks
    for the same kind about one of the question's terms: "What kind of pizza is your favourite?" "Bro, I'm all
    about that classic margherita." answers "What type of pizza does he prefer?", though no cue reads a sort in it."""
    wanted = _UNMARKED.intersection(kinds_asked)
    if not wanted or not passages.replied[index] or not passages.opens(index):
        return frozenset()
    echoed: set[AnswerKind] = set()
    for text in filter(_is_question, passages.replied[index]):
        chat = asked(text)
        if set(chat.terms) & set(question.terms):
            echoed.update(wanted.intersection(chat.kinds))
    return frozenset(echoed)


def _best_per_part(question: Asked, passages: _Passages) -> list[_Scored]:
    """For a compound question, the best sentence for each of its questions (its terms weigh double)."""
    best: list[_Scored] = []
    for text in question.parts:
        part = asked(text)
        scored = _score(question, passages, part.kinds, frozenset(part.terms))
        if scored and all(scored[0].sentence != kept.sentence for kept in best):
            best.append(scored[0])
    return best


def _choose(question: Asked, scored: list[_Scored], first: list[_Scored], passages: _Passages) -> list[Sentence]:
    """`first` (the best sentence of each part of a compound question, else the best one) and further sentences that
    score close to the best, fit (the first to name an answer of the kind asked fits at any length), repeat no
    fact and, when the question asks for a kind of answer, hold one or score nearly as well as the best, taken
    best first by `_weighed` (a question term not yet quoted counts; while none names an answer of the kind
    asked, `_next`); each with what it needs to be read alone (`_frame`), which counts towards the length and
    the repeats."""
    chosen = first or scored[:1]
    frames = [_frame(question, item, passages) for item in chosen]
    limit = MAX_LIST_SENTENCES if question.listing else MAX_SENTENCES
    remaining = [c for c in scored[1:] if all(c.sentence != kept.sentence for kept in chosen)]
    while remaining and len(chosen) < limit:
        covered = frozenset().union(*(kept.held for kept in chosen))
        remaining.sort(key=lambda c: -_weighed(c, covered))
        untold = _untold(question, chosen)
        candidate = remaining.pop(_next(remaining, chosen, covered) if untold else 0)
        if _weighed(candidate, covered) < CLOSE_ENOUGH * chosen[0].score:
            break
        frame = [s for s in _frame(question, candidate, passages) if all(s not in f for f in frames)]
        said = [passages.stems[passages.index[s]] for f in frames for s in f]
        # For a who-question, each person named is an answer: one the quoted text lacks is news, not a repeat.
        new_answer = False
        if AnswerKind.PERSON in question.kinds:
            quoted = " ".join(_labelled(s, None) for f in frames for s in f)
            new_answer = any(a not in quoted for a in candidate.answers)
        repeated = not new_answer and any(_repeats(passages.stems[passages.index[s]], w) for s in frame for w in said)
        length = sum(len(c.sentence.text) for c in [*chosen, candidate])
        untyped = question.kinds and not candidate.typed and candidate.score < UNSURE * chosen[0].score
        # The first sentence to name an answer of the kind asked is worth more than the length.
        if repeated or (length > MAX_CHARS and not (untold and candidate.typed)) or untyped:
            continue
        chosen.append(candidate)
        frames.append(frame)
    return [s for f in frames for s in f]


def _next(remaining: list[_Scored], chosen: list[_Scored], covered: frozenset[str]) -> int:
    """Where in `remaining` (best first) the next candidate is while no chosen sentence names an answer of the kind
    asked: the first that does in a chunk already quoted and scores close enough ("Sure, I can help!" then "I'm
    free on Wednesday."), else the best."""
    sources = {kept.sentence.source for kept in chosen}
    close = CLOSE_ENOUGH * chosen[0].score
    for index, candidate in enumerate(remaining):
        if candidate.typed and candidate.sentence.source in sources and _weighed(candidate, covered) >= close:
            return index
    return 0


def _untold(question: Asked, chosen: list[_Scored]) -> bool:
    """Does the question ask for an answer that names something (a person, a date, a number; not only the phrase
    that gives a reason or an alias) that none of the chosen sentences names yet?"""
    return bool(frozenset(question.kinds) - CUED_KINDS) and not any(kept.typed for kept in chosen)


def _weighed(candidate: _Scored, covered: frozenset[str]) -> float:
    """A further sentence's score in the choice: less when it holds neither a question term the sentences quoted
    so far lack nor an answer of the kind asked (one more sentence about the name asked about, not about what is
    asked of it)."""
    return candidate.score if candidate.held - covered or candidate.typed else SAME_TERMS * candidate.score


def _repeats(words: frozenset[str], other: frozenset[str]) -> bool:
    """Does one of two sentences say again most of what the other says (most of the shorter one's terms)?"""
    return len(words & other) >= REPEATED * max(1, min(len(words), len(other)))


def _frame(question: Asked, item: _Scored, passages: _Passages) -> list[Sentence]:
    """The sentence with what it needs to be read alone: the sentence before it in its block when it refers back
    to it (it opens with a pronoun, has one before any name, or says nothing the question does not), after a
    question in the text its reply (in a chat, the next message by someone else), and the next sentence when it
    goes on with what this one says (`_continues`)."""
    sentence = item.sentence
    framed = [sentence]
    previous = passages.neighbour(sentence, -1)
    if previous is not None and previous.block == sentence.block and _refers_back(question, item, passages):
        framed.insert(0, previous)
    reply = passages.reply(sentence)
    if reply is not None and _is_question(sentence.text):
        framed.append(reply)
    following = passages.neighbour(sentence, 1)
    if following is not None and following not in framed and _continues(following, sentence, passages):
        framed.append(following)
    return framed


def _continues(following: Sentence, sentence: Sentence, passages: _Passages) -> bool:
    """Does the next sentence of the block go on saying what `sentence` says, without repeating it: a Chinese
    sentence that opens with a demonstrative or with no subject of its own (它是一个无色液体; 为国有股份制公司;
    可减轻发炎)?"""
    if following.block != sentence.block or not _CONTINUES.match(following.text):
        return False
    return not _repeats(passages.stems[passages.index[following]], passages.stems[passages.index[sentence]])


def _refers_back(question: Asked, item: _Scored, passages: _Passages) -> bool:
    """Does the sentence lean on the one before it: it opens with a pronoun or with a month whose year the
    sentence before gives (10月析金华县城区设金华市), uses a pronoun before naming anyone, or holds neither an
    answer of the kind asked nor a word beyond the question's own, its speaker's name and greetings ("Perfect for
    fitness lovers!")?"""
    sentence = item.sentence
    text = sentence.text
    if _PRONOUN_START.match(text.lower()) or _YEARLESS_START.match(text):
        return True
    if is_cjk(text[0]):
        return False
    pronoun = _PRONOUN.search(text)
    if pronoun is not None and not names(text[: pronoun.start()], passages.lower_words):
        return True
    own = stems(text) - stems(sentence.label) - _INTERJECTIONS
    return not item.typed and not own - frozenset(question.terms) - question.words


def _framed(question: Asked, sentences: list[Sentence], passages: _Passages) -> list[Sentence]:
    """The chosen sentences, and when a date is asked and none of them holds one, the nearest date above the
    first in its chunk (a chat session's time, a dated heading line)."""
    if AnswerKind.DATE in question.kinds and not any(holds_calendar_date(s.text, question) for s in sentences):
        dated = passages.dated_before(sentences[0], question)
        sentences = [dated, *sentences] if dated is not None else sentences
    return list(dict.fromkeys(sentences))


def _is_question(text: str) -> bool:
    """Does the sentence ask (a question mark at its end, before closing quotes, brackets or emoji)?"""
    return bool(_ASKS.search(text))


def _render(sentences: list[Sentence]) -> str:
    """The sentences in the order chosen, each run of one source followed by its citation marker."""
    runs: list[tuple[int, list[str]]] = []
    for index, sentence in enumerate(sentences):
        previous = sentences[index - 1] if index else None
        text = _labelled(sentence, previous)
        if runs and runs[-1][0] == sentence.source:
            runs[-1][1].append(text)
        else:
            runs.append((sentence.source, [text]))
    return " ".join(f"{' '.join(texts)} [{source}]" for source, texts in runs)


def _labelled(sentence: Sentence, previous: Sentence | None) -> str:
    """A labelled line's later sentence keeps its label ("Speaker: ...") unless the one quoted before it shows it."""
    if not sentence.label or sentence.text.startswith(sentence.label):
        return sentence.text
    if previous is not None and previous.source == sentence.source and previous.block == sentence.block:
        return sentence.text
    return f"{sentence.label}: {sentence.text}"


def compose_extractive_answer(question: str, evidence: Sequence[RetrievalResult]) -> str:
    passages = _Passages(evidence)
    if not passages.sentences:
        return NO_EVIDENCE_ANSWER
    wanted = asked(question)
    # A sentence naming the noun asked about ("What scene ...": "the scene with Arthur") describes the answer.
    scored = _score(wanted, passages, wanted.kinds, frozenset({wanted.head} - {""}))
    if scored:
        sentences = _framed(wanted, _choose(wanted, scored, _best_per_part(wanted, passages), passages), passages)
    else:
        sentences = passages.sentences[:1]
    return f"{EXTRACTIVE_NOTICE}\n\n{_render(sentences)}"


def stream_pieces(text: str) -> list[str]:
    """Split an answer into word-sized deltas (whitespace kept) so it streams like a model's output."""
    pieces: list[str] = []
    current = ""
    for char in text:
        if char.isspace() and current and not current[-1].isspace():
            pieces.append(current)
            current = ""
        current += char
    if current:
        pieces.append(current)
    return pieces


class ExtractiveAnswerer:
    """Implements `OfflineAnswerer` (`application/ports/chat_model.py`) with the functions above."""

    @property
    def general_answer(self) -> str:
        return GENERAL_UNAVAILABLE

    def compose(self, question: str, evidence: Sequence[RetrievalResult]) -> str:
        return compose_extractive_answer(question, evidence)

    def stream_pieces(self, text: str) -> list[str]:
        return stream_pieces(text)
