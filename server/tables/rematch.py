"""Rematches: the same people at the same seats of a new table after a finished game.

The first person of a finished game to ask makes the rematch table (the old one's name,
preset, rules, bot seats, bot policy, rating and bot pace; a new deal); the old table points
to it from then on (``rematch_of``). Each person of the old game who asks is seated at their
old seat there; their old seat's token proves who they are (and carries their account, if
they were signed in). The people's seats are kept for them alone for ``--rematch-window``
seconds (JoinTable is refused there meanwhile); then a bot takes each seat nobody claimed,
and the game starts (at once when everyone accepted: the seats are full).

What it holds is bounded: one rematch per table, pointers for at most 10,000 old tables
(the oldest forgotten first), one window timer per rematch table, cancelled once it starts.
The pointer is the rematch table's own (``TableMeta.rematch_of``, in its log's meta): after a
restart the old table points to it again, and a rematch not yet started keeps its seats for
its people, its window started again at the first call that meets it.
"""

from __future__ import annotations

import dataclasses
import secrets

from copas.v1 import copas_pb2

from server.errors import ServiceError
from server.tables import views
from server.tables.clock import Handle
from server.tables.idempotency import fingerprint
from server.tables.registry import TableRegistry
from server.tables.table import Table
from server.wire import timestamp


def offered(old: Table) -> None:
    """Stage the ``rematch_offered`` event for every stream of ``old`` (a finished game whose
    rematch was just made; none open: nothing). Live and not numbered, as a reaction: a
    stream opened later reads the rematch in its view (``rematch_table_id``)."""
    seats = old.fanout.seats_watching()
    if not seats:
        return
    event = copas_pb2.TableEvent(
        sequence=old.sequence, time=timestamp(old.now()), is_last_in_action=True,
        rematch_offered=copas_pb2.RematchOffered(table_id=old.rematch_id))
    shared = views.public_bytes(old)
    old.fanout.stage_live((old.sequence, event.SerializeToString()),
                          {s: views.view_bytes(old, shared, s) for s in seats})


class Rematches:
    """Every rematch this node made: old table -> rematch table, and the open windows."""

    def __init__(self, registry: TableRegistry, window: float) -> None:
        self._registry = registry
        self._window = window
        self._windows: dict[str, Handle] = {}  # rematch table -> its window's end

    def rematch_of(self, table_id: str) -> str:
        """The rematch table of ``table_id`` ("" when none was asked for)."""
        return self._registry.rematch_tables.get(table_id) or ""

    def check_joinable(self, table_id: str) -> None:
        """JoinTable at a rematch whose seats are still kept for its people.

        :raises ServiceError: PERMISSION_DENIED REMATCH_SEAT_RESERVED."""
        if self._registry.holds(table_id):
            self._keep_window(self._registry.get(table_id))
        if table_id in self._windows:
            raise ServiceError.denied(
                "this table is a rematch: its seats are kept for the people of the game "
                "before it (they take them with Rematch); bots take the rest soon",
                "REMATCH_SEAT_RESERVED")

    def accept(self, token_hash: str | None, account_id: str, table_id: str, request_id: str,
               address: str) -> tuple[Table, int, str]:
        """Seat the person holding ``token_hash`` (a seat's token of ``table_id``, a finished
        game), or signed in as ``account_id``, at their old seat of its rematch (made now if
        none was); returns (table, seat, token). A retry with the same request_id gets the
        same seat and token (the same request_id from another seat is REQUEST_ID_REUSED). A
        refused first call makes no rematch.

        :raises ServiceError: NOT_FOUND (the table, or its rematch gone); UNAUTHENTICATED
            without a token; PERMISSION_DENIED NOT_SEATED_THERE, SEAT_HAS_LEFT;
            FAILED_PRECONDITION GAME_NOT_OVER, REMATCH_ALREADY_ACCEPTED, REMATCH_STARTED."""
        old = self._registry.get(table_id)
        number = self._seat_of(old, token_hash, account_id)
        if not old.is_finished:
            raise ServiceError.precondition("the game is not over: ask for its rematch once it "
                                            "ended", "GAME_NOT_OVER")
        if old.game is not None and old.game.has_left[number]:
            raise ServiceError.denied("you left that game: a rematch is for the people who "
                                      "played it to its end", "SEAT_HAS_LEFT")
        rematch_id = self._registry.rematch_tables.get(old.id)
        is_new = rematch_id is None
        table = self._make(old, address) if is_new else self._registry.get(str(rematch_id))
        self._keep_window(table)
        seat = old.seats[number]
        try:
            _, number, token = self._registry.join(
                table.id, seat.name, number, request_id,
                fingerprint("Rematch", old.id, number) if request_id else "",
                account_id=seat.account_id, address=address)
        except ServiceError as error:
            if is_new:  # nobody is seated there: no rematch was made
                self._drop(table.id)
            raise self._refusal(table, number, error) from None
        if table.game is not None:
            self._close_window(table.id)  # everyone is back: it started
        return table, number, token

    def _seat_of(self, old: Table, token_hash: str | None, account_id: str) -> int:
        """The old seat of the token's holder, or of the account."""
        if token_hash is None and not account_id:
            raise ServiceError.unauthenticated(
                "send your player token of that game (or your account's access token): "
                "'authorization: Bearer <token>'")
        if account_id:
            found = next((s.number for s in old.seats if s.account_id == account_id
                          and not s.is_bot), None)
        else:
            entry = self._registry.seating.seat_of(token_hash or "")
            found = entry[1] if entry is not None and entry[0] == old.id else None
        if found is None:
            raise ServiceError.denied("only the people seated at that game take part in its "
                                      "rematch: send your token of that table",
                                      "NOT_SEATED_THERE")
        return found

    def _make(self, old: Table, address: str) -> Table:
        """The rematch table of ``old``: its settings, a new deal; its window starts."""
        overrides = {f.name: getattr(old.rules, f.name) for f in dataclasses.fields(old.rules)}
        # The server's own seed: a new deal, and never a quick-match table (whose free seats
        # a quick match would give to anyone).
        table = self._registry.create(
            preset=old.preset, overrides=overrides, bot_seats=old.bot_seats, name=old.name,
            seed=str(secrets.randbits(64)), is_server_seed=True, bot_policy=old.bot_policy,
            rating=old.rating, creator=address, bot_pace=old.bot_pace, rematch_of=old.id,
            game=old.meta.game)
        self._keep_window(table)
        table.log.info("rematch_created", rematch_of=old.id)
        return table

    def _keep_window(self, table: Table) -> None:
        """A rematch not yet started has its window running (after a restart: from now)."""
        if table.meta.rematch_of and table.game is None and not table.is_released \
                and table.id not in self._windows:
            self._windows[table.id] = self._registry.scheduler.call_later(
                self._window, lambda: self._window_ended(table.id))

    def _drop(self, table_id: str) -> None:
        """A rematch nobody holds a seat of goes: no game, no record, no pointer (a later
        Rematch makes another)."""
        self._close_window(table_id)
        self._registry.release(table_id, ServiceError.not_found(
            "this rematch ended before anyone took a seat", "TABLE_EXPIRED"))

    def _window_ended(self, table_id: str) -> None:
        """Bots take the seats nobody claimed: the game starts (unless nobody came back)."""
        self._windows.pop(table_id, None)
        if not self._registry.holds(table_id):
            return
        table = self._registry.get(table_id)
        if table.game is not None or table.is_released:
            return
        if not any(seat.is_taken for seat in table.seats if not seat.is_bot):
            self._drop(table_id)
            return
        for seat in table.seats:
            if not seat.is_taken and table.game is None:
                table.seat_bot(seat.number)

    def _close_window(self, table_id: str) -> None:
        handle = self._windows.pop(table_id, None)
        if handle is not None:
            handle.cancel()

    @staticmethod
    def _refusal(table: Table, number: int, error: ServiceError) -> ServiceError:
        """A refused seat as a rematch says it (the seat taken by the caller before, or by a
        bot after the window)."""
        if error.reason not in ("SEAT_TAKEN", "TABLE_FULL", "ACCOUNT_ALREADY_SEATED"):
            return error
        if table.seats[number].is_bot:
            return ServiceError.precondition(
                "the rematch started without you: the time to accept ran out and a bot took "
                "your seat", "REMATCH_STARTED")
        return ServiceError.precondition(
            "you already took your seat at this rematch: play it with the token you were "
            "given (a retry with the same request_id gets it again)", "REMATCH_ALREADY_ACCEPTED")
