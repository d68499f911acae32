"""Limits on what a request may carry, checked before anything else reads it.

Every string field has a length cap; names are NFC-normalised and may not hold control,
format (bidi overrides, zero-width) or unassigned characters; error messages and logs quote
at most a short prefix of what a client sent.
"""

from __future__ import annotations

import re
import unicodedata

from server.errors import ServiceError

ID_MAX = 64  # table_id, record_id, request_id
PRESET_MAX = 16
PAGE_TOKEN_MAX = 128
SEED_MAX = 64
TABLE_NAME_MAX = 64
PLAYER_NAME_MAX = 32
_FORBIDDEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
# Letters that show nothing (Hangul fillers, the braille blank).
_BLANK = {"\u115f", "\u1160", "\u3164", "\uffa0", "\u2800"}
_MARKS = {"Mn", "Me", "Mc"}
_BOT_NAME = re.compile(r"bot\s*\d+", re.IGNORECASE)


def check_length(field: str, value: str, limit: int, reason: str = "FIELD_TOO_LONG") -> str:
    if len(value) > limit:
        raise ServiceError.invalid(f"{field} is at most {limit} characters, got {len(value)}",
                                   reason)
    return value


def display_name(value: str, limit: int, *, required: bool) -> str:
    """A name people will see: trimmed, NFC, printable, 1..limit characters (or empty when
    not ``required``)."""
    check_length("display_name", value, limit * 4, "INVALID_NAME")
    name = unicodedata.normalize("NFC", value).strip()
    if not name and required:
        raise ServiceError.invalid(f"display_name must be 1..{limit} characters",
                                   "INVALID_NAME")
    if len(name) > limit:
        raise ServiceError.invalid(f"display_name is at most {limit} characters",
                                   "INVALID_NAME")
    bad = next((c for c in name if unicodedata.category(c) in _FORBIDDEN or c in _BLANK),
               None)
    if bad is not None:
        raise ServiceError.invalid(
            f"display_name may not contain control, formatting or blank characters "
            f"(U+{ord(bad):04X})", "INVALID_NAME")
    marks = 0
    for c in name:
        marks = marks + 1 if unicodedata.category(c) in _MARKS else 0
        if marks > 3:
            raise ServiceError.invalid("display_name stacks too many accents on one letter",
                                       "INVALID_NAME")
    if name and (not any(not c.isspace() and unicodedata.category(c) not in _MARKS
                         for c in name)):
        raise ServiceError.invalid("display_name must show something", "INVALID_NAME")
    if required and _BOT_NAME.fullmatch(name):
        raise ServiceError.invalid("names like 'Bot 2' are the server's bots'", "NAME_RESERVED")
    return name
