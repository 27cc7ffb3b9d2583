"""The few settings the HTTP layer needs, handed over by the composition root."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from backend.domain.debug import DebugLevel


@dataclass(frozen=True, slots=True)
class ServerConfig:
    auth_mode: str = "api_key"  # "api_key" or "none" (development: user id from the request)
    api_keys: Mapping[str, str] = field(default_factory=dict, repr=False)  # key → user id; never printed
    sse_heartbeat_s: float = 15.0
    debug_level: DebugLevel = DebugLevel.STANDARD  # what `"debug": true` in a chat request means
    max_body_bytes: int = 1_048_576
    max_upload_bytes: int = 52_428_800  # document uploads (POST /api/v1/kbs/{kb}/documents)
    max_message_chars: int = 8000  # the longest question a chat turn takes: the use case checks, the API says it
    admin_users: frozenset[str] = frozenset()  # may create KBs and ingest or delete documents
    rate_limit_per_minute: int = 0  # API requests per caller and minute; 0: no limit
    rate_limit_burst: int = 20  # requests a caller may make at once before the per-minute rate applies

    @property
    def auth_enabled(self) -> bool:
        return self.auth_mode != "none"

    def limit_for(self, path: str) -> int:
        """Document uploads get their own, larger body limit."""
        return self.max_upload_bytes if _is_document_upload(path) else self.max_body_bytes


def _is_document_upload(path: str) -> bool:
    parts = path.strip("/").split("/")
    return len(parts) == 5 and parts[:3] == ["api", "v1", "kbs"] and parts[4] == "documents"
