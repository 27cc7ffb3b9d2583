"""jieba, loaded once on first use (about a second) and quietly; only Chinese text ever loads it."""

from __future__ import annotations

import logging
import threading
import warnings
from functools import lru_cache
from typing import Any

_lock = threading.Lock()
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
    """The words of a run of CJK characters (jieba's default mode, HMM on for unknown names)."""
    return tuple(word for word in jieba_module().dt.cut(run) if word.strip())
