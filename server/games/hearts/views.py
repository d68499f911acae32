"""Hearts's views: what a spectator sees of a Hearts table (the public view, built once per step
and shared by every seat's), what only one seat may see (read through ``engine.private_view``),
and a finished table's record. Moved from ``server/tables/views.py`` behind the game seam: the
table machine reaches them through ``GameModule`` (``server/games``)."""

from __future__ import annotations

from typing import cast

from copas.v1 import copas_pb2

from engine import Game, PassDirection, Phase, PlayCard, private_view, public_view
from server.games import RecordFacts, TableFacts
from server.games.hearts import codec
from server.games.hearts.result import GameResult
from server.games.views import game_record, show_clock, show_waiting_seats
from server.store.base import GameRecord, RecordSummary
from server.wire import field, varint


def record(table: RecordFacts) -> GameRecord:
    """A finished table's game: replayable by the engine (rules, seed, actions) and carrying
    its result, seats and times."""
    game = cast("Game | None", table.game)
    assert game is not None
    cards = [0] * len(table.seats)
    for action in game.actions:
        if isinstance(action, PlayCard):
            cards[action.seat] += 1
    return game_record(table, game.actions, cards, GameResult.of(game))


def phase_of(table: TableFacts) -> int:
    game = cast("Game | None", table.game)
    if game is None:
        return copas_pb2.PHASE_WAITING_FOR_PLAYERS
    return codec.PHASE_TO_PB[game.phase]


def public(table: TableFacts) -> copas_pb2.TableView:
    """What a spectator may see: built once per step, shared by every seat's view."""
    message = copas_pb2.TableView(table_id=table.id, phase=phase_of(table),  # type: ignore[arg-type]
                                  rules=table.rules_pb, hand_number=-1)
    game = cast("Game | None", table.game)
    if game is None:
        show_waiting_seats(message, table)
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
    show_clock(message, table, v.to_act)
    message.players.extend(copas_pb2.PlayerState(
        seat=s.number, display_name=s.name, is_bot=s.is_bot,
        is_connected=table.shows_connected(s.number), has_left=v.has_left[s.number],
        card_count=v.card_counts[s.number], hand_points=v.hand_points[s.number],
        total=v.totals[s.number], has_passed=v.has_passed[s.number], is_away=s.is_away)
        for s in table.seats)
    if v.moon_shooter is not None:
        message.moon_shooter = v.moon_shooter
    message.standings.extend(codec.standing_to_pb(r) for r in v.standings)
    if game.end_reason is not None:
        message.end_reason = codec.END_REASON_TO_PB[game.end_reason]
    return message


# Encoded ahead: a TrickCard for each (seat, card).
_TRICK_CARDS = tuple(tuple(field(2, copas_pb2.TrickCard(seat=seat, card=card).SerializeToString())
                           for card in codec.CARD_PB) for seat in range(5))


def _trick_bytes(number: int, leader: int, seats: list[int] | tuple[int, ...],
                 cards: list[int] | tuple[int, ...]) -> bytes:
    body = varint(1 << 3) + varint(leader)  # Trick.leader, present even when 0
    return field(number, body + b"".join(_TRICK_CARDS[s][c] for s, c in zip(seats, cards)))


class ViewCache:
    """What the public view reuses from step to step: the rules, each player's state and the
    last trick, re-encoded only when they change."""

    __slots__ = ("last_trick", "players", "private", "rules")

    def __init__(self, rules: copas_pb2.Rules) -> None:
        self.rules = field(4, rules.SerializeToString())
        self.players: dict[int, tuple[tuple[object, ...], bytes]] = {}
        self.private: dict[int, tuple[tuple[object, ...], bytes]] = {}
        self.last_trick: tuple[object, bytes] = (None, b"")


def public_bytes(table: TableFacts) -> bytes:
    """The public view as wire bytes, as ``public`` builds it (a test checks they agree),
    from the parts that changed: built once per step."""
    game = cast("Game | None", table.game)
    if game is None:
        return public(table).SerializeToString()
    cache = table.view_cache
    head = copas_pb2.TableView(table_id=table.id, phase=codec.PHASE_TO_PB[game.phase],
                               hand_number=game.hand_number,
                               pass_direction=codec.DIRECTION_TO_PB[game.pass_direction],
                               hearts_broken=game.hearts_broken,
                               trick_number=game.trick_number)
    show_clock(head, table, game.to_act())
    if game.moon_shooter is not None:
        head.moon_shooter = game.moon_shooter
    if game.standings:
        head.standings.extend(codec.standing_to_pb(r) for r in game.standings)
    if game.end_reason is not None:
        head.end_reason = codec.END_REASON_TO_PB[game.end_reason]
    parts = [head.SerializeToString(), cache.rules]
    if game.trick_cards:
        parts.append(_trick_bytes(9, game.trick_seats[0], game.trick_seats, game.trick_cards))
    won = game.last_trick
    if won is not None:
        if cache.last_trick[0] is not won:
            n = len(table.seats)
            seats = [(won.leader + i) % n for i in range(len(won.cards))]
            cache.last_trick = (won, _trick_bytes(10, won.leader, seats, won.cards)
                                + varint(11 << 3) + varint(won.winner))
        parts.append(cache.last_trick[1])
    hands, taken, totals, left, passes = (game.hands, game.taken, game.totals, game.has_left,
                                          game.passes)
    for s in table.seats:
        n = s.number
        key = (s.name, s.is_bot, table.shows_connected(n), left[n], hands[n].bit_count(),
               taken[n], totals[n], passes[n] is not None, s.is_away)
        known = cache.players.get(n)
        if known is None or known[0] != key:
            state = copas_pb2.PlayerState(
                seat=n, display_name=s.name, is_bot=s.is_bot, is_connected=key[2],
                has_left=key[3], card_count=key[4], hand_points=key[5], total=key[6],
                has_passed=key[7], is_away=key[8])
            known = cache.players[n] = (key, field(15, state.SerializeToString()))
        parts.append(known[1])
    return b"".join(parts)


# The private fields of a TableView, encoded ahead: field number -> bytes per card index.
# (A TableView's wire form is the public part's bytes followed by these: repeated fields
# concatenate, and the public part never sets them.)
_HAND, _PASS_CHOICE, _RECEIVED, _LEGAL = 30, 31, 32, 33


def _encoded_cards(number: int) -> tuple[bytes, ...]:
    return tuple(field(number, card.SerializeToString()) for card in codec.CARD_PB)


_CARD_FIELDS = {number: _encoded_cards(number) for number in (_HAND, _PASS_CHOICE, _RECEIVED,
                                                              _LEGAL)}
_MOON_CHOICES = {choice: varint(34 << 3 | 0) + varint(pb)
                 for choice, pb in codec.MOON_CHOICE_TO_PB.items()}


def private_part(table: TableFacts, seat: int) -> bytes:
    """What only ``seat`` may see (``engine.private_view``), as TableView wire bytes with the
    seat number (only the number once its player left: the hand the server plays for them is
    no longer theirs to see); it changes only when that seat's cards or turn do, so it is
    kept between steps (the key reads the same state ``private_view`` does)."""
    game = cast("Game | None", table.game)
    if game is None or game.has_left[seat]:  # a leaver sees what a spectator sees, from then on
        return varint(2 << 3) + varint(seat)
    is_paused = table.paused_until is not None or table.is_held
    chosen = game.passes[seat] if game.pass_direction is not PassDirection.HOLD else None
    legal = 0 if is_paused else game.legal_mask(seat)
    is_shooter = not is_paused and game.phase is Phase.MOON_CHOICE and seat == game.moon_shooter
    key = (game.hands[seat], chosen, game.received[seat], legal, is_shooter)
    cache: ViewCache = table.view_cache
    known = cache.private.get(seat)
    if known is not None and known[0] == key:
        return known[1]
    mine = private_view(game, seat)  # the one place a seat's private cards are read
    hand, passing = _CARD_FIELDS[_HAND], _CARD_FIELDS[_PASS_CHOICE]
    received, legal_cards = _CARD_FIELDS[_RECEIVED], _CARD_FIELDS[_LEGAL]
    parts = [varint(2 << 3) + varint(seat)]
    parts += [hand[c] for c in mine.hand]
    parts += [passing[c] for c in mine.pass_choice]
    parts += [received[c] for c in mine.received]
    if not is_paused:
        parts += [legal_cards[c] for c in mine.legal_cards]
        parts += [_MOON_CHOICES[c] for c in mine.moon_choices]
    data = b"".join(parts)
    cache.private[seat] = (key, data)
    return data


def record_to_pb(summary: RecordSummary, message: copas_pb2.GameRecord) -> None:
    """What a Hearts record adds to its message (moved from ``server/store/records.py``):
    rules, seats' totals, hands, standings, leavers, end."""
    result = cast("GameResult", summary.result)
    message.rules.CopyFrom(codec.rules_to_pb(summary.rules))
    if result.end_reason:
        message.end_reason = codec.END_REASON_TO_PB[result.end_reason]
    left = {lv.seat for lv in result.leavers}
    for seat in summary.seats:
        message.seats.add(seat=seat.seat, display_name=seat.name, is_taken=True,
                          is_bot=seat.is_bot, has_left=seat.seat in left,
                          total=result.totals[seat.seat], player_id=seat.player)
    for hand in result.hands:
        h = message.hands.add(hand_number=hand.hand_number,
                              pass_direction=codec.DIRECTION_TO_PB[hand.pass_direction],
                              taken=hand.taken, points=hand.points, totals=hand.totals,
                              moon_choice=codec.MOON_CHOICE_TO_PB[hand.moon_choice]
                              if hand.moon_choice else copas_pb2.MOON_CHOICE_UNSPECIFIED)
        if hand.moon_shooter is not None:
            h.moon_shooter = hand.moon_shooter
    message.standings.extend(codec.standing_to_pb(r) for r in result.standings)
    for lv in result.leavers:
        message.leavers.add(seat=lv.seat, hand_number=lv.hand_number,
                            trick_number=lv.trick_number)
