"""What each watcher sees of a table, as copas.v1 messages: the public view (built once per
step and shared), a seat's view (the public one plus what only that seat may see), and the
table's summary. The game's part of each comes from the table's game module
(``server/games``): this module never names a game.

It reads a table through ``TableFacts``, the read-only face a table shows (so this module
never imports the table's own)."""

from __future__ import annotations

from copas.v1 import copas_pb2

from server.games import RecordFacts, SeatFacts, TableFacts
from server.store.base import GameRecord
from server.wire import field, timestamp

REMATCH_FIELD = copas_pb2.TableView.DESCRIPTOR.fields_by_name["rematch_table_id"].number

__all__ = ["RecordFacts", "SeatFacts", "TableFacts", "for_seat", "phase_of", "private_part",
           "public", "public_bytes", "record", "summary", "view_bytes"]


def record(table: RecordFacts) -> GameRecord:
    """A finished table's game: replayable by its engine (rules, seed, actions) and carrying
    its result, seats and times."""
    return table.game_module.record(table)


def phase_of(table: TableFacts) -> int:
    game = table.game
    if game is None:
        return copas_pb2.PHASE_WAITING_FOR_PLAYERS
    return table.game_module.phase_pb(game)


def summary(table: TableFacts) -> copas_pb2.TableSummary:
    """What the lobby, GetTable and a championship show of a table. A table closed to
    spectators (a championship's, with duplicate deals) shows no totals: every table of its
    round plays the same deals, so one table's scores tell the others something of their
    hands; its players see them in their views, everyone in its record once the round ends."""
    game = table.game
    totals = table.game_module.seat_totals(game) \
        if game and not table.meta.is_spectating_closed \
        else [0] * len(table.seats)
    left = game.has_left if game else [False] * len(table.seats)
    return copas_pb2.TableSummary(
        table_id=table.id, display_name=table.name, preset=table.preset,
        rules=table.rules_pb, phase=phase_of(table),  # type: ignore[arg-type]
        hand_number=game.hand_number if game else -1,
        create_time=timestamp(table.created), bot_policy=table.bot_policy,
        rating=table.rating,
        seats=[copas_pb2.SeatSummary(seat=s.number, display_name=s.name, is_taken=s.is_taken,
                                     is_bot=s.is_bot,
                                     is_connected=table.shows_connected(s.number),
                                     has_left=left[s.number], total=totals[s.number],
                                     is_away=s.is_away)
               for s in table.seats])


def public(table: TableFacts) -> copas_pb2.TableView:
    """What a spectator may see, as a message (the game's module builds it; the table adds
    its rematch, once asked for)."""
    message = table.game_module.public(table)
    if table.rematch_id:
        message.rematch_table_id = table.rematch_id
    return message


def public_bytes(table: TableFacts) -> bytes:
    """The public view as wire bytes, as ``public`` builds it (a test checks they agree),
    built once per step by the game's module (and the rematch's field after it)."""
    shared = table.game_module.public_bytes(table)
    if table.rematch_id:
        return shared + field(REMATCH_FIELD, table.rematch_id.encode())
    return shared


def private_part(table: TableFacts, seat: int) -> bytes:
    """What only ``seat`` may see, as TableView wire bytes with the seat number."""
    return table.game_module.private_part(table, seat)


def view_bytes(table: TableFacts, shared: bytes, seat: int | None) -> bytes:
    """A watcher's view as wire bytes: the shared public part, plus the seat's own."""
    return shared if seat is None else shared + table.game_module.private_part(table, seat)


def for_seat(table: TableFacts, seat: int | None) -> copas_pb2.TableView:
    """A watcher's view as a message (snapshots, GetView): the same bytes, parsed."""
    return copas_pb2.TableView.FromString(view_bytes(table, public_bytes(table), seat))

