"""Player tokens: bearer secrets made with ``secrets.token_urlsafe``, kept by the server only as
their SHA-256 (the one hash every part of the server uses)."""

from __future__ import annotations

import hashlib
import secrets


def new_token() -> str:
    return secrets.token_urlsafe(24)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
