"""Limits on what a request may carry, checked before anything else reads it.

Every string field has a length cap (names have their own policy, ``server.names``); error
messages and logs quote at most a short prefix of what a client sent.
"""

from __future__ import annotations

from server.errors import ServiceError

ID_MAX = 64  # table_id, record_id, request_id
PRESET_MAX = 16
PAGE_TOKEN_MAX = 128
SEED_MAX = 64


def check_length(field: str, value: str, limit: int, reason: str = "FIELD_TOO_LONG") -> str:
    if len(value) > limit:
        raise ServiceError.invalid(f"{field} is at most {limit} characters, got {len(value)}",
                                   reason)
    return value
