"""Bisca's rules engine against docs/RULES.md ("Bisca"): one test per rule and variant, property
tests over random games, and random games checked against an independent oracle
(tests/helpers/bisca_oracle.py)."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.actions import GameEndReason
from engine.bisca import (
    CARD_POINTS,
    CARDS,
    PRESETS,
    BiscaRules,
    Card,
    CardPlayed,
    CardsDrawn,
    FollowSuit,
    Game,
    HandScored,
    HandStarted,
    Leave,
    PlayCard,
    TieRule,
    TrickWon,
    auto_card,
    card,
    cards_of,
    compute_standings,
    dumps,
    game_points_for,
    pack_for,
    player_view,
    public_view,
    replay,
    to_record,
    trick_winner,
)
from engine.bisca.cards import mask_of
from engine.bisca.record import deals_of
from engine.cards import Card as HeartsCard
from engine.errors import (
    IllegalActionError,
    InvalidActionError,
    InvalidCardError,
    Reason,
    RecordError,
    RulesError,
)
from tests.helpers.bisca_differential import play_checked, random_rules
from tests.helpers.budget import budget


def cards(text: str) -> list[Card]:
    return [card(t) for t in text.split()]


def rig(game: Game, hands: list[str], stock: str) -> Game:
    """Replace the deal of the hand in progress before its first card: the hands, and the
    stock (next card first, the trump card last)."""
    assert game.trick_number == 0 and not game.trick_cards
    game.hands = [mask_of(cards(h)) for h in hands]
    game.dealt = list(game.hands)
    game.stock = cards(stock)
    game.dealt_stock = tuple(game.stock)
    game.trump_card = game.stock[-1]
    game.trump_suit = game.trump_card // 10
    return game


def fingerprint(game: Game) -> Any:
    return (list(game.hands), list(game.stock), list(game.trick_cards), game.turn,
            list(game.taken), list(game.totals), len(game.actions), game.phase)


# ---------------------------------------------------------------- the pack


def test_the_pack_has_40_cards_ranked_a_7_k_j_q_6_to_2_with_120_points() -> None:
    assert len(CARDS) == 40 and sum(CARD_POINTS) == 120
    spades = sorted((c for c in CARDS if c.suit == 2), key=lambda c: c.strength, reverse=True)
    assert [str(c) for c in spades] == ["AS", "7S", "KS", "JS", "QS", "6S", "5S", "4S", "3S",
                                        "2S"]
    assert [c.points for c in spades] == [11, 10, 4, 3, 2, 0, 0, 0, 0, 0]


def test_cards_parse_and_print() -> None:
    assert str(card("7h")) == "7H" and card("Q♦") == card("QD") and str(Card(39)) == "AH"
    for text in ("8S", "10H", "TH", "AX", "", "A"):
        with pytest.raises(InvalidCardError):
            card(text)


def test_three_players_leave_out_the_two_of_diamonds_six_players_the_four_twos() -> None:
    assert len(pack_for(2)) == len(pack_for(4)) == 40
    assert set(CARDS) - set(pack_for(3)) == {card("2D")}
    assert set(CARDS) - set(pack_for(6)) == set(cards("2C 2D 2S 2H"))
    assert sum(c.points for c in pack_for(3)) == sum(c.points for c in pack_for(6)) == 120


# ---------------------------------------------------------------- table options


@pytest.mark.parametrize("options, words", [
    ({"players": 5}, "players must be one of 2, 3, 4, 6"),
    ({"hand_size": 5}, "hand_size must be one of 3, 7, 9"),
    ({"players": 2, "partnerships": True}, "partnerships are played by 4 or 6"),
    ({"players": 6}, "6 players play Bisca in partnerships"),
    ({"players": 6, "partnerships": True, "hand_size": 7}, "leave no stock"),
    ({"players": 4, "hand_size": 9}, None),  # 36 cards dealt, 4 in the stock: allowed
    ({"target": 0}, "target must be 1 to 100"),
    ({"max_hands": 101}, "max_hands must be 0"),
    ({"follow_suit": "ALWAYS"}, "follow_suit must be one of NEVER, STOCK_EMPTY"),
    ({"tie": "REPLAY"}, "tie must be one of NOBODY_SCORES, CARRIED_OVER"),
    ({"margin_bonus": 1}, "margin_bonus must be true or false"),
    ({"play_timeout": -1}, "play_timeout must be a number of seconds"),
    ({"moon": "DISABLED"}, "unknown Bisca rule option(s): moon"),
])
def test_rules_are_validated_with_a_reason(options: dict[str, Any], words: str | None) -> None:
    if words is None:
        assert BiscaRules().replace(**options).hand_size == 9
        return
    with pytest.raises(RulesError) as caught:
        BiscaRules().replace(**options)
    assert words in caught.value.message and caught.value.reason is Reason.INVALID_RULES


def test_presets_are_those_of_rules_md() -> None:
    table = {name: (r.players, r.partnerships, r.hand_size, r.follow_suit, r.target,
                    r.max_hands) for name, r in PRESETS.items()}
    never, empty = FollowSuit.NEVER, FollowSuit.STOCK_EMPTY
    assert table == {
        "bisca3": (2, False, 3, never, 4, 0), "bisca7": (2, False, 7, empty, 4, 0),
        "bisca9": (2, False, 9, empty, 4, 0), "pairs": (4, True, 3, never, 4, 0),
        "four": (4, False, 3, never, 4, 0), "three": (3, False, 3, never, 4, 0),
        "six": (6, True, 3, never, 4, 0), "quick": (2, False, 3, never, 4, 1)}
    assert all(r.margin_bonus and r.tie is TieRule.NOBODY_SCORES for r in PRESETS.values())
    assert BiscaRules.preset("pairs", target=2).target == 2
    with pytest.raises(RulesError, match="choose one of bisca3"):
        BiscaRules.preset("sueca")
    for r in PRESETS.values():
        assert BiscaRules.from_dict(json.loads(json.dumps(r.to_dict()))) == r


# ---------------------------------------------------------------- the deal


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_the_deal_gives_each_their_cards_and_the_trump_card_lies_under_the_stock(
        name: str) -> None:
    rules = PRESETS[name]
    game = Game(rules, seed=7)
    n, k = rules.players, rules.hand_size
    assert [h.bit_count() for h in game.hands] == [k] * n
    assert game.stock[-1] == game.trump_card and game.trump_suit == game.trump_card.suit
    assert len(game.stock) == len(pack_for(n)) - n * k
    dealt = {c for h in game.hands for c in cards_of(h)} | set(game.stock)
    assert dealt == set(pack_for(n))
    started = game.started_events[0]
    assert started == HandStarted(0, n - 1, 0, game.trump_card, len(game.stock))
    assert game.turn == 0 and game.dealer == n - 1


def test_the_deal_passes_round_and_the_next_player_leads() -> None:
    game = Game(BiscaRules(players=3, target=100), seed=3)
    rng = random.Random(3)
    seen: list[tuple[int, int, int]] = []
    while len(seen) < 4:
        if game.trick_number == 0 and not game.trick_cards:
            seen.append((game.hand_number, game.dealer, game.turn))
        game.apply(PlayCard(game.turn, rng.choice(game.legal_cards(game.turn))))
    assert seen == [(0, 2, 0), (1, 0, 1), (2, 1, 2), (3, 2, 0)]


def test_the_same_seed_deals_the_same_cards() -> None:
    a, b = Game(PRESETS["pairs"], "s"), Game(PRESETS["pairs"], "s")
    assert a.hands == b.hands and a.stock == b.stock
    assert Game(PRESETS["pairs"], "t").stock != a.stock


# ---------------------------------------------------------------- tricks


@pytest.mark.parametrize("played, trump, winner", [
    ("2S 3S", "S", 1),  # the higher card of the suit led
    ("AS 7S", "H", 0),  # the ace above the seven
    ("7S KS", "H", 0),  # the seven (manilha) above the king
    ("QS JS", "H", 1),  # the jack above the queen
    ("KS AH", "D", 0),  # another suit, not trumps, never wins
    ("AS 2H", "H", 1),  # the lowest trump beats the ace of another suit
    ("3C 4H 5H 2D", "H", 2),  # the highest trump
    ("3C 6D KC 2S", "H", 2),  # no trump: the highest of the suit led
])
def test_a_trick_goes_to_the_highest_trump_else_the_highest_of_the_suit_led(
        played: str, trump: str, winner: int) -> None:
    assert trick_winner(cards(played), "CDSH".index(trump)) == winner


def test_the_winner_draws_first_then_the_others_in_play_order_and_leads() -> None:
    game = rig(Game(PRESETS["four"], 1), ["2C 3C 4C", "5C 6C QC", "JC KC 7C", "AC 2D 3D"],
               "4D 5D 6D QD JD KD 7D AD 2S 3S 4S 5S 6S QS JS KS 7S AS "
               "2H 3H 4H 5H 6H QH JH KH 7H AH")
    events: list[Any] = []
    for seat, c in ((0, "2C"), (1, "5C"), (2, "7C"), (3, "3D")):
        events += game.play(seat, c)
    assert events[-2] == TrickWon(0, 2, 0, tuple(cards("2C 5C 7C 3D")), 10)
    assert events[-1] == CardsDrawn((2, 3, 0, 1), 24, None)
    assert [game.last_drawn[s] for s in range(4)] == cards("6D QD 4D 5D")
    assert game.turn == 2 and game.taken == [0, 0, 10, 0]


def test_the_trump_card_is_drawn_last_by_the_last_player_to_draw() -> None:
    game = Game(PRESETS["bisca3"], 5)
    rng = random.Random(5)
    while len(game.stock) > 2:
        game.play(game.turn, rng.choice(game.legal_cards(game.turn)))
    trump = game.trump_card
    first = game.play(game.turn, game.legal_cards(game.turn)[0])
    events = first + game.play(game.turn, game.legal_cards(game.turn)[0])
    drawn = next(e for e in events if isinstance(e, CardsDrawn))
    assert drawn.stock_size == 0 and drawn.trump_card_to == drawn.order[-1]
    assert game.hands[drawn.order[-1]] >> trump & 1 and game.trump_drawn_by == drawn.order[-1]


def test_without_follow_suit_any_card_may_be_played_to_the_end() -> None:
    game = rig(Game(PRESETS["bisca3"].replace(hand_size=9), 1),
               ["2C 3C 4C 5C 6C QC JC KC 7C", "AC 2D 3D 4D 5D 6D QD JD KD"],
               "7D AD 2S 3S 4S 5S 6S QS JS KS 7S AS 2H 3H 4H 5H 6H QH JH KH 7H AH")
    game.stock.clear()  # as if drawn out
    game.play(0, "2C")
    assert set(game.legal_cards(1)) == set(cards("AC 2D 3D 4D 5D 6D QD JD KD"))


def test_with_stock_empty_following_is_free_while_the_stock_lasts() -> None:
    game = rig(Game(PRESETS["bisca9"], 1),
               ["2C 3C 4C 5C 6C QC JC KC 7C", "AC 2D 3D 4D 5D 6D QD JD KD"],
               "7D AD 2S 3S 4S 5S 6S QS JS KS 7S AS 2H 3H 4H 5H 6H QH JH KH 7H AH")
    game.play(0, "2C")
    assert len(game.legal_cards(1)) == 9 and not game.must_follow
    game.play(1, "2D")  # a card of another suit: allowed while the stock lasts


def test_with_stock_empty_a_player_must_follow_once_the_stock_is_empty() -> None:
    game = rig(Game(PRESETS["bisca9"], 1),
               ["2C 3C 4C 5C 6C QC JC KC 7C", "AC 2D 3D 4D 5D 6D QD JD KD"],
               "7D AD 2S 3S 4S 5S 6S QS JS KS 7S AS 2H 3H 4H 5H 6H QH JH KH 7H AH")
    game.stock.clear()
    game.play(0, "2C")
    assert game.must_follow and game.legal_cards(1) == (card("AC"),)
    before = fingerprint(game)
    with pytest.raises(IllegalActionError) as caught:
        game.play(1, "2D")
    assert caught.value.reason is Reason.MUST_FOLLOW_SUIT and fingerprint(game) == before
    game.play(1, "AC")
    game.play(1, "2D")  # the winner leads anything
    assert set(game.legal_cards(0)) == set(cards("3C 4C 5C 6C QC JC KC 7C"))  # void in ♦


@pytest.mark.parametrize("preset, tricks", [("bisca3", 20), ("bisca9", 20), ("three", 13),
                                             ("four", 10), ("pairs", 10), ("six", 6)])
def test_a_hand_plays_every_card(preset: str, tricks: int) -> None:
    game, rng = Game(PRESETS[preset], 3), random.Random(3)
    won = []
    while game.hand_number == 0:
        events = game.play(game.turn, rng.choice(game.legal_cards(game.turn)))
        won += [e for e in events if isinstance(e, TrickWon)]
    assert len(won) == tricks and {c for t in won for c in t.cards} == set(pack_for(
        PRESETS[preset].players))


# ---------------------------------------------------------------- scoring


def test_game_points_are_1_then_2_from_91_and_4_for_all_120() -> None:
    assert [game_points_for(p, True) for p in (61, 90, 91, 119, 120)] == [1, 1, 2, 2, 4]
    assert [game_points_for(p, False) for p in (61, 91, 120)] == [1, 1, 1]


def _first_hand(rules: BiscaRules, seed: int) -> HandScored:
    game, rng = Game(rules, seed), random.Random(seed)
    while True:
        for event in game.play(game.turn, rng.choice(game.legal_cards(game.turn))):
            if isinstance(event, HandScored):
                return event


def test_a_hand_is_120_points_and_the_side_with_most_wins_it() -> None:
    for seed in range(30):
        scored = _first_hand(PRESETS["pairs"], seed)
        assert sum(scored.points) == sum(scored.side_points) == 120
        assert scored.side_points == (scored.points[0] + scored.points[2],
                                      scored.points[1] + scored.points[3])
        if scored.winner is not None:
            assert scored.side_points[scored.winner] >= 61
            assert scored.game_points[scored.winner] == game_points_for(
                scored.side_points[scored.winner], True)


def _tied_seed(rules: BiscaRules) -> int:
    return next(s for s in range(5000) if _first_hand(rules, s).winner is None)


def test_at_60_60_nobody_scores() -> None:
    rules = PRESETS["bisca3"]
    scored = _first_hand(rules, _tied_seed(rules))
    assert scored.side_points == (60, 60) and scored.game_points == (0, 0)
    assert scored.tied_hands_carried == 0


def test_at_60_60_carried_over_the_next_winner_scores_one_more() -> None:
    rules = PRESETS["bisca3"].replace(tie=TieRule.CARRIED_OVER, target=100)
    seed = _tied_seed(rules)
    game, rng = Game(rules, seed), random.Random(seed)
    hands: list[HandScored] = []
    while len(hands) < 8 and not any(h.winner is not None for h in hands[1:]):
        for event in game.play(game.turn, rng.choice(game.legal_cards(game.turn))):
            if isinstance(event, HandScored):
                hands.append(event)
    assert hands[0].winner is None and hands[0].tied_hands_carried == 1
    ties = 0
    for hand in hands:
        if hand.winner is None:
            ties += 1
            continue
        won = hand.side_points[hand.winner]
        assert hand.game_points[hand.winner] == game_points_for(won, True) + ties
        assert hand.tied_hands_carried == 0
        break


def test_the_game_ends_when_a_side_reaches_the_target_or_at_max_hands() -> None:
    game, rng = Game(PRESETS["bisca3"], 2), random.Random(2)
    while not game.is_over:
        game.play(game.turn, rng.choice(game.legal_cards(game.turn)))
    assert game.end_reason is GameEndReason.POINT_LIMIT and max(game.totals) >= 4
    assert all(max(h.totals) < 4 for h in game.hands_played[:-1])
    quick, rng = Game(PRESETS["quick"].replace(target=100), 2), random.Random(2)
    while not quick.is_over:
        quick.play(quick.turn, rng.choice(quick.legal_cards(quick.turn)))
    assert quick.end_reason is GameEndReason.HAND_LIMIT and len(quick.hands_played) == 1


# ---------------------------------------------------------------- standings and leavers


def test_places_most_game_points_first_equal_totals_share() -> None:
    rules = PRESETS["four"]
    places = {r.seat: r.place for r in compute_standings(rules, [2, 4, 2, 1], [])}
    assert places == {1: 1, 0: 2, 2: 2, 3: 4}


def test_partners_share_their_teams_place() -> None:
    rows = compute_standings(PRESETS["pairs"], [1, 4], [])
    assert [(r.seat, r.place, r.side, r.total) for r in rows] == [
        (1, 1, 1, 4), (3, 1, 1, 4), (0, 2, 0, 1), (2, 2, 0, 1)]


def test_leavers_are_placed_last_the_first_to_leave_last_of_all() -> None:
    places = {r.seat: r.place for r in compute_standings(PRESETS["four"], [9, 0, 9, 1], [2, 0])}
    assert places == {3: 1, 1: 2, 0: 3, 2: 4}  # seat 2 left first
    teams = {r.seat: r.place for r in compute_standings(PRESETS["six"], [9, 0], [4])}
    assert teams == {1: 1, 3: 1, 5: 1, 0: 2, 2: 2, 4: 2}


def test_a_leaver_plays_on_automatically_with_the_timeout_card() -> None:
    game = Game(PRESETS["four"], 4)
    events = game.apply(Leave(1))
    rng = random.Random(4)
    while not game.is_over and game.hand_number == 0:
        events = game.play(game.turn, rng.choice(game.legal_cards(game.turn)))
        assert game.turn != 1
        for e in events:
            if isinstance(e, CardPlayed) and e.seat == 1:
                assert e.is_automatic
    assert game.standings == () or game.standings[-1].seat == 1


def test_when_only_one_side_stays_the_game_ends_at_once() -> None:
    two = Game(PRESETS["bisca3"], 1)
    two.apply(Leave(1))
    assert two.end_reason is GameEndReason.LAST_PLAYER
    assert [(r.seat, r.place) for r in two.standings] == [(0, 1), (1, 2)]
    pairs = Game(PRESETS["pairs"], 1)
    pairs.apply(Leave(1))
    assert not pairs.is_over  # seat 3 still plays for the team
    pairs.apply(Leave(3))
    assert pairs.end_reason is GameEndReason.LAST_PLAYER
    assert [r.place for r in pairs.standings] == [1, 1, 2, 2]


@pytest.mark.parametrize("hand, trump, expected", [
    ("AS 2C KD", "H", "2C"),  # no points first
    ("2H 6C AD", "H", "6C"),  # not a trump, though a higher rank
    ("3D 2S 2C", "H", "2C"),  # the lowest rank, then the suit order ♣ ♦ ♠ ♥
    ("QH JC KC", "H", "QH"),  # the fewest points, even a trump
    ("AH 7H", "H", "7H"),
])
def test_the_timeout_card_gives_away_the_fewest_points(hand: str, trump: str,
                                                       expected: str) -> None:
    assert auto_card(mask_of(cards(hand)), "CDSH".index(trump)) == card(expected)


# ---------------------------------------------------------------- refusals change nothing


def test_bad_actions_are_refused_with_the_rule_and_change_nothing() -> None:
    game = Game(PRESETS["bisca3"], 9)
    before = fingerprint(game)
    other = next(c for c in CARDS if not game.hands[0] >> c & 1)
    for seat, c, error, reason in (
            (1, game.hand(1)[0], IllegalActionError, Reason.NOT_YOUR_TURN),
            (0, other, IllegalActionError, Reason.CARD_NOT_IN_HAND),
            (2, game.hand(0)[0], InvalidActionError, Reason.INVALID_SEAT),
            (0, "10H", InvalidCardError, Reason.INVALID_CARD),
            (0, 40, InvalidActionError, Reason.INVALID_CARD),
            (0, True, InvalidActionError, Reason.INVALID_CARD),
            (0, HeartsCard(int(game.hand(0)[0])), InvalidActionError, Reason.INVALID_CARD)):
        with pytest.raises(error) as caught:
            game.play(seat, c)
        assert caught.value.reason is reason
        assert fingerprint(game) == before
    game.apply(Leave(1))
    with pytest.raises(IllegalActionError) as over:
        game.play(0, game.hand(0)[0])
    assert over.value.reason is Reason.WRONG_PHASE


# ---------------------------------------------------------------- records, generic API


def test_a_record_replays_to_the_same_game_and_a_tampered_one_is_refused() -> None:
    game, rng = Game(PRESETS["pairs"], "record"), random.Random(1)
    game.apply(Leave(2))
    while not game.is_over:
        game.play(game.turn, rng.choice(game.legal_cards(game.turn)))
    text = dumps(game)
    again = replay(text)
    assert again.totals == game.totals and again.standings == game.standings
    data = to_record(game)
    assert data["game"] == "bisca"
    data["result"]["totals"][0] += 1
    with pytest.raises(RecordError, match="differs"):
        replay(data)
    with pytest.raises(RecordError, match="not a Bisca record"):
        replay({**to_record(game), "game": "hearts"})
    broken = to_record(game)
    broken["actions"][0] = {"type": "play", "seat": 0, "card": "8S"}
    with pytest.raises(RecordError):
        replay(broken)


def test_the_openspiel_shaped_api_plays_a_whole_game() -> None:
    game, rng = Game(PRESETS["six"], 11), random.Random(11)
    while not game.is_terminal():
        player = game.current_player()
        assert player == game.turn and game.legal_actions()
        game.apply_action(rng.choice(game.legal_actions()))
    assert game.current_player() == -1 and game.legal_actions() == []
    assert game.returns() == [game.totals[s % 2] for s in range(6)]


# ---------------------------------------------------------------- properties


def _cards_in(value: Any) -> set[int]:
    """Every card anywhere in a view (dataclasses, tuples, named tuples)."""
    if isinstance(value, Card):
        return {int(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return set().union(*(_cards_in(getattr(value, f.name))
                             for f in dataclasses.fields(value)))
    if isinstance(value, tuple | list):
        return set().union(set(), *(_cards_in(v) for v in value))
    return set()


def check_views(game: Game) -> None:
    """No view holds another seat's hand or the stock's order: every card a view holds is
    its own, played, or the trump card."""
    public = {int(c) for c in game.trick_cards} | {int(c) for t in game.tricks
                                                   for c in t.cards}
    public.add(int(game.trump_card))
    if game.last_trick is not None:
        public |= {int(c) for c in game.last_trick.cards}
    assert _cards_in(public_view(game)) <= public
    for seat in range(game.players):
        view = player_view(game, seat)
        assert _cards_in(view) <= public | {int(c) for c in cards_of(game.hands[seat])}
        assert set(view.hand) == set(cards_of(game.hands[seat]))
        assert view.stock_size == len(game.stock)


PROPERTY_SETTINGS = settings(max_examples=budget(60, 600), deadline=None, database=None,
                             derandomize=True, suppress_health_check=list(HealthCheck))


@PROPERTY_SETTINGS
@given(st.randoms(use_true_random=False), st.integers(0, 2**32))
def test_every_card_is_dealt_or_drawn_once_each_hand_is_120_views_hide_records_replay(
        rng: random.Random, seed: int) -> None:
    rules = random_rules(rng)
    game = Game(rules, seed)
    n = rules.players

    holding = list(game.hands)  # what each seat held, as far as the events tell
    hand_cards = [c for h in game.hands for c in cards_of(h)]  # dealt, then drawn
    trump = game.trump_card
    check_views(game)
    while not game.is_over:
        if rng.random() < 0.003:
            events = game.apply(Leave(rng.choice([s for s in range(n) if not game.has_left[s]])))
        else:
            events = game.play(game.turn, rng.choice(game.legal_cards(game.turn)))
        for event in events:
            if isinstance(event, CardPlayed):
                if not holding[event.seat] >> event.card & 1:  # drawn and played at once
                    hand_cards.append(event.card)              # (a leaver's automatic play)
                    holding[event.seat] |= 1 << event.card
                holding[event.seat] &= ~(1 << event.card)
            if isinstance(event, CardsDrawn) and event.stock_size == 0:
                assert event.trump_card_to == event.order[-1]
            if isinstance(event, HandScored):
                assert sum(event.points) == 120
                assert sorted(hand_cards) == sorted(pack_for(n))  # each card exactly once
            if isinstance(event, HandStarted):
                holding = list(game.dealt)
                hand_cards = [c for h in game.dealt for c in cards_of(h)]
                trump = game.trump_card
        # Cards new in a hand were drawn: from the stock, the trump card last.
        for seat in range(n):
            for c in cards_of(game.hands[seat] & ~holding[seat]):
                assert c != trump or not game.stock
                hand_cards.append(c)
            holding[seat] = game.hands[seat]
        check_views(game)
    again = replay(dumps(game))  # seed + actions => the same game
    assert again.totals == game.totals and again.standings == game.standings
    assert again.hands_played == game.hands_played


# ---------------------------------------------------------------- against the oracle

ORACLE_GAMES = budget(1000, 10_000)  # bench/bisca_oracle.py plays 10,000 every time


def test_random_games_agree_with_the_independent_oracle() -> None:
    rng = random.Random(41)
    for seed in range(ORACLE_GAMES):
        play_checked(random_rules(rng), seed, rng)


# ---------------------------------------------------------------- golden games

GOLDEN = sorted((Path(__file__).parent / "fixtures" / "bisca").glob("*.json"))


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_records_still_replay_to_their_results(path: Path) -> None:
    """Stored games (greedy play, one with a leaver): the same seed still deals the same cards
    and the same actions still give the stored result."""
    record = json.loads(path.read_text())
    game = replay(record)  # raises if the result differs
    assert game.is_over and len(GOLDEN) == 2


@pytest.mark.parametrize("preset", ["bisca3", "bisca9", "pairs", "three"])
def test_a_records_deals_are_each_hands_cards_as_dealt(preset: str) -> None:
    """engine.bisca.record.deals_of (the public record's `deals`, the page's replay) gives,
    hand by hand, each seat's cards as the live game dealt them, and nothing drawn later."""
    rng = random.Random(41)
    game = Game(BiscaRules.preset(preset), seed=f"deals-{preset}")
    seen = [[sorted(str(c) for c in game.hand(s)) for s in range(game.players)]]
    while not game.is_over:
        hand = game.hand_number
        game.play(game.turn, rng.choice(game.legal_cards(game.turn)))
        if game.hand_number != hand and not game.is_over:
            seen.append([sorted(str(c) for c in game.hand(s)) for s in range(game.players)])
    deals = deals_of(game.rules, game.seed, game.actions)
    assert len(deals) == len(game.hands_played) >= 1
    assert [[sorted(d) for d in deal] for deal in deals] == seen
    for deal in deals:
        assert {len(d) for d in deal} == {game.rules.hand_size}
        assert len({c for d in deal for c in d}) == game.rules.hand_size * game.players
