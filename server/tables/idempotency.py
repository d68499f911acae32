"""Idempotent retries (AIP-155): a request_id names one request, its method and content.

A retry with the same id and the same content gets the first successful answer; the same id
with other content is refused (INVALID_ARGUMENT, REQUEST_ID_REUSED) and applies nothing.
Refusals are not remembered, so a retry after TABLE_PAUSED can succeed.

JoinTable's answer holds a secret (the player token), which the server keeps only as a
hash. To answer a retried JoinTable, also after a restart, the log keeps the token sealed
under a key derived from the request_id, and finds the join by another digest of it: the
token can be recovered only by presenting the request_id, as a retry does. A JoinTable
request_id therefore must be unguessable (16 characters or more; use a random UUID).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from server.errors import ServiceError

REQUEST_ID_MAX = 64
JOIN_REQUEST_ID_MIN = 16


@dataclass(frozen=True, slots=True)
class Remembered:
    """A successful answer: the request's fingerprint and what it returned."""

    fingerprint: str
    answer: int | str
    """A seat or a sequence (an action, a join), a table id (a CreateTable)."""


def fingerprint(method: str, *content: object) -> str:
    """A digest of the method and what the request means (not how it was spelled: a card
    as text or as enums, a table given or implied by the token), request_id aside."""
    body = repr([method, *(sorted(c.items()) if isinstance(c, dict) else c for c in content)])
    return hashlib.sha256(body.encode()).hexdigest()[:32]


def check_reuse(remembered: Remembered | None, digest: str) -> Remembered | None:
    """The first answer to return for a retry, None for a new request; REQUEST_ID_REUSED
    when the id was used for another request."""
    if remembered is None:
        return None
    if not hmac.compare_digest(remembered.fingerprint, digest):
        raise ServiceError.invalid(
            "this request_id was already used for a different request; use a new id for a "
            "new request", "REQUEST_ID_REUSED")
    return remembered


def request_key(scope: str, request_id: str) -> str:
    """How a stored join or table creation is found from its request_id (not the id)."""
    return hashlib.sha256(f"copas-request\0{scope}\0{request_id}".encode()).hexdigest()[:32]


def _pad(scope: str, request_id: str, length: int) -> bytes:
    stream = b""
    counter = 0
    while len(stream) < length:
        stream += hashlib.sha256(
            f"copas-seal\0{scope}\0{request_id}\0{counter}".encode()).digest()
        counter += 1
    return stream[:length]


def seal(token: str, scope: str, request_id: str) -> str:
    raw = token.encode()
    return bytes(a ^ b for a, b in zip(raw, _pad(scope, request_id, len(raw)))).hex()


def unseal(sealed: str, scope: str, request_id: str) -> str:
    raw = bytes.fromhex(sealed)
    return bytes(a ^ b for a, b in zip(raw, _pad(scope, request_id, len(raw)))).decode()
