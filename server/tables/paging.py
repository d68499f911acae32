"""Page tokens, one format for every list: an opaque string holding the position after which
the next page starts (a number and, where the number can tie, a tiebreaking id)."""

from __future__ import annotations

import base64

from server.errors import ServiceError

DEFAULT_PAGE = 20
MAX_PAGE = 100
Position = tuple[float, str]


def page_size(requested: int) -> int:
    """A page size from a request: 0 means 20, at most 100."""
    if requested < 0:
        raise ServiceError.invalid("page_size must not be negative", "INVALID_PAGE_SIZE")
    return min(requested or DEFAULT_PAGE, MAX_PAGE)


def encode(position: Position) -> str:
    number, text = position
    return base64.urlsafe_b64encode(f"{number!r}|{text}".encode()).decode()


def decode(token: str) -> Position | None:
    """The position a page token holds (None for the first page); INVALID_ARGUMENT when it
    is not a token this server gave."""
    if not token:
        return None
    try:
        number, separator, text = base64.urlsafe_b64decode(token.encode()).decode() \
            .partition("|")
        if not separator:
            raise ValueError("no separator")
        return float(number), text
    except ValueError:  # bad base64, bad UTF-8 and a bad number are all ValueErrors
        raise ServiceError.invalid("page_token is not one this server gave",
                                   "INVALID_PAGE_TOKEN") from None
