"""The one model-independent token estimate, and the word / CJK split it counts by.

Plain functions over text: the core (chunking) and the use cases (evidence and history budgets) measure
text the same way, so both take it from here.
"""

from __future__ import annotations

import re

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
