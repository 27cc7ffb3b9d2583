"""Logging set-up with secrets masked in every record, whatever logger emitted it."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

MASK = "***"
# Credentials that look like credentials even when we were never told their value: (pattern, replacement).
_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{6,}"), rf"\g<1>{MASK}"),
    (
        re.compile(r"(?i)((?:api[_-]?key|x-api-key|token|password|passwd|secret)[\"']?\s*[:=]\s*[\"']?)[^\s,'\"}&]+"),
        rf"\g<1>{MASK}",
    ),
    (re.compile(r"(postgres(?:ql)?://[^:/@\s]+:)[^@\s]+@"), rf"\g<1>{MASK}@"),
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


class SecretMaskingFilter(logging.Filter):
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self._secrets = tuple(sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True))

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = mask_secrets(message, self._secrets)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = mask_secrets(logging.Formatter().formatException(record.exc_info), self._secrets)
        return True


def configure_logging(level: str, secrets: Iterable[str] = ()) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(SecretMaskingFilter(secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
