"""Page tokens, one format for every list, parsed in this one place: an opaque string naming its
list and the position after which the next page starts (a number and, where the number can
tie, a tiebreaking id). A token of another list, a number that is not finite or out of its
list's range, an id that is not one, or anything a client made by hand that is not a token
this server gives is refused here with INVALID_PAGE_TOKEN, before any list reads it."""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from dataclasses import dataclass
from enum import StrEnum

from server.errors import ServiceError

DEFAULT_PAGE = 20
MAX_PAGE = 100
TOKEN_MAX = 128  # characters: the longest token a position here makes is well under it
Position = tuple[float, str]
_ID = re.compile(r"[A-Za-z0-9_-]{0,64}")


class Listing(StrEnum):
    """The lists that page, each with the kind of position its tokens hold."""

    RECORDS = "r"  # (finish time, record id): GetGameRecords, newest first
    TABLES = "t"  # (the lobby's order or a cluster's creation time, table id)
    LEADERBOARD = "b"  # a place already shown (an offset)
    MY_GAMES = "g"  # (finish time, record id) of the caller's history
    CHAMPIONSHIPS = "c"  # an offset
    ADMIN_TABLES = "a"  # (-creation time in microseconds, table id)


# The numbers a position of each list may hold (a leaderboard's place, an offset: whole and
# not negative; times: any finite number an epoch second or microsecond can be).
_OFFSETS = {Listing.LEADERBOARD, Listing.CHAMPIONSHIPS}
OFFSET_MAX = 10_000_000
NUMBER_MAX = 1e17


@dataclass(frozen=True, slots=True)
class _Parsed:
    listing: str
    number: float
    text: str


def page_size(requested: int) -> int:
    """A page size from a request: 0 means 20, at most 100."""
    if requested < 0:
        raise ServiceError.invalid("page_size must not be negative", "INVALID_PAGE_SIZE")
    return min(requested or DEFAULT_PAGE, MAX_PAGE)


def encode(listing: Listing, position: Position) -> str:
    number, text = position
    raw = json.dumps([listing.value, number, text], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _refused() -> ServiceError:
    return ServiceError.invalid("page_token is not one this server gave for this list: "
                                "start from the first page (an empty page_token)",
                                "INVALID_PAGE_TOKEN")


def _parse(token: str) -> _Parsed:
    if len(token) > TOKEN_MAX:
        raise _refused()
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        listing, number, text = json.loads(raw.decode())
    except (binascii.Error, ValueError, TypeError, RecursionError):
        raise _refused() from None
    if not isinstance(listing, str) or isinstance(number, bool) \
            or not isinstance(number, (int, float)) or not isinstance(text, str):
        raise _refused()
    return _Parsed(listing, float(number), text)


def decode(listing: Listing, token: str) -> Position | None:
    """The position a page token of ``listing`` holds (None for the first page).

    :raises ServiceError: INVALID_PAGE_TOKEN (see the module's docstring).
    """
    if not token:
        return None
    parsed = _parse(token)
    if parsed.listing != listing.value or not math.isfinite(parsed.number) \
            or abs(parsed.number) > NUMBER_MAX or not _ID.fullmatch(parsed.text):
        raise _refused()
    if listing in _OFFSETS and (parsed.number != int(parsed.number)
                                or not 0 <= parsed.number <= OFFSET_MAX or parsed.text):
        raise _refused()
    return parsed.number, parsed.text


def decode_offset(listing: Listing, token: str) -> int:
    """The offset a page token of an offset list holds (0 for the first page)."""
    position = decode(listing, token)
    return 0 if position is None else int(position[0])


def offset_token(listing: Listing, offset: int) -> str:
    return encode(listing, (offset, ""))
