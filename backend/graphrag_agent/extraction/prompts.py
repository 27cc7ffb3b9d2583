"""The entity/relation extraction prompt: one call per chunk, answered in the GraphRAG tuple format.

The answer format is the one `tuples.parse_tuples` reads. The prompt is language-neutral: names stay
in the language and script of the source, so Chinese text yields Chinese entity names that match the
names in questions and in other chunks.
"""

from __future__ import annotations

from backend.graphrag_agent.extraction.base import ENTITY_TYPES
from backend.graphrag_agent.extraction.tuples import COMPLETION_MARKER, RECORD_DELIMITER, TUPLE_DELIMITER

_TYPES = ", ".join(ENTITY_TYPES)
_D = TUPLE_DELIMITER

SYSTEM_PROMPT = f"""You turn passages of text into knowledge-graph records.

From the passage the user gives, list:
1. Every entity the passage names or clearly talks about. Allowed types: {_TYPES}.
   Use "location" for any place, "work" for books, films, songs and other creations, "concept" for ideas,
   methods and topics, "other" when nothing else fits.
2. Every relationship the passage states or clearly implies between two of those entities.

Rules:
- Write each entity name as it appears in the passage, in the passage's own language and script. Never
  translate or transliterate names. Use the fullest name the passage gives (e.g. "Marie Curie" over "Curie").
- Write descriptions in the same language as the passage, using only facts from the passage.
- Relationship strength is a number from 1 (loose association) to 10 (explicit, central fact).
- Both ends of a relationship must also be listed as entities.
- The document title is context for resolving names; list it as an entity only if the passage is about it.

Output format, and nothing else (no headings, no numbering, no code fences):
("entity"{_D}<name>{_D}<type>{_D}<description>){RECORD_DELIMITER}
("relationship"{_D}<source name>{_D}<target name>{_D}<what links them>{_D}<strength>){RECORD_DELIMITER}
Separate records with {RECORD_DELIMITER} and finish with {COMPLETION_MARKER} on its own.

Example
Document title: Harbour Lights Festival
Passage: The Harbour Lights Festival was first held in Tromsø in 1994. Its founder, the painter Ingrid Vold,
ran it until she moved to the Lofoten Islands.
Output:
("entity"{_D}Harbour Lights Festival{_D}event{_D}Festival first held in Tromsø in 1994.){RECORD_DELIMITER}
("entity"{_D}Tromsø{_D}location{_D}Town where the Harbour Lights Festival was first held.){RECORD_DELIMITER}
("entity"{_D}1994{_D}date{_D}Year of the first Harbour Lights Festival.){RECORD_DELIMITER}
("entity"{_D}Ingrid Vold{_D}person{_D}Painter who founded and ran the Harbour Lights Festival.){RECORD_DELIMITER}
("entity"{_D}Lofoten Islands{_D}location{_D}Islands Ingrid Vold moved to.){RECORD_DELIMITER}
("relationship"{_D}Ingrid Vold{_D}Harbour Lights Festival{_D}Ingrid Vold founded and ran it.{_D}9){RECORD_DELIMITER}
("relationship"{_D}Harbour Lights Festival{_D}Tromsø{_D}The festival was first held in Tromsø.{_D}8){RECORD_DELIMITER}
("relationship"{_D}Harbour Lights Festival{_D}1994{_D}The festival began in 1994.{_D}6){RECORD_DELIMITER}
("relationship"{_D}Ingrid Vold{_D}Lofoten Islands{_D}Ingrid Vold moved to the Lofoten Islands.{_D}5)
{COMPLETION_MARKER}"""

_USER_TEMPLATE = """Document title: {title}
Passage:
{text}
Output:"""


def extraction_prompt(title: str, text: str) -> tuple[str, str]:
    """(system, user) messages asking for the entities and relationships of one chunk."""
    return SYSTEM_PROMPT, _USER_TEMPLATE.format(title=title.strip() or "(untitled)", text=text.strip())
