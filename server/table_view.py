"""What each watcher sees of a table, as copas.v1 messages: the public view (built once per
step and shared), a seat's view (the public one plus what only that seat may see, read
through ``engine.private_view``), and the table's summary."""

from __future__ import annotations

from typing import TYPE_CHECKING

from copas.v1 import copas_pb2
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from engine import private_view, public_view
from server import codec

if TYPE_CHECKING:
    from server.table import Table


def timestamp(seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


def duration(seconds: float) -> Duration:
    """A time left, never negative."""
    left = Duration()
    left.FromNanoseconds(int(max(0.0, seconds) * 1e9))
    return left


def phase_of(table: Table) -> int:
    if table.game is None:
        return copas_pb2.PHASE_WAITING_FOR_PLAYERS
    return codec.PHASE_TO_PB[table.game.phase]


def summary(table: Table) -> copas_pb2.TableSummary:
    game = table.game
    totals = game.totals if game else [0] * len(table.seats)
    left = game.has_left if game else [False] * len(table.seats)
    return copas_pb2.TableSummary(
        table_id=table.id, display_name=table.name, preset=table.preset,
        rules=table.rules_pb, phase=phase_of(table),  # type: ignore[arg-type]
        hand_number=game.hand_number if game else -1,
        create_time=timestamp(table.created),
        seats=[copas_pb2.SeatSummary(seat=s.number, display_name=s.name, is_taken=s.is_taken,
                                     is_bot=s.is_bot, is_connected=table.is_connected(s.number),
                                     has_left=left[s.number], total=totals[s.number])
               for s in table.seats])


def public(table: Table) -> copas_pb2.TableView:
    """What a spectator may see: built once per step, shared by every seat's view."""
    message = copas_pb2.TableView(table_id=table.id, phase=phase_of(table),  # type: ignore[arg-type]
                                  rules=table.rules_pb, hand_number=-1)
    game = table.game
    if game is None:
        message.players.extend(copas_pb2.PlayerState(
            seat=s.number, display_name=s.name, is_bot=s.is_bot,
            is_connected=table.is_connected(s.number)) for s in table.seats)
        return message
    v = public_view(game)
    n = len(table.seats)
    message.hand_number = v.hand_number
    message.pass_direction = codec.DIRECTION_TO_PB[v.pass_direction]
    message.hearts_broken = v.hearts_broken
    message.trick_number = v.trick_number
    if v.trick:
        message.trick.CopyFrom(codec.trick_to_pb(v.trick[0][0], v.trick))
    if v.last_trick is not None:
        message.last_trick.CopyFrom(codec.won_trick_to_pb(v.last_trick, n))
        message.last_trick_winner = v.last_trick.winner
    now = table.scheduler.now()
    if table.paused_until is None:
        message.to_act.extend(v.to_act)
        if table.deadline is not None:
            message.deadline.CopyFrom(timestamp(table.deadline))
            message.time_left.CopyFrom(duration(table.deadline - now))
    else:
        message.paused_until.CopyFrom(timestamp(table.paused_until))
        message.pause_left.CopyFrom(duration(table.paused_until - now))
    message.players.extend(copas_pb2.PlayerState(
        seat=s.number, display_name=s.name, is_bot=s.is_bot,
        is_connected=table.is_connected(s.number), has_left=v.has_left[s.number],
        card_count=v.card_counts[s.number], hand_points=v.hand_points[s.number],
        total=v.totals[s.number], has_passed=v.has_passed[s.number]) for s in table.seats)
    if v.moon_shooter is not None:
        message.moon_shooter = v.moon_shooter
    message.standings.extend(codec.standing_to_pb(r) for r in v.standings)
    if game.end_reason is not None:
        message.end_reason = codec.END_REASON_TO_PB[game.end_reason]
    return message


def for_seat(table: Table, shared: copas_pb2.TableView, seat: int | None
             ) -> copas_pb2.TableView:
    """The public view plus what only ``seat`` may see (a copy; ``shared`` is untouched)."""
    if seat is None:
        return shared
    message = copas_pb2.TableView()
    message.CopyFrom(shared)
    message.seat = seat
    if table.game is None:
        return message
    mine = private_view(table.game, seat)
    card_pb = codec.CARD_PB
    message.hand.extend(card_pb[c] for c in mine.hand)
    message.pass_choice.extend(card_pb[c] for c in mine.pass_choice)
    message.received.extend(card_pb[c] for c in mine.received)
    if table.paused_until is None:
        message.legal_cards.extend(card_pb[c] for c in mine.legal_cards)
        message.moon_choices.extend(codec.MOON_CHOICE_TO_PB[c] for c in mine.moon_choices)
    return message
