"""jieba, loaded once on first use (about a second) and quietly; only Chinese text ever loads it."""

from __future__ import annotations

import logging
import threading
import warnings
from functools import lru_cache
from typing import Any

_lock = threading.Lock()
# Characters that end no name: the copula, the passive and the particles jieba's HMM joins to an unknown name.
_FUNCTION_ENDS = frozenset("是被的了")
_loaded: Any = None


def jieba_module() -> Any:
    """The initialised `jieba` module (its default tokenizer `jieba.dt` and `jieba.posseg.dt`)."""
    global _loaded  # a process-wide, read-only dictionary: loading it twice would only cost time
    with _lock:
        if _loaded is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # jieba imports pkg_resources and has old regex escapes
                import jieba  # type: ignore[import-untyped]
                import jieba.posseg  # type: ignore[import-untyped]
            jieba.setLogLevel(logging.WARNING)  # no "Building prefix dict ..." on stderr
            jieba.initialize()
            _loaded = jieba
        return _loaded


@lru_cache(maxsize=8192)
def chinese_words(run: str) -> tuple[str, ...]:
    """The words of a run of CJK characters (jieba's default mode, HMM on for unknown names).

    jieba's HMM joins an unknown name to the copula, passive or particle after it (潘淑是谁: 潘淑是; 潘淑被立为:
    潘淑被); a word its dictionary does not hold that ends in one is read as the word before it and that one."""
    jieba = jieba_module()
    words: list[str] = []
    for word in jieba.dt.cut(run):
        if not word.strip():
            continue
        if len(word) > 1 and word[-1] in _FUNCTION_ENDS and word not in jieba.dt.FREQ:
            words.extend((word[:-1], word[-1]))
        else:
            words.append(word)
    return tuple(words)
