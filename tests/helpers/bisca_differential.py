"""Random Bisca games through the engine, each step checked against the independent oracle
(tests/helpers/bisca_oracle.py): the same events, hands, stock, turn, legal cards, scores and
places. Used by tests/test_bisca_engine.py and bench/bisca_oracle.py (10,000 games)."""

from __future__ import annotations

import random
from typing import Any

from engine.actions import GameEndReason
from engine.bisca import (
    Abandon,
    Action,
    BiscaRules,
    CardPlayed,
    CardsDrawn,
    Close,
    Event,
    Game,
    GameOver,
    HandScored,
    HandStarted,
    Leave,
    PlayCard,
    PlayerLeft,
    TimeUp,
    TrickWon,
    cards_of,
)
from tests.helpers.bisca_oracle import BiscaOracle, Deal, OracleViolation


def random_rules(rng: random.Random) -> BiscaRules:
    """Any valid table: every player count, hand size and option."""
    while True:
        players = rng.choice((2, 3, 4, 6))
        partnerships = players == 6 or (players == 4 and rng.random() < 0.5)
        hand_size = rng.choice((3, 7, 9))
        if players * hand_size >= {3: 39, 6: 36}.get(players, 40):
            continue
        return BiscaRules(players=players, partnerships=partnerships, hand_size=hand_size,
                          follow_suit=rng.choice(("NEVER", "STOCK_EMPTY")),  # type: ignore[arg-type]
                          margin_bonus=rng.random() < 0.7,
                          tie=rng.choice(("NOBODY_SCORES", "CARRIED_OVER")),  # type: ignore[arg-type]
                          target=rng.choice((1, 2, 4, 7)), max_hands=rng.choice((0, 0, 1, 3)))


def normalized(event: Event) -> tuple[Any, ...]:
    """An engine event in the oracle's plain values."""
    if isinstance(event, HandStarted):
        return ("hand", event.hand_number, event.dealer, event.leader, str(event.trump_card),
                event.stock_size)
    if isinstance(event, CardPlayed):
        return ("play", event.seat, str(event.card), event.is_automatic)
    if isinstance(event, TrickWon):
        return ("trick", event.trick_number, event.winner, event.leader,
                tuple(str(c) for c in event.cards), event.points)
    if isinstance(event, CardsDrawn):
        return ("draw", event.order, event.stock_size, event.trump_card_to)
    if isinstance(event, HandScored):
        return ("scored", event.hand_number, event.points, event.side_points, event.winner,
                event.game_points, event.totals, event.tied_hands_carried)
    if isinstance(event, PlayerLeft):
        return ("left", event.seat, event.hand_number, event.trick_number)
    if isinstance(event, GameOver):
        return ("over", str(event.reason), tuple((r.seat, r.place) for r in event.standings))
    raise AssertionError(f"unknown event {event!r}")


def _deal_reader(game: Game) -> Any:
    def deal_of(hand_number: int) -> Deal:
        if game.hand_number != hand_number:
            raise OracleViolation(f"the oracle wants hand {hand_number}, the engine is at "
                                  f"{game.hand_number}")
        return ([{str(c) for c in cards_of(h)} for h in game.dealt],
                [str(c) for c in game.dealt_stock])
    return deal_of


def compare_state(game: Game, oracle: BiscaOracle) -> None:
    where = f"hand {oracle.hand_number} trick {oracle.tricks_done}"
    if game.is_over != oracle.over:
        raise OracleViolation(f"{where}: engine over={game.is_over}, oracle over={oracle.over}")
    if game.totals != oracle.totals:
        raise OracleViolation(f"{where}: totals {game.totals} != {oracle.totals}")
    if game.is_over:
        return
    if game.turn != oracle.turn:
        raise OracleViolation(f"{where}: turn {game.turn} != {oracle.turn}")
    for seat in range(game.players):
        if {str(c) for c in game.hand(seat)} != oracle.hands[seat]:
            raise OracleViolation(f"{where}: seat {seat}'s hand differs")
    if [str(c) for c in game.stock] != oracle.stock:
        raise OracleViolation(f"{where}: the stock differs")
    if {str(c) for c in game.legal_cards(game.turn)} != oracle.legal(oracle.turn):
        raise OracleViolation(f"{where}: legal cards {game.legal_cards(game.turn)} != "
                              f"{sorted(oracle.legal(oracle.turn))}")
    if game.taken != oracle.taken:
        raise OracleViolation(f"{where}: points taken {game.taken} != {oracle.taken}")


def play_checked(rules: BiscaRules, seed: int, rng: random.Random,
                 leave_rate: float = 0.002, timeout_rate: float = 0.05) -> Game:
    """One game of random legal play (with timeouts, leavers and sometimes an ending by the
    table), checked against the oracle after every action; raises OracleViolation."""
    game = Game(rules, seed)
    oracle_events: list[tuple[Any, ...]] = []
    oracle = BiscaOracle(rules.to_dict(), _deal_reader(game))
    oracle_events = oracle.events
    if [normalized(e) for e in game.started_events] != oracle_events:
        raise OracleViolation("the first hand starts differently")
    compare_state(game, oracle)
    endings: dict[str, Action] = {"ABANDONED": Abandon(), "CLOSED": Close(), "TIME_LIMIT": TimeUp()}
    while not game.is_over:
        roll = rng.random()
        if roll < leave_rate:
            seat = rng.choice([s for s in range(game.players) if not game.has_left[s]])
            events = game.apply(Leave(seat))
            expected = oracle.leave(seat)
        elif roll < leave_rate * 1.2:
            reason = rng.choice(sorted(endings))
            events = game.apply(endings[reason])
            expected = oracle.end_now(reason)
        elif roll < leave_rate * 1.2 + timeout_rate:
            seat = game.turn
            action = game.auto_action(seat)
            if str(action.card) != oracle.timeout_card(seat):
                raise OracleViolation(f"timeout card {action.card} != "
                                      f"{oracle.timeout_card(seat)}")
            events = game.apply(action, is_automatic=True)
            expected = oracle.play(seat, str(action.card), automatic=True)
        else:
            seat = game.turn
            chosen = rng.choice(game.legal_cards(seat))
            events = game.apply(PlayCard(seat, chosen))
            expected = oracle.play(seat, str(chosen))
        got = [normalized(e) for e in events]
        if got != expected:
            first = next(i for i, (a, b) in enumerate(zip(got + [()] * len(expected),
                                                          expected + [()] * len(got),
                                                          strict=False)) if a != b)
            raise OracleViolation(f"events differ at {first}: engine {got[first:first + 3]}, "
                                  f"oracle {expected[first:first + 3]}")
        compare_state(game, oracle)
    assert isinstance(game.end_reason, GameEndReason)
    return game
