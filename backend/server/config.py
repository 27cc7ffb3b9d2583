"""The few settings the HTTP layer needs, handed over by the composition root."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ServerConfig:
    auth_mode: str = "api_key"  # "api_key" or "none" (development: user id from the request)
    api_keys: Mapping[str, str] = field(default_factory=dict, repr=False)  # key → user id; never printed
    sse_heartbeat_s: float = 15.0
    max_body_bytes: int = 1_048_576

    @property
    def auth_enabled(self) -> bool:
        return self.auth_mode != "none"
