"""Logging set-up with secrets masked in every record, whatever logger emitted it.

Masking happens where records are made (a log record factory), so every handler sees masked text: ours,
uvicorn's, a test's capture, anything a library or an operator attaches. The filter on our own handler
masks again, for records made without the factory (`logging.makeLogRecord`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from typing import Any

MASK = "***"
# Credentials that look like credentials even when we were never told their value: (pattern, replacement).
_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{6,}"), rf"\g<1>{MASK}"),
    (
        re.compile(r"(?i)((?:api[_-]?key|x-api-key|token|password|passwd|secret)[\"']?\s*[:=]\s*[\"']?)[^\s,'\"}&]+"),
        rf"\g<1>{MASK}",
    ),
    # A password in a URL's user info: postgresql://, bolt://, neo4j+s://, https://, ...
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^:/@\s]+:)[^@\s]+@"), rf"\g<1>{MASK}@"),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"), MASK),
)


def mask_secrets(text: str, secrets: Iterable[str] = ()) -> str:
    """Replace known secret values, then anything shaped like a credential."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text


def _usable(secrets: Iterable[str]) -> tuple[str, ...]:
    # Longest first, so a secret that contains another is masked whole; very short values would mask noise.
    return tuple(sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True))


def mask_record(record: logging.LogRecord, secrets: tuple[str, ...]) -> None:
    """Mask the message (with its arguments merged in), the traceback and the stack of `record`, in place."""
    try:
        message = record.getMessage()
    except Exception:  # arguments that do not fit the format: the handler reports that error as usual
        return
    masked = mask_secrets(message, secrets)
    if masked != message:
        record.msg, record.args = masked, None
    if record.exc_info:
        # Formatters reuse exc_text when it is set, so the traceback is rendered (masked) once, here.
        record.exc_text = mask_secrets(record.exc_text or logging.Formatter().formatException(record.exc_info), secrets)
    elif record.exc_text:
        record.exc_text = mask_secrets(record.exc_text, secrets)
    if record.stack_info:
        record.stack_info = mask_secrets(record.stack_info, secrets)


class SecretMaskingFilter(logging.Filter):
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self._secrets = _usable(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        mask_record(record, self._secrets)
        return True


class MaskingRecordFactory:
    """A log record factory that masks each record as it is made."""

    def __init__(self, base: Callable[..., logging.LogRecord], secrets: Iterable[str]) -> None:
        self.base = base
        self.secrets = _usable(secrets)

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record = self.base(*args, **kwargs)
        mask_record(record, self.secrets)
        return record


_CHATTY_CLIENT_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2")


class _ConsoleHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Our handler on the root logger, told apart from handlers that others attached."""


def configure_logging(level: str, secrets: Iterable[str] = ()) -> None:
    current = logging.getLogRecordFactory()
    base = current.base if isinstance(current, MaskingRecordFactory) else current  # configured again: replace
    logging.setLogRecordFactory(MaskingRecordFactory(base, secrets))
    handler = _ConsoleHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(SecretMaskingFilter(secrets))
    root = logging.getLogger()
    # Replace our own handler (configured again), keep the ones others attached (a test's log capture, say).
    for old in [h for h in root.handlers if isinstance(h, _ConsoleHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # The HTTP clients log every request at INFO; the model adapter already logs each model call, so at
    # INFO they would only double the lines (and their masking) on the answer path. DEBUG shows them.
    for chatty in _CHATTY_CLIENT_LOGGERS:
        logging.getLogger(chatty).setLevel(logging.NOTSET if root.level <= logging.DEBUG else logging.WARNING)
