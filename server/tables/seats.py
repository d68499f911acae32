"""A table's seats: who holds each (a bot, or a person known by their token's hash), the
choice of a seat for a join and its checks, the --max-players slots its people hold, the
JoinTable requests that seated them and each seat's remembered request ids; at a quick-match
table, the reservations not yet taken up and who holds each seat (one seat per client); and
which people are away (docs/RULES.md, "Away seats")."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol, overload

from server.bounded import Bounded
from server.errors import ServiceError
from server.tables.idempotency import Remembered, check_reuse
from server.tables.log_entries import Joined
from server.tables.timers import TableTimers, TimerKind

REQUEST_MEMORY = 256  # successful request_ids remembered per seat
AWAY_AFTER_TIMEOUTS = 2  # timeouts in a row that make a person away


def revoked(by_operator: bool, is_expired: bool) -> ServiceError:
    """Why a seat given up before its game ends its token's streams."""
    if is_expired:
        return ServiceError.unauthenticated(
            "your quick-match seat was reserved for you to connect (open a WatchTable or "
            "Play stream with its token) and you did not in time: it went back; join again",
            "RESERVATION_EXPIRED")
    why = "an operator removed you from this table" if by_operator else "you left this table"
    return ServiceError.unauthenticated(f"{why}: your player token is no longer valid",
                                        "TOKEN_REVOKED")


class Slots(Protocol):
    """Who counts the --max-players slots (the table's host)."""

    def slot_taken(self) -> None: ...
    def slot_freed(self) -> None: ...


class Seat:
    """One seat: who holds it (a bot, or a person known by their token's hash)."""

    __slots__ = ("account_id", "address", "has_acted", "has_streamed", "holds_slot", "is_away",
                 "is_bot", "is_taken", "join_key", "log_n", "name", "network", "number",
                 "own_cards", "requests", "reserved_until", "timeouts_in_row", "token_hash")

    def __init__(self, number: int) -> None:
        self.number = number
        self.name = ""
        self.is_taken = False
        self.is_bot = False
        self.token_hash = ""
        self.account_id = ""  # the signed-in account seated here ("" anonymous, or a bot)
        self.log_n = 0  # the position of its join in the table's log
        self.join_key = ""
        self.holds_slot = False  # counts against --max-players
        # An anonymous person's address at a quick-match table ("" otherwise): one seat each.
        self.address = ""
        self.reserved_until: float | None = None  # a quick-match seat not yet taken up
        self.has_streamed = False  # its person had a stream open (live only, never logged)
        self.is_away = False
        self.timeouts_in_row = 0
        self.has_acted = False  # its person made a move of their own (a no-show's never does)
        self.own_cards = 0  # cards its person played themselves (not on a timeout, away, left)
        self.network = ""  # its signed-in person's network tag (Joined.network)
        # request_id -> its first answer, for retries
        self.requests: Bounded[str, Remembered] = Bounded(REQUEST_MEMORY)


# The bots' names, by seat: names people give (a person may not take "Bot 2", the server's
# old names, still kept for bots; SeatSummary.is_bot says who is one).
BOT_NAMES = ("Ada", "Basil", "Cleo", "Dario", "Esme", "Fabio")  # a seat each, up to 6


def bot_joined(seq: int, number: int, at: float) -> Joined:
    """The log entry of a bot taking the free seat ``number``: a join without a token (a
    rematch's seat nobody claimed in time, ``server.tables.rematch``)."""
    return Joined(seq, number, BOT_NAMES[number], "", at=at)


class Seats(Sequence[Seat]):
    """The seats of one table, by number; the last ``bot_seats`` are the bots'. A slot is
    taken from ``slots`` when a person sits and given back exactly once."""

    def __init__(self, players: int, bot_seats: int, slots: Slots) -> None:
        self._seats = [Seat(i) for i in range(players)]
        for seat in self._seats[players - bot_seats:]:
            seat.is_taken, seat.is_bot, seat.name = True, True, BOT_NAMES[seat.number]
        self._slots = slots
        self._joins: dict[str, tuple[Remembered, str]] = {}  # key -> (seat, sealed token)

    @overload
    def __getitem__(self, index: int) -> Seat: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Seat]: ...
    def __getitem__(self, index: int | slice) -> Seat | Sequence[Seat]:
        return self._seats[index]

    def __len__(self) -> int:
        return len(self._seats)

    def __iter__(self) -> Iterator[Seat]:
        return iter(self._seats)

    # ------------------------------------------------------------ reading

    def has_free_seat(self) -> bool:
        return any(not s.is_taken for s in self._seats)

    def is_full(self) -> bool:
        return all(s.is_taken for s in self._seats)

    def any_bot(self, numbers: Iterable[int]) -> bool:
        """Whether a bot holds one of the seats ``numbers``."""
        return any(self._seats[n].is_bot for n in numbers)

    def people_among(self, numbers: Iterable[int]) -> list[int]:
        """The seats of ``numbers`` that a person holds (or held, if they left)."""
        return [n for n in numbers if not self._seats[n].is_bot]

    def token_hashes(self) -> list[str]:
        """The tokens of the seats' current holders."""
        return [s.token_hash for s in self._seats if s.token_hash]

    def join_keys(self) -> list[str]:
        """The JoinTable request keys that seated its people."""
        return [s.join_key for s in self._seats if s.join_key]

    def is_ready(self) -> bool:
        """Every seat is taken, and taken up: the game may start."""
        return self.is_full() and not any(s.reserved_until is not None for s in self._seats)

    # ------------------------------------------------------------ checks

    def choose(self, number: int | None, account_id: str = "") -> Seat:
        """The seat a join takes: ``number``, else the first free one (``account_id``, if
        given, holding none here yet).

        :raises ServiceError: INVALID_SEAT, SEAT_TAKEN, TABLE_FULL, ACCOUNT_ALREADY_SEATED.
        """
        self.check_account(account_id)
        if number is not None:
            self._check_number(number)
            if self._seats[number].is_taken:
                raise ServiceError.precondition(f"seat {number} is taken", "SEAT_TAKEN")
            return self._seats[number]
        free = next((s for s in self._seats if not s.is_taken), None)
        if free is None:
            raise ServiceError.exhausted("the table is full", "TABLE_FULL")
        return free

    def check_one_each(self, account_id: str, address: str, limit: int) -> None:
        """A quick-match table seats one client at most ``limit`` times (0: no limit): an
        anonymous person is known by their address (a signed-in one by their account, which
        holds one seat of any table: ``check_account``).

        :raises ServiceError: ALREADY_SEATED.
        """
        if account_id or not address or not limit:
            return
        held = sum(1 for s in self._seats if s.is_taken and not s.is_bot
                   and not s.account_id and s.address == address)
        if held >= limit:
            raise ServiceError.precondition(
                "you already hold a seat at this quick-match table: one seat each; play the "
                "one you have", "ALREADY_SEATED")

    def person_at(self, number: int) -> Seat:
        """The seat ``number``, which a person holds now (an operator may remove them).

        :raises ServiceError: INVALID_SEAT, NOT_A_PERSON (free, a bot's, or removed).
        """
        self._check_number(number)
        seat = self._seats[number]
        if not seat.is_taken or seat.is_bot or not seat.token_hash:
            raise ServiceError.precondition(
                f"seat {number} holds no person (it is free, a bot's, or its person "
                "was removed already)", "NOT_A_PERSON")
        return seat

    def _check_number(self, number: int) -> None:
        if not 0 <= number < len(self._seats):
            raise ServiceError.invalid(f"seat must be 0..{len(self._seats) - 1}",
                                       "INVALID_SEAT")

    # ------------------------------------------------------------ people come and go

    def seat_person(self, number: int, name: str, token_hash: str, log_n: int,
                    join_key: str = "", fingerprint: str = "", sealed_token: str = "",
                    account_id: str = "", address: str = "", network: str = "") -> Seat:
        """A person (signed in as ``account_id``, or anonymous from ``address`` at a
        quick-match table) sits at the free seat ``number`` (its join at ``log_n`` in the
        log) and takes a slot; ``join_key`` (with the request's fingerprint and sealed token)
        lets a retried join find them. No ``token_hash``: a bot takes the seat (a rematch's
        seat nobody claimed in time, ``server.tables.rematch``), without a slot."""
        seat = self._seats[number]
        if not token_hash:
            seat.is_taken, seat.is_bot, seat.name, seat.log_n = True, True, name, log_n
            return seat
        seat.is_taken, seat.name, seat.token_hash, seat.log_n = True, name, token_hash, log_n
        seat.account_id, seat.address, seat.network = account_id, address, network
        seat.holds_slot, seat.has_acted = True, False
        self._slots.slot_taken()
        if join_key:
            seat.join_key = join_key
            self._joins[join_key] = (Remembered(fingerprint, number), sealed_token)
        return seat

    def vacate(self, number: int) -> Seat:
        """A person gives the seat up before the game: it is free again (its slot given
        back, its join forgotten, its requests too); the seat as it was."""
        seat = self._seats[number]
        self._joins.pop(seat.join_key, None)
        self.free_slot(number)
        self._seats[number] = Seat(number)
        return seat

    def streamed(self, number: int) -> bool:
        """The person at ``number`` opened a stream; whether it takes up their reservation."""
        seat = self._seats[number]
        seat.has_streamed = True
        return seat.reserved_until is not None

    def acted(self, number: int, *, is_card: bool = False) -> None:
        """The person acted (``is_card``: played a card): not away, no timeout in a row, not a
        no-show."""
        seat = self._seats[number]
        seat.is_away, seat.timeouts_in_row, seat.has_acted = False, 0, True
        seat.own_cards += is_card

    def timed_out(self, number: int, *, is_away_play: bool) -> None:
        """The seat's turn was played for it: by its clock (away after two in a row), or at
        once because it was away (it stays away)."""
        seat = self._seats[number]
        seat.timeouts_in_row += 1
        if is_away_play or seat.timeouts_in_row >= AWAY_AFTER_TIMEOUTS:
            seat.is_away = True

    def revoke(self, number: int) -> tuple[str, str]:
        """An operator removes the person at ``number`` from a running game: the seat keeps
        its name (the server plays it) but no token; (token hash, join key) it had."""
        seat = self._seats[number]
        token_hash, join_key = seat.token_hash, seat.join_key
        seat.token_hash = seat.join_key = ""
        self._joins.pop(join_key, None)
        return token_hash, join_key

    def free_slot(self, number: int) -> None:
        """The one place a slot is given back (once: again is a no-op)."""
        seat = self._seats[number]
        if seat.holds_slot:
            seat.holds_slot = False
            self._slots.slot_freed()

    def free_all_slots(self) -> None:
        for seat in self._seats:
            self.free_slot(seat.number)

    # ------------------------------------------------------------ retried requests

    def check_account(self, account_id: str) -> None:
        """One seat per person: an account seated here already may not take another.

        :raises ServiceError: FAILED_PRECONDITION ACCOUNT_ALREADY_SEATED.
        """
        if account_id and any(s.account_id == account_id for s in self._seats):
            raise ServiceError.precondition(
                "your account already holds a seat at this table", "ACCOUNT_ALREADY_SEATED")

    def recall_join(self, join_key: str, fingerprint: str) -> tuple[int, str] | None:
        """A retried join: (seat, sealed token) of the first, or None when not known.

        :raises ServiceError: the request id was used for another request.
        """
        known = self._joins.get(join_key)
        if known is None:
            return None
        check_reuse(known[0], fingerprint)
        return int(known[0].answer), known[1]

    def recall(self, number: int, request_id: str, fingerprint: str) -> int | None:
        """The first answer to a retried request of seat ``number``, or None when new.

        :raises ServiceError: the request id was used for another request.
        """
        known = check_reuse(self._seats[number].requests.get(request_id), fingerprint)
        return int(known.answer) if known is not None else None

    def remember(self, number: int, request_id: str, fingerprint: str, answer: int) -> None:
        """Keep a successful request's answer for its retries (the last REQUEST_MEMORY of
        the seat's; a seat given up keeps none)."""
        seat = self._seats[number]
        if seat.is_taken:
            seat.requests[request_id] = Remembered(fingerprint, answer)


class Reservations:
    """A quick-match table's seats not yet taken up (a stream opened with their token), each
    until --reservation-seconds after its join, and one timer for the first to fall due."""

    __slots__ = ("_on_due", "_seats", "_seconds", "_timers")

    def __init__(self, seats: Seats, timers: TableTimers, seconds: float,
                 on_due: Callable[[], None]) -> None:
        self._seats, self._timers, self._seconds, self._on_due = seats, timers, seconds, on_due

    def reserve(self, number: int, at: float, *, is_live: bool) -> None:
        """The seat ``number``, joined ``at``, waits to be taken up (``is_live``: its timer
        runs; a replay's is armed at resumption)."""
        self._seats[number].reserved_until = at + self._seconds
        if is_live:
            self.arm()

    def take_up(self, number: int) -> bool:
        """The seat is taken up; whether the game may start now."""
        self._seats[number].reserved_until = None
        return self._seats.is_ready()

    def arm(self) -> None:
        """The timer of the first reservation to fall due (none when none waits)."""
        due = min((s.reserved_until for s in self._seats if s.reserved_until is not None),
                  default=None)
        if due is not None:
            self._timers.arm(TimerKind.RESERVATION, due - self._timers.now(), self._on_due,
                             due=due)

    def due(self) -> list[int]:
        """The seats whose reservations have run out."""
        now = self._timers.now()
        return [s.number for s in self._seats
                if s.reserved_until is not None and s.reserved_until <= now]
