"""The one model-independent token estimate, the word / CJK split it counts by, and an answer's token usage.

Plain functions over text: the core (chunking) and the use cases (evidence and history budgets) measure
text the same way, so both take it from here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# The CJK scripts (Han, kana, Hangul): written without spaces, so counted by character, not by word.
CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
WORD_OR_CJK_RUN = re.compile(rf"[{CJK}]+|[^\W_{CJK}]+(?:['’][^\W_{CJK}]+)*", re.UNICODE)
_CJK_RUN = re.compile(rf"^[{CJK}]+$")


def is_cjk(token: str) -> bool:
    return bool(_CJK_RUN.match(token))


def estimate_tokens(text: str) -> int:
    """A model-independent token estimate: about 1.3 tokens per word, one per CJK character."""
    words = 0
    cjk_chars = 0
    for match in WORD_OR_CJK_RUN.finditer(text):
        token = match.group(0)
        if is_cjk(token):
            cjk_chars += len(token)
        else:
            words += 1
    punctuation = max(0, len(text.split()) - words) // 4
    return int(words * 1.3 + cjk_chars + punctuation) + (1 if text else 0)


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """The tokens one answer took: what its answerer was given (prompt) and what it wrote (completion).

    `counted` when no model reported them and they are `estimate_tokens` figures instead.
    """

    prompt_tokens: int
    completion_tokens: int
    counted: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @classmethod
    def estimated(cls, prompt: Iterable[str], completion: str) -> TokenUsage:
        """The estimate of the texts an answerer was given and of the answer it wrote."""
        return cls(sum(map(estimate_tokens, prompt)), estimate_tokens(completion), counted=True)
