"""What every game's views show alike, built here once for all of them: the seats before the
game starts, the turn's clock (the table held, or who is to act and by when, or the pause
between tricks and hands) and a finished table's record around its game's actions and
result."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from copas.v1 import copas_pb2

from server.games.base import GameAction, RecordFacts, TableFacts
from server.store.base import GameRecord, GameResult, RecordSummary, SeatRecord
from server.tokens import pseudonym
from server.wire import duration, timestamp


def show_waiting_seats(message: copas_pb2.TableView, table: TableFacts) -> None:
    """The players before the game starts: each seat's name, whether a bot holds it, and
    whether its player is connected."""
    message.players.extend(copas_pb2.PlayerState(
        seat=s.number, display_name=s.name, is_bot=s.is_bot,
        is_connected=table.shows_connected(s.number)) for s in table.seats)


def show_clock(message: copas_pb2.TableView, table: TableFacts, to_act: Iterable[int]) -> None:
    """Set the view's ``is_held``, or its ``to_act`` (the seats ``to_act`` names) with the
    turn's ``deadline`` and ``time_left``, or its ``paused_until`` and ``pause_left``."""
    now = table.now()
    if table.is_held:
        message.is_held = True
    elif table.paused_until is None:
        message.to_act.extend(to_act)
        if table.deadline is not None:
            message.deadline.CopyFrom(timestamp(table.deadline))
            message.time_left.CopyFrom(duration(table.deadline - now))
    else:
        message.paused_until.CopyFrom(timestamp(table.paused_until))
        message.pause_left.CopyFrom(duration(table.paused_until - now))


def game_record(table: RecordFacts, actions: Sequence[GameAction], cards_played: Sequence[int],
                result: GameResult) -> GameRecord:
    """A finished table's record: its game's ``actions`` (replayable with the rules and seed),
    ``result`` (the game's result type) and the seats, each with the cards it played."""
    assert table.finished_at is not None
    summary = RecordSummary(
        record_id=table.id, table_id=table.id, display_name=table.name, preset=table.preset,
        created=table.created, finished=table.finished_at, seed=table.seed, rules=table.rules,
        seats=tuple(SeatRecord(s.number, s.name, s.is_bot, s.account_id, s.is_bot or s.has_acted,
                               s.own_cards, cards_played[s.number], s.network,
                               pseudonym(table.id, s.account_id) if s.account_id else "")
                    for s in table.seats),
        result=result, rating=table.rating, championship=table.meta.championship,
        game=table.meta.game)
    return GameRecord(summary, tuple(actions))
