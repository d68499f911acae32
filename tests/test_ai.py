"""The bots (ai/): information sets hold only what a seat may know; every policy decides
legally in every phase, the same way from the same seed; the worker pool shuts down."""

from __future__ import annotations

import multiprocessing
import random
from collections import Counter

import pytest

from ai import POLICIES, BotPool, Budget, InfoTracker, decide, info_from_game
from ai.infoset import InfoSet
from ai.playout import duck_card
from engine import (
    ChooseMoon,
    Game,
    MoonChoice,
    MoonRule,
    PassCards,
    Phase,
    PlayCard,
    Rules,
    card,
    replay_actions,
)
from engine.cards import QUEEN_SPADES, mask_of
from tests.helpers.games import cards, rig

TINY = Budget(playouts=2)


def check_legal(game: Game, seat: int, action: object) -> None:
    """The action is one the engine accepts from ``seat`` now."""
    if isinstance(action, PlayCard):
        assert action.seat == seat and action.card in game.legal_cards(seat)
    elif isinstance(action, PassCards):
        assert action.seat == seat and len(set(action.cards)) == 3
        assert mask_of(action.cards) & ~game.legal_mask(seat) == 0
    else:
        assert isinstance(action, ChooseMoon)
        assert game.phase is Phase.MOON_CHOICE and seat == game.moon_shooter
        assert action.seat == seat and action.choice in tuple(MoonChoice)


def situations(game: Game, seat: int) -> set[str]:
    """The play situations the tests want covered."""
    out = set()
    if game.phase is Phase.PASSING:
        out.add("passing")
    elif game.phase is Phase.PLAYING:
        if game.trick_number == 0:
            out.add("first trick")
        if not game.trick_cards and not game.hearts_broken and game.trick_number:
            out.add("lead, hearts not broken")
        if game.trick_cards:
            led = game.trick_cards[0] // 13
            if not game.hands[seat] >> (13 * led) & 0x1FFF:
                out.add("void")
            if len(game.trick_cards) == game.players - 1:
                out.add("last to play")
    return out


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_decides_legally_in_every_phase(policy: str) -> None:
    seen: Counter[str] = Counter()
    variants = [Rules(players=4, max_hands=2), Rules(players=3, max_hands=2),
                Rules(players=5, max_hands=1, points_on_first_trick=True),
                Rules(players=4, max_hands=1, queen_breaks_hearts=True,
                      moon=MoonRule.DISABLED)]
    for seed, rules in enumerate(variants * 2):
        game = Game(rules, seed)
        rng = random.Random(seed)
        while not game.is_over:
            seat = rng.choice(game.to_act())
            seen.update(situations(game, seat))
            action = decide(info_from_game(game, seat), policy, seed, TINY)
            check_legal(game, seat, action)
            game.apply(action)
    assert set(seen) >= {"passing", "first trick", "lead, hearts not broken", "void",
                         "last to play"}


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_makes_the_moon_choice(policy: str) -> None:
    moon_4 = ["2C 3C 4C 5C 6C 7C 8C 9C 10C JC QC KC AC", "2D 3D 4D 5D 6D 7D 8D 9D 10D JD QD KD AD",
              "2S 3S 4S 5S 6S 7S 8S 9S 10S JS QS KS AS", "2H 3H 4H 5H 6H 7H 8H 9H 10H JH QH KH AH"]
    game = rig(Game(Rules(moon=MoonRule.SHOOTER_CHOICE), 1), moon_4)
    while game.phase is Phase.PLAYING:
        seat = game.turn
        game.apply(decide(info_from_game(game, seat), "duck", 0, TINY))
    assert game.phase is Phase.MOON_CHOICE and game.moon_shooter == 0
    action = decide(info_from_game(game, 0), policy, 0, TINY)
    check_legal(game, 0, action)
    assert action == ChooseMoon(0, game.auto_moon_choice())
    with pytest.raises(ValueError):
        decide(info_from_game(game, 1), policy, 0, TINY)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_same_seed_same_decisions(policy: str) -> None:
    for seed in range(3):
        game = Game(Rules(max_hands=1), seed)
        first: list[object] = []
        while not game.is_over:
            seat = game.to_act()[0]
            info = info_from_game(game, seat)
            action = decide(info, policy, seed, Budget(playouts=4))
            assert decide(info, policy, seed, Budget(playouts=4)) == action
            first.append(action)
            game.apply(action)
        again = Game(Rules(max_hands=1), seed)
        for action in first:
            seat = again.to_act()[0]
            assert decide(info_from_game(again, seat), policy, seed, Budget(playouts=4)) == action
            again.apply(action)  # type: ignore[arg-type]


def hide_differently(game: Game, seat: int, rng: random.Random) -> Game:
    """The same game, but other seats' hidden cards (hands and passes) changed around."""
    other = replay_actions(game.rules, game.seed, game.actions)
    others = [s for s in range(game.players) if s != seat]
    a, b = rng.sample(others, 2)
    if other.hands[a] and other.hands[b]:
        ca = rng.choice([c for c in range(52) if other.hands[a] >> c & 1])
        cb = rng.choice([c for c in range(52) if other.hands[b] >> c & 1])
        other.hands[a] ^= (1 << ca) | (1 << cb)
        other.hands[b] ^= (1 << ca) | (1 << cb)
    for s in others:
        if other.passes[s] is not None:
            other.passes[s] = (other.passes[s] or 0) ^ (1 << 51)
        other.received[s] ^= 1 << 50
        other.dealt[s] ^= 1 << 49
    return other


def test_an_information_set_holds_no_hidden_card_of_another_seat() -> None:
    rng = random.Random(7)
    for seed in range(6):
        game = Game(Rules(players=4 if seed % 2 else 3, max_hands=2), seed)
        while not game.is_over:
            for seat in range(game.players):
                info = info_from_game(game, seat)
                twin = info_from_game(hide_differently(game, seat, rng), seat)
                assert info == twin
                assert info.hand == game.hands[seat]
            seat = rng.choice(game.to_act())
            game.apply(decide(info_from_game(game, seat), "random", seed))


def test_the_tracker_builds_the_same_information_set_from_the_event_stream() -> None:
    for seed, rules in enumerate([Rules(max_hands=3), Rules(players=5, max_hands=2),
                                  Rules(players=3, max_hands=2, queen_breaks_hearts=True)]):
        game = Game(rules, seed)
        trackers = [InfoTracker(s, rules) for s in range(game.players)]
        events = list(game.started_events)
        while True:
            for tracker in trackers:
                for event in events:
                    tracker.observe(event)
                private = info_from_game(game, tracker.seat)  # what the seat's view shows
                tracker.see(private.hand, private.passed, private.received, game.to_act())
                if not game.is_over:
                    assert tracker.info() == info_from_game(game, tracker.seat)
            if game.is_over:
                break
            seat = game.to_act()[0]
            events = game.apply(decide(info_from_game(game, seat), "greedy", seed))


def test_the_information_set_derives_voids_counts_and_captured_points() -> None:
    hands = ["2C 3C 4C 5C 6C 7C 8C 9C 10C JC QC KC AC", "2D 3D 4D 5D 6D 7D 8D 9D 10D JD QD KD QS",
             "2S 3S 4S 5S 6S 7S 8S 9S 10S JS AD KS AS", "2H 3H 4H 5H 6H 7H 8H 9H 10H JH QH KH AH"]
    game = rig(Game(Rules(), 3), hands)
    for text in ("2C", "2D", "2S", "2H", "3C", "QS"):
        game.play(game.turn, card(text))
    info = info_from_game(game, 0)
    assert info.voids() == (0, 1, 1, 1)
    assert info.card_counts() == (11, 11, 12, 12)
    assert info.captured() == (1 << card("2H"), 0, 0, 0)  # only hearts: 2H on the first trick
    assert info.trick == ((0, card("3C")), (1, QUEEN_SPADES))
    assert info.played_by(1) == mask_of(cards("2D QS"))


def test_duck_follows_under_the_winner_and_sheds_the_queen() -> None:
    hearts = mask_of(cards("4H 9H KH"))
    assert duck_card(hearts, 3, card("10H"), 1, False) == card("9H")  # under the winner
    spades = mask_of(cards("QS KS 3S"))
    assert duck_card(spades, 2, card("2S"), 0, True) == card("KS")  # last, no points: not QS
    assert duck_card(spades, 2, card("2S"), 0, False) == card("3S")  # lowest, not QS
    assert duck_card(spades | hearts, 1, card("2D"), 0, False) == QUEEN_SPADES  # void: QS
    assert duck_card(hearts | mask_of(cards("AC")), 1, card("2D"), 0, False) == card("KH")
    assert duck_card(mask_of(cards("5C 5H 9D")), -1, -1, 0, False) == card("5C")  # lead low


async def test_the_pool_decides_off_the_loop_and_shuts_down() -> None:
    game = Game(Rules(max_hands=1), 5)
    pool = BotPool(workers=1)
    try:
        while game.phase is Phase.PASSING:
            seat = game.to_act()[0]
            action = await pool.decide(info_from_game(game, seat), "mc", 1, TINY)
            check_legal(game, seat, action)
            game.apply(action)
        seat = game.turn
        action = await pool.decide(info_from_game(game, seat), "mc", 1, TINY)
        check_legal(game, seat, action)
        with pytest.raises(ValueError):
            await pool.decide(info_from_game(game, (seat + 1) % 4), "mc", 1, TINY)
    finally:
        pool.shutdown()
    assert not multiprocessing.active_children()
    with pytest.raises(RuntimeError):
        await pool.decide(info_from_game(game, seat), "mc", 1, TINY)
    async with BotPool() as scoped:
        assert isinstance(await scoped.decide(info_from_game(game, seat), "duck"), PlayCard)
    assert not multiprocessing.active_children()


def test_an_information_set_is_a_value() -> None:
    info = info_from_game(Game(Rules(), 1), 0)
    assert isinstance(info, InfoSet) and hash(info) == hash(info_from_game(Game(Rules(), 1), 0))


def test_a_time_capped_decision_is_still_legal() -> None:
    game = Game(Rules(max_hands=1), 9)
    while not game.is_over:
        seat = game.to_act()[0]
        action = decide(info_from_game(game, seat), "mc", 3, Budget(playouts=10**6, seconds=0.001))
        check_legal(game, seat, action)
        game.apply(action)


def test_greedy_is_the_clients_greedy() -> None:
    """ai's greedy decides what the clients' choose_greedy (clients/games/hearts.py) decides
    from the seat's view."""
    from copas.v1 import cards_pb2, copas_pb2

    from clients.games.hearts import choose_greedy

    suits = [cards_pb2.SUIT_CLUBS, cards_pb2.SUIT_DIAMONDS, cards_pb2.SUIT_SPADES,
             cards_pb2.SUIT_HEARTS]

    def pb(c: int) -> cards_pb2.Card:
        return cards_pb2.Card(suit=suits[c // 13], rank=c % 13 + 2, text=str(c))

    compared = 0
    for seed in range(6):
        game = Game(Rules(players=3 + seed % 3, max_hands=2), seed)
        while not game.is_over:
            seat = game.to_act()[0]
            view = copas_pb2.TableView(
                phase=copas_pb2.PHASE_PASSING if game.phase is Phase.PASSING
                else copas_pb2.PHASE_PLAYING,
                legal_cards=[pb(c) for c in game.legal_cards(seat)],
                players=[copas_pb2.PlayerState(seat=s) for s in range(game.players)])
            view.trick.cards.extend(copas_pb2.TrickCard(seat=s, card=pb(c))
                                    for s, c in zip(game.trick_seats, game.trick_cards))
            theirs = {c.suit * 100 + c.rank for c in choose_greedy(view, random.Random(0))}
            action = decide(info_from_game(game, seat), "greedy", seed)
            chosen = action.cards if isinstance(action, PassCards) else (action.card,)  # type: ignore[union-attr]
            assert {suits[c // 13] * 100 + c % 13 + 2 for c in chosen} == theirs
            compared += 1
            game.apply(action)
    assert compared > 200


@pytest.mark.parametrize(("hand", "expected"), [
    ("2C 3C QS KS AS 2H 3D 4D 5D 6D 7D 8D 9D", "QS KS AS"),  # A♠ K♠ Q♠ first
    ("2C 3C 4S KS 9H 2H 3D 4D 5D 6D 7D KD AC", "KS 9H AC"),  # 9♥ counts as an ace
    ("2C 3C 4S 5S 8H 2H 3D 4D 5D 6D 7D KD QC", "8H KD QC"),  # 8♥ as a king
    ("2C 3C 4S 5S 7H 2H 3D 4D 5D 6D 7D KD QC", "7H KD QC"),  # 7♥ as a queen, ties to ♥
])
def test_the_duck_pass(hand: str, expected: str) -> None:
    from ai.playout import duck_pass

    assert duck_pass(mask_of(cards(hand))) == mask_of(cards(expected))
