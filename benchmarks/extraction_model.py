"""A scripted OpenAI-compatible model that answers graph-extraction prompts from the text they carry.

Indexing benchmarks need a model whose answers have the right shape and a plausible size, so that the real
parsers, merges and graph writes of each system run, at a chosen latency and at no cost. This process serves
`tests.support.scripted_llm.ScriptedLLM` with a `responder` that recognises the prompt (by its fixed wording)
and computes the answer from the passage inside it:

- entities: speaker labels ("KEVIN SCOTT:" → Kevin Scott, person), runs of capitalised words (leading
  sentence words such as "The" or "So" dropped), years (date); typed by small cue lists (organisation
  words, "in"/"at"/"from" before a place) else person for two- or three-word names, else concept. Ranked by
  frequency then first position; when names run short, content words said twice or more (six letters and up,
  not on a stop list) follow as concepts. A first answer lists about one entity per 12 words (4 to 25), a
  gleaning answer ("entities were missed") the next ones.
- relations: entities named in a sentence or the next one, each to the following one and to the first one,
  strength from how often they meet; descriptions are those sentences, clipped.

Prompt kinds and answer formats:

- ours (`backend.graphrag_agent.extraction.prompts`): GraphRAG tuples `("entity"<|>name<|>type<|>desc)##`,
  `("relationship"<|>a<|>b<|>desc<|>strength)`, `<|COMPLETE|>`; community reports
  (`infrastructure.extraction.community_reports`): one JSON object.
- nano-graphrag 0.0.8.2: the same tuples with quoted fields and upper-case names, a gleaning answer, "NO" to
  its loop question, JSON community reports, plain-text description summaries.
- LightRAG 1.5.7: `entity<|#|>name<|#|>Type<|#|>desc` / `relation<|#|>a<|#|>b<|#|>keywords<|#|>desc` lines,
  its gleaning prompt, description summaries, and query keywords as JSON.
- anything else: "OK".

Every answer is delayed by `--delay` seconds (the per-call latency). Calls, prompt and answer characters and the
responder's CPU time are counted per kind and written as JSON to `--stats` when the process ends (SIGTERM or
SIGINT).

Run:  python -m benchmarks.extraction_model --port 0 [--delay 0.2] [--stats calls.json]   # prints "READY <url>"
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.scripted_llm import Reply, ScriptedLLM

# -- entities and relations of a passage -----------------------------------------------------------------------


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+|$)", re.MULTILINE)
_SPEAKER = re.compile(r"^[ \t]*([A-Z][A-Z.'\- ]{2,40}?)[ \t]*:", re.MULTILINE)
_CAPITALISED = re.compile(
    r"(?<![\w'’])[A-Z][\w'’&-]*(?:[ ](?:(?:of|the|de|for|von|van)[ ])?[A-Z][\w'’&-]*)*", re.UNICODE
)
_YEAR = re.compile(r"\b(1[5-9]\d\d|20\d\d)\b")
_WORD = re.compile(r"[^\W\d_][\w'’-]*", re.UNICODE)
_LEADING_WORDS = _words(
    """a about actually after again all also always an and another any anyway are as at be because been before
    both but by can could did do does done during each either even ever every first for from had has have he her
    here hey hi his how however i i'd i'll i'm i've if in into is isn't it it's its just kind let like look made
    maybe me more most much my no nobody not now of oh ok okay on once one only or other our out over part
    people please pretty probably quite rather really right said say says see she should since so some
    something sometimes still such sure that that's the their then there there's these they they're thing
    things this those though through thank thanks to today too uh um until very was we we're well were what
    what's when where which while who why will with would yeah yes yet you you're your hello welcome tell we'll
    you'll it'll let's don't can't didn't doesn't"""
)
_ORGANISATION_CUES = _words(
    """inc corp corporation company co ltd llc university college institute school labs lab laboratory group
    foundation association society agency department ministry council committee bank microsoft google apple
    amazon facebook meta openai ibm intel nvidia netflix linkedin github twitter stanford mit harvard berkeley
    nasa darpa army navy party club team records studios press times journal"""
)
_EVENT_CUES = _words("war battle festival conference summit olympics election revolution championship cup")
_PLACE_LEAD = re.compile(r"\b(?:in|at|from|to|near|across|outside|inside)\s+(?:the\s+)?$", re.IGNORECASE)
_FIELD_UNSAFE = re.compile(r"<\||\|>|##|[\r\n\t\"]+")
_STOPWORDS = _LEADING_WORDS | _words(
    """going get got know think mean want thing lot way yeah whether happen happened happens everything something
    anything nothing someone somebody everybody people really little pretty because things always different
    another around through thought before better important probably basically certainly definitely exactly
    obviously already almost enough others itself myself yourself himself herself themselves during within
    without between across toward towards against though although rather whatever whenever started starting
    getting making looking trying talking saying thinking working coming become became sometimes especially
    interesting amazing incredible together beyond instead totally completely largest biggest should having
    giving taking seeing understand remember called number certain simple person years around second
    able doing guess kinds maybe means needs point stuff super times while world year"""
)


@dataclass(frozen=True, slots=True)
class Entity:
    name: str
    type: str  # person, organization, location, event, date, concept
    description: str


@dataclass(frozen=True, slots=True)
class Relation:
    source: str
    target: str
    description: str
    keywords: str
    strength: int


@dataclass(frozen=True, slots=True)
class Graph:
    entities: tuple[Entity, ...]
    relations: tuple[Relation, ...]


def clip(text: str, words: int) -> str:
    """`text` on one line, without the delimiters of any tuple format, cut to `words` words."""
    parts = _FIELD_UNSAFE.sub(" ", text).split()
    return " ".join(parts[:words]) + (" …" if len(parts) > words else "")


def _name(raw: str) -> str:
    """A candidate cleaned: possessive and trailing punctuation cut, leading sentence words dropped, shouted
    names (speaker labels, all-caps words longer than four letters) in title case."""
    words = raw.replace("’", "'").removesuffix("'s").strip(" .,-'&").split()
    while words and words[0].lower() in _LEADING_WORDS:
        words = words[1:]
    while words and words[-1].lower() in {"of", "the", "de", "for", "von", "van"}:
        words = words[:-1]
    return " ".join(w.title() if w.isupper() and len(w) > 4 else w for w in words)


def _type(name: str, before: str) -> str:
    """A plausible type from cue words, the words before the name (a place after "in"), and its length."""
    lowered = [w.lower().strip(".") for w in name.split()]
    if _YEAR.fullmatch(name):
        return "date"
    if any(w in _ORGANISATION_CUES for w in lowered):
        return "organization"
    if any(w in _EVENT_CUES for w in lowered):
        return "event"
    if _PLACE_LEAD.search(before[-12:]):
        return "location"
    if 2 <= len(lowered) <= 3 and all(w[:1].isalpha() for w in lowered):
        return "person"
    return "concept"


def sentences(text: str) -> list[tuple[int, str]]:
    """(start offset, sentence) of every sentence and line of `text`."""
    return [(m.start(), m.group().strip()) for m in _SENTENCE.finditer(text) if m.group().strip()]


def extract_graph(text: str, skip: int = 0, limit: int | None = None) -> Graph:
    """Entities ranked `skip` to `skip + limit` of `text` (default limit: one per 12 words, 4 to 25) and the
    relations among the entities ranked before `skip + limit` that involve at least one of them."""
    found: dict[str, list[Any]] = {}  # key → [name, type, count, first offset]
    for match in _SPEAKER.finditer(text):
        name = _name(match.group(1))
        if name:
            entry = found.setdefault(name.lower(), [name, "person", 0, match.start()])
            entry[1] = "person"
            entry[2] += 1
    for pattern in (_CAPITALISED, _YEAR):
        for match in pattern.finditer(text):
            name = _name(match.group())
            if len(name) < 2 or (len(name) < 3 and not name.isupper()):
                continue
            key = name.lower()
            if key not in found:
                found[key] = [name, _type(name, text[: match.start()]), 0, match.start()]
            found[key][2] += 1
    ranked = sorted(found.values(), key=lambda entry: (-entry[2], entry[3]))
    cap = limit if limit is not None else max(4, min(25, len(text.split()) // 12))
    if len(ranked) < skip + cap:  # then topics: content words said at least twice, as a model lists concepts
        words = Counter(
            w
            for w in _WORD.findall(text.lower())
            if len(w) >= 6 and w not in _STOPWORDS and not w.endswith("ly") and "'" not in w and "’" not in w
        )
        named = {part for key in found for part in key.split()}
        topics = [w for w, n in words.most_common() if n >= 2 and w not in named]
        ranked += [[w, "concept", words[w], text.lower().find(w)] for w in topics[: skip + cap - len(ranked)]]
    known = ranked[: skip + cap]
    chosen = {entry[0].lower() for entry in known[skip:]}
    spans = sentences(text)

    def context(name: str) -> str:
        for _, sentence in spans:
            if name.lower() in sentence.lower():
                return sentence
        return ""

    entities = tuple(
        Entity(entry[0], entry[1], f"{entry[0]} ({entry[1]}), mentioned: {clip(context(entry[0]), 30)}")
        for entry in known[skip:]
    )
    keys = {entry[0].lower(): entry[0] for entry in known}
    pairs: Counter[tuple[str, str]] = Counter()
    said: dict[tuple[str, str], str] = {}
    for index in range(len(spans)):  # a sentence and the next one: what a reader relates
        sentence = " ".join(s for _, s in spans[index : index + 2])
        lowered = sentence.lower()
        present = sorted((lowered.find(k), k) for k in keys if k in lowered)
        names = [k for _, k in present]
        for at in range(1, len(names)):
            for a, b in {(names[at - 1], names[at]), (names[0], names[at])}:
                if a != b and (a in chosen or b in chosen):
                    pair = (a, b) if a <= b else (b, a)
                    pairs[pair] += 1
                    said.setdefault(pair, sentence)
    relations = []
    for (a, b), count in pairs.most_common(max(2, int(len(entities) * 1.5))):
        sentence = said[(a, b)]
        content = [w for w in _WORD.findall(sentence.lower()) if w not in _STOPWORDS and len(w) > 3]
        keywords = ", ".join(word for word, _ in Counter(content).most_common(2)) or "co-occurrence"
        relations.append(
            Relation(
                keys[a], keys[b], f"{keys[a]} and {keys[b]}: {clip(sentence, 25)}", keywords, min(10, 2 + 2 * count)
            )
        )
    return Graph(entities, tuple(relations))


# -- answer formats -----------------------------------------------------------------------------------------------


def graphrag_tuples(graph: Graph, *, quoted: bool, upper: bool, types: dict[str, str] | None = None) -> str:
    """GraphRAG's tuple format (ours unquoted, nano-graphrag's with quoted fields and upper-case names)."""

    def field(value: str) -> str:
        return f'"{value}"' if quoted else value

    def name(value: str) -> str:
        return field(value.upper() if upper else value)

    label_entity, label_relation = field("entity"), field("relationship")
    records = [
        f"({label_entity}<|>{name(e.name)}<|>{field((types or {}).get(e.type, e.type))}<|>{field(e.description)})"
        for e in graph.entities
    ]
    records += [
        f"({label_relation}<|>{name(r.source)}<|>{name(r.target)}<|>{field(r.description)}<|>{r.strength})"
        for r in graph.relations
    ]
    return "##\n".join(records) + "\n<|COMPLETE|>"


def lightrag_lines(graph: Graph) -> str:
    types = {"organization": "Organization", "person": "Person", "location": "Location", "event": "Event"}
    lines = [f"entity<|#|>{e.name}<|#|>{types.get(e.type, 'Concept')}<|#|>{e.description}" for e in graph.entities]
    lines += [f"relation<|#|>{r.source}<|#|>{r.target}<|#|>{r.keywords}<|#|>{r.description}" for r in graph.relations]
    return "\n".join([*lines, "<|COMPLETE|>"])


def community_report(names: Sequence[str], relations: Sequence[str]) -> str:
    """One JSON report over a community's entity names and relation descriptions."""
    top = [n for n in names if n][:3] or ["Unnamed entities"]
    findings = [
        {"summary": f"{name} is central to this community", "explanation": clip(rel, 40) or f"{name} links others."}
        for name, rel in zip(top, [*relations, "", "", ""], strict=False)
    ]
    report = {
        "title": " and ".join(top),
        "summary": f"A community of {len(names)} entities around {', '.join(top)}. " + clip(" ".join(relations), 60),
        "rating": round(min(10.0, 2.0 + len(names) / 2), 1),
        "rating_explanation": f"Rated by its size ({len(names)} entities) and connections.",
        "findings": findings,
    }
    return json.dumps(report)


def summary(name: str, descriptions: Sequence[str]) -> str:
    return f"{clip(name, 12)}: " + clip(" ".join(descriptions), 80)


def query_keywords(query: str) -> str:
    graph = extract_graph(query, limit=8)
    low = [e.name for e in graph.entities]
    high = [w for w in dict.fromkeys(_WORD.findall(query.lower())) if w not in _STOPWORDS and len(w) > 3][:4]
    return json.dumps({"high_level_keywords": high, "low_level_keywords": low})


# -- recognising the prompt ------------------------------------------------------------------------------------


def _between(text: str, start: str, end: str) -> str | None:
    begin = text.rfind(start)
    if begin < 0:
        return None
    begin += len(start)
    stop = text.find(end, begin)
    return text[begin : stop if stop >= 0 else len(text)]


def _contents(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (str(m.get("role")), str(m.get("content") or ""))
        for m in body.get("messages") or []
        if isinstance(m, dict) and isinstance(m.get("content"), str)
    ]


NANO_TYPES = {"location": "geo", "date": "event", "concept": "event"}


def answer(body: dict[str, Any]) -> tuple[str, str]:
    """(kind, answer text) for one /chat/completions body."""
    messages = _contents(body)
    if not messages:
        return "other", "OK"
    system = next((c for r, c in messages if r == "system"), "")
    last = messages[-1][1]
    users = [c for r, c in messages if r == "user"]
    first_user = users[0] if users else last
    # ours
    if system.startswith("You turn passages of text into knowledge-graph records"):
        passage = _between(last, "Passage:\n", "\nOutput:") or last
        return "ours_extract", graphrag_tuples(extract_graph(passage), quoted=False, upper=False)
    if "describing one community of a knowledge graph" in system:
        block = _between(last, "Entities (name | type | description):\n", "\nRelations") or ""
        names = [line.split(" | ")[0] for line in block.splitlines() if " | " in line]
        relations = [
            line.split(" | ")[-1] for line in (_between(last, "weight | description):\n", "\0") or "").splitlines()
        ]
        return "ours_community_report", community_report(names, relations)
    # nano-graphrag
    if last.startswith("MANY entities were missed in the last extraction"):
        passage = _between(first_user, "\nText: ", "\n######################\nOutput:") or ""
        graph = extract_graph(passage, skip=_cap(passage), limit=max(2, _cap(passage) // 2))
        return "nano_glean", graphrag_tuples(graph, quoted=True, upper=True, types=NANO_TYPES)
    if last.startswith("It appears some entities may have still been missed"):
        return "nano_loop", "NO"
    if "-Goal-\nGiven a text document that is potentially relevant" in last:
        passage = _between(last, "\nText: ", "\n######################\nOutput:") or ""
        return "nano_extract", graphrag_tuples(extract_graph(passage), quoted=True, upper=True, types=NANO_TYPES)
    if "Write a comprehensive report of a community" in last:
        block = _between(last, "-----Entities-----\n```csv\n", "\n```") or ""
        relation_block = _between(last, "-----Relationships-----\n```csv\n", "\n```") or ""
        names = [_csv_field(line, 1) for line in block.splitlines()[1:]]
        relations = [_csv_field(line, 3) for line in relation_block.splitlines()[1:]]
        return "nano_community_report", community_report(names, relations)
    if "generating a comprehensive summary of the data provided below" in last:
        name = _between(last, "Entities: ", "\n") or ""
        descriptions = (_between(last, "Description List: ", "\n#######") or "").split("<SEP>")
        return "nano_summary", summary(name, descriptions)
    # LightRAG
    if "Knowledge Graph Specialist responsible for extracting entities" in system:
        passage = _between(first_user, "---Input Text---\n```\n", "\n```") or ""
        if last.startswith("---Task---\nBased on the last extraction task"):
            cap = _cap(passage)
            return "lightrag_glean", lightrag_lines(extract_graph(passage, skip=cap, limit=max(2, cap // 2)))
        return "lightrag_extract", lightrag_lines(extract_graph(passage))
    if "proficient in data curation and synthesis" in last:
        name = _between(last, " Name: ", "\n") or ""
        descriptions = []
        for line in (_between(last, "Description List:\n\n```\n", "\n```") or "").splitlines():
            try:
                descriptions.append(str(json.loads(line).get("Description", "")))
            except (ValueError, AttributeError):
                descriptions.append(line)
        return "lightrag_summary", summary(name, descriptions)
    if "You are an expert keyword extractor" in last:
        return "lightrag_keywords", query_keywords(_between(last, "User Query: ", "\n") or "")
    return "other", "OK"


def _cap(passage: str) -> int:
    return max(4, min(25, len(passage.split()) // 12))


def _csv_field(line: str, index: int) -> str:
    fields = line.split(",\t")
    return fields[index].strip().strip('"') if len(fields) > index else ""


# -- the process ----------------------------------------------------------------------------------------------------


class Tally:
    """Calls and compute time per prompt kind (the responder runs on the server's one event-loop thread)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.answer_chars: Counter[str] = Counter()
        self.prompt_chars: Counter[str] = Counter()
        self._lock = threading.Lock()

    def record(self, kind: str, seconds: float, prompt_chars: int, answer_chars: int) -> None:
        with self._lock:
            self.calls[kind] += 1
            self.seconds[kind] += seconds
            self.prompt_chars[kind] += prompt_chars
            self.answer_chars[kind] += answer_chars

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            return {
                "calls": dict(self.calls),
                "total_calls": sum(self.calls.values()),
                "responder_cpu_s": {k: round(v, 3) for k, v in self.seconds.items()},
                "mean_prompt_chars": {k: round(self.prompt_chars[k] / n) for k, n in self.calls.items()},
                "mean_answer_chars": {k: round(self.answer_chars[k] / n) for k, n in self.calls.items()},
                "total_prompt_chars": sum(self.prompt_chars.values()),
                "total_answer_chars": sum(self.answer_chars.values()),
            }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--stats", type=Path, default=None, help="write call counts here at exit")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    tally = Tally()

    def respond(body: dict[str, Any]) -> Reply:
        started = time.process_time()
        kind, text = answer(body)
        prompt = sum(len(content) for _, content in _contents(body))
        tally.record(kind, time.process_time() - started, prompt, len(text))
        return Reply(tokens=[text], delay_s=args.delay)

    with ScriptedLLM(host=args.host, port=args.port, embedding_dim=384) as llm:
        llm.responder = respond
        print(f"READY {llm.base_url}", flush=True)
        while not stop.wait(0.5):
            with llm._lock:  # the server keeps every request it answered; nobody reads them here
                del llm._exchanges[:]
    if args.stats is not None:
        args.stats.write_text(json.dumps(tally.as_dict(), indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
