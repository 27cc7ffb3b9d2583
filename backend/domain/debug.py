"""How much a request records about its own execution (SPEC §10, the debug middleware)."""

from __future__ import annotations

from enum import StrEnum


class DebugLevel(StrEnum):
    """off: nothing; basic: stage timings; standard: plus the route, each retrieval and each model call
    (texts truncated); full: everything, untruncated."""

    OFF = "off"
    BASIC = "basic"
    STANDARD = "standard"
    FULL = "full"

    def at_least(self, other: DebugLevel) -> bool:
        return _ORDER[self] >= _ORDER[other]

    @classmethod
    def requested(cls, asked: bool | DebugLevel, server_default: DebugLevel) -> DebugLevel:
        """What a request's `debug` asks for: a level as given, true for the server's DEBUG_LEVEL, false for off."""
        if isinstance(asked, DebugLevel):
            return asked
        return server_default if asked else cls.OFF


_ORDER = {level: rank for rank, level in enumerate(DebugLevel)}
