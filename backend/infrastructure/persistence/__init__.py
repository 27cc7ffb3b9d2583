"""Conversation-store adapters (SPEC §6): `postgres`, `sqlite` (embedded default) and `memory` (tests)."""
