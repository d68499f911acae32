"""Bisca's views: what a spectator sees of a Bisca table (the public view, shared by every
seat's), what only one seat may see (its hand, its legal cards, the card it drew: read through
``engine.bisca.player_view``), and a finished table's record, as the contract shows them
(``TableView`` with ``TableView.bisca``, ``GameRecord``)."""

from __future__ import annotations

from typing import cast

from copas.v1 import copas_pb2

from engine.bisca import Game, PlayCard, player_view, public_view
from engine.bisca.record import RECORD_FORMAT
from server.games import RecordFacts, TableFacts
from server.games.bisca import wire
from server.games.bisca.result import BiscaResult
from server.games.views import game_record, show_clock, show_waiting_seats
from server.store.base import GameRecord, RecordSummary
from server.wire import field, varint

_BISCA = 22  # TableView.bisca: the public part and a seat's drawn card merge on the wire
_HAND, _LEGAL = 30, 33
_HAND_FIELDS = tuple(field(_HAND, c.SerializeToString()) for c in wire.CARD_PB)
_LEGAL_FIELDS = tuple(field(_LEGAL, c.SerializeToString()) for c in wire.CARD_PB)


def _game(table: TableFacts) -> Game | None:
    return cast("Game | None", table.game)


def public(table: TableFacts) -> copas_pb2.TableView:
    """What a spectator may see: no hand, no drawn card, never the stock's order."""
    game = _game(table)
    message = copas_pb2.TableView(
        table_id=table.id, rules=table.rules_pb, hand_number=-1,
        phase=copas_pb2.PHASE_WAITING_FOR_PLAYERS if game is None
        else wire.PHASE_TO_PB[game.phase])
    if game is None:
        show_waiting_seats(message, table)
        return message
    v = public_view(game)
    n = len(table.seats)
    message.hand_number = v.hand_number
    message.trick_number = v.trick_number
    if v.trick:
        message.trick.CopyFrom(wire.trick_to_pb(v.trick[0][0], [s for s, _ in v.trick],
                                                [c for _, c in v.trick]))
    if v.last_trick is not None:
        message.last_trick.CopyFrom(wire.won_trick_to_pb(v.last_trick, n))
        message.last_trick_winner = v.last_trick.winner
    show_clock(message, table, v.to_act)
    message.players.extend(copas_pb2.PlayerState(
        seat=s.number, display_name=s.name, is_bot=s.is_bot,
        is_connected=table.shows_connected(s.number), has_left=v.has_left[s.number],
        card_count=v.card_counts[s.number], hand_points=v.points[s.number],
        total=v.totals[v.sides[s.number]], is_away=s.is_away) for s in table.seats)
    message.standings.extend(wire.standing_to_pb(r) for r in v.standings)
    if game.end_reason is not None:
        message.end_reason = wire.END_REASON_TO_PB[game.end_reason]
    bisca = message.bisca
    bisca.trump_card.CopyFrom(wire.CARD_PB[v.trump_card])
    bisca.stock_size = v.stock_size
    if v.trump_drawn_by is not None:
        bisca.trump_drawn_by = v.trump_drawn_by
    bisca.dealer = v.dealer
    if v.rules.partnerships:
        bisca.teams.extend(v.sides)
    bisca.side_points.extend(v.side_points)
    bisca.side_totals.extend(v.totals)
    bisca.carried_over = v.tied_hands_carried
    return message


def public_bytes(table: TableFacts) -> bytes:
    """The public view as wire bytes (built once per step, shared by every seat's view)."""
    return public(table).SerializeToString()


def private_part(table: TableFacts, seat: int) -> bytes:
    """What only ``seat`` may see, as TableView wire bytes after the public part: the seat
    number, its hand, its legal cards (not while the table pauses) and the card it drew last
    while it still holds it (not the trump card, which everyone saw). A leaver sees what a
    spectator sees from then on."""
    game = _game(table)
    if game is None or game.has_left[seat]:
        return varint(2 << 3) + varint(seat)
    mine = player_view(game, seat)  # the one place a seat's private cards are read
    parts = [varint(2 << 3) + varint(seat)]
    parts += [_HAND_FIELDS[c] for c in mine.hand]
    if not (table.paused_until is not None or table.is_held):
        parts += [_LEGAL_FIELDS[c] for c in mine.legal_cards]
    drawn = mine.last_drawn
    if drawn is not None and drawn in mine.hand and drawn != mine.trump_card:
        drawn_card = copas_pb2.BiscaTable(drawn_card=wire.CARD_PB[drawn])
        parts.append(field(_BISCA, drawn_card.SerializeToString()))
    return b"".join(parts)


def record(table: RecordFacts) -> GameRecord:
    """A finished table's game: replayable by ``engine.bisca`` (rules, seed, actions) and
    carrying its result, seats and times."""
    game = _game(table)
    assert game is not None
    cards = [0] * len(table.seats)
    for action in game.actions:
        if isinstance(action, PlayCard):
            cards[action.seat] += 1
    return game_record(table, game.actions, cards, BiscaResult.of(game))


def record_to_pb(summary: RecordSummary, message: copas_pb2.GameRecord) -> None:
    """What a Bisca record adds to its message: rules, seats' totals (their side's game
    points), hands (``taken``: card points per seat; ``points`` and ``totals``: the seat's
    side's game points), standings, leavers, end."""
    result = cast("BiscaResult", summary.result)
    rules = summary.rules
    message.rules.CopyFrom(wire.rules_to_pb(rules))
    if result.end_reason:
        message.end_reason = wire.END_REASON_TO_PB[result.end_reason]
    left = {lv.seat for lv in result.leavers}
    sides = [rules.side_of(s.seat) for s in summary.seats]
    for seat in summary.seats:
        message.seats.add(seat=seat.seat, display_name=seat.name, is_taken=True,
                          is_bot=seat.is_bot, has_left=seat.seat in left,
                          total=result.totals[sides[seat.seat]], player_id=seat.player)
    for hand in result.hands:
        message.hands.add(hand_number=hand.hand_number, taken=hand.points,
                          points=wire.per_seat(hand.game_points, sides),
                          totals=wire.per_seat(hand.totals, sides))
    message.standings.extend(wire.standing_to_pb(r) for r in result.standings)
    for lv in result.leavers:
        message.leavers.add(seat=lv.seat, hand_number=lv.hand_number,
                            trick_number=lv.trick_number)


RECORD = RECORD_FORMAT  # the engine's record format, as GameRecord.to_dict writes it
