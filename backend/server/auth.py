"""Who is calling: an API key (bearer token or X-API-Key) mapped to a user id.

In the documented development mode (`AUTH_MODE=none`) there are no keys and the user id comes
from the request itself; the run command only uses it on 127.0.0.1.
"""

from __future__ import annotations

import hmac
import re
from dataclasses import dataclass

from fastapi import Request

from backend.domain.errors import Forbidden, InvalidRequest, Unauthenticated
from backend.server.config import ServerConfig

USER_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")
DEV_USER = "anonymous"
_PRINCIPAL_STATE = "principal"


@dataclass(frozen=True, slots=True)
class Principal:
    """The authenticated caller, or `None` in development mode (any claimed user id is accepted)."""

    user_id: str | None
    is_admin: bool = False

    def require_admin(self) -> None:
        if not self.is_admin:
            raise Forbidden("this needs an admin: creating knowledge bases, ingesting and deleting documents")

    def resolve_user(self, claimed: str | None) -> str:
        if self.user_id is None:
            user = claimed or DEV_USER
            if not USER_ID_PATTERN.fullmatch(user):
                raise InvalidRequest("user_id must be 1-128 characters of letters, digits and . _ @ -")
            return user
        if claimed and claimed != self.user_id:
            # Credentials decide identity; a body cannot name someone else.
            raise InvalidRequest("user_id does not match the credentials; omit it when using an API key")
        return self.user_id


def _presented_key(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    api_key = request.headers.get("x-api-key", "").strip()
    return api_key or None


def _user_for_key(presented: str, keys: dict[str, str]) -> str | None:
    found = None
    for key, user in keys.items():
        # Compare against every key in constant time so timing does not reveal a prefix match.
        if hmac.compare_digest(key.encode(), presented.encode()):
            found = user
    return found


def authenticate(request: Request, config: ServerConfig) -> Principal:
    """The request's principal, found once: the rate limiter asks before the route does, and each asking
    compares the key with every configured one. Kept in the request's own state, never shared."""
    known = getattr(request.state, _PRINCIPAL_STATE, None)
    if isinstance(known, Principal):
        return known
    principal = _authenticate(request, config)
    setattr(request.state, _PRINCIPAL_STATE, principal)
    return principal


def _authenticate(request: Request, config: ServerConfig) -> Principal:
    if not config.auth_enabled:
        return Principal(None, is_admin=True)  # development mode: everyone is admin
    presented = _presented_key(request)
    if presented is None:
        raise Unauthenticated("missing credentials: send 'Authorization: Bearer <api key>' or 'X-API-Key'")
    user = _user_for_key(presented, dict(config.api_keys))
    if user is None:
        raise Unauthenticated("invalid API key")
    return Principal(user, is_admin=user in config.admin_users)
