"""Property tests over thousands of random games in 3, 4 and 5 players."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import (
    CardPlayed,
    ChooseMoon,
    EngineError,
    Game,
    HandScored,
    HandStarted,
    Leave,
    MoonChoice,
    MoonRule,
    PassCards,
    Phase,
    PlayCard,
    Rules,
    player_view,
    public_view,
)
from engine.cards import CARDS, mask_of
from engine.game import DECKS
from tests.helpers.budget import budget
from tests.helpers.games import fingerprint, random_action

GAMES_PER_PLAYER_COUNT = budget(100, 700)  # 700 in the thorough profile
PROPERTY_SETTINGS = settings(max_examples=GAMES_PER_PLAYER_COUNT, deadline=None, database=None,
                             derandomize=True, suppress_health_check=list(HealthCheck))

rules_strategy = st.builds(
    Rules,
    max_hands=st.integers(1, 4),
    point_limit=st.sampled_from([20, 60, 100]),
    moon=st.sampled_from(list(MoonRule)),
    points_on_first_trick=st.booleans(),
    queen_breaks_hearts=st.booleans(),
)


def view_cards(view: object) -> int:
    v = view  # type: ignore[assignment]
    mask = mask_of([*v.hand, *v.pass_choice, *v.received, *v.legal_cards])  # type: ignore[attr-defined]
    mask |= mask_of(c for _, c in v.trick)  # type: ignore[attr-defined]
    if v.last_trick is not None:  # type: ignore[attr-defined]
        mask |= mask_of(v.last_trick.cards)  # type: ignore[attr-defined]
    return mask


def check_views(game: Game) -> None:
    n = game.players
    passes = [p or 0 for p in game.passes] if game.phase is Phase.PASSING else [0] * n
    for seat in range(n):
        view = player_view(game, seat)
        assert mask_of(view.hand) == game.hands[seat]
        known = mask_of(view.pass_choice) | mask_of(view.received)
        others = 0
        for other in range(n):
            if other != seat:
                others |= game.hands[other] | passes[other]
        assert not (view_cards(view) & ~known) & others, "a view shows another seat's card"
    spectator = public_view(game)
    hidden = 0
    for seat in range(n):
        hidden |= game.hands[seat] | passes[seat]
    assert not view_cards(spectator) & hidden
    assert spectator.hand == spectator.pass_choice == spectator.received == ()


def illegal_actions(game: Game, rng: random.Random) -> list[object]:
    """Actions that must be refused now."""
    n = game.players
    acting = game.to_act()
    idle = [s for s in range(n) if s not in acting]
    out: list[object] = []
    if game.phase is Phase.PLAYING:
        seat = acting[0]
        legal = game.legal_mask(seat)
        wrong = [c for c in CARDS if not legal >> c & 1]
        out.append(PlayCard(seat, rng.choice(wrong)))
        if idle:
            s = rng.choice(idle)
            out.append(PlayCard(s, rng.choice(CARDS)))
        out.append(PassCards(seat, tuple(game.legal_cards(seat)[:3])))
    elif game.phase is Phase.PASSING:
        seat = acting[0]
        hand = game.legal_cards(seat)
        out.append(PassCards(seat, hand[:2]))
        foreign = [c for c in CARDS if not game.hands[seat] >> c & 1]
        out.append(PassCards(seat, (*hand[:2], rng.choice(foreign))))
        out.append(PlayCard(seat, hand[0]))
        if idle:
            s = rng.choice(idle)
            out.append(PassCards(s, tuple(game.hand(s)[:3])))
    elif game.phase is Phase.MOON_CHOICE:
        out += [ChooseMoon(s, MoonChoice.ADD_TO_OTHERS) for s in idle[:1]]
    gone = [s for s in range(n) if game.has_left[s]]
    out += [Leave(s) for s in gone[:1]]
    out.append(PlayCard(n, CARDS[0]))
    return out


def run_random_game(players: int, rules: Rules, seed: int) -> None:
    rng = random.Random(seed)
    rules = rules.replace(players=players)
    game = Game(rules, seed)
    deck = mask_of(DECKS[players])
    played = 0
    leaves_left = rng.choice([0, 0, 1, 2])
    while not game.is_over:
        # Cards are conserved: in a hand, or played this hand; never in two places.
        union = played
        for h in game.hands:
            assert not union & h
            union |= h
        assert union == deck
        acting = game.to_act()
        assert acting, "someone must always be able to act"
        for seat in acting:
            auto = game.auto_action(seat)
            if isinstance(auto, PlayCard):
                assert auto.card in game.legal_cards(seat)
            elif isinstance(auto, PassCards):
                assert len(set(auto.cards)) == 3 and mask_of(auto.cards) & ~game.hands[seat] == 0
            if game.phase is Phase.PLAYING:
                assert game.legal_mask(seat)
        before = fingerprint(game)
        for bad in illegal_actions(game, rng):
            try:
                game.apply(bad)  # type: ignore[arg-type]
            except EngineError:
                pass
            else:
                raise AssertionError(f"{bad} was accepted")
            assert fingerprint(game) == before
        check_views(game)
        if leaves_left and rng.random() < 0.01:
            stayers = [s for s in range(players) if not game.has_left[s]]
            action: object = Leave(rng.choice(stayers))
            leaves_left -= 1
        elif rng.random() < 0.1:
            action = game.auto_action(rng.choice(acting))
        else:
            action = random_action(game, rng)
        for event in game.apply(action):  # type: ignore[arg-type]
            if isinstance(event, CardPlayed):
                played |= 1 << event.card
            elif isinstance(event, HandStarted):
                played = 0
            elif isinstance(event, HandScored):
                check_hand_points(rules, event)
    assert game.standings and sorted(r.seat for r in game.standings) == list(range(players))


def check_hand_points(rules: Rules, hand: HandScored) -> None:
    assert sum(hand.taken) == 26
    shooter = next((s for s, t in enumerate(hand.taken) if t == 26), None)
    if shooter is None or rules.moon is MoonRule.DISABLED:
        assert hand.points == hand.taken and hand.moon_shooter is None
        return
    assert hand.moon_shooter == shooter
    others = tuple(0 if s == shooter else 26 for s in range(len(hand.taken)))
    if hand.moon_choice is MoonChoice.SUBTRACT_FROM_SELF:
        assert -26 <= hand.points[shooter] <= 0 and sum(hand.points) == hand.points[shooter]
        assert hand.totals[shooter] >= 0
    else:
        assert hand.points == others


@PROPERTY_SETTINGS
@given(rules=rules_strategy, seed=st.integers(0, 2**32))
def test_random_games_3_players(rules: Rules, seed: int) -> None:
    run_random_game(3, rules, seed)


@PROPERTY_SETTINGS
@given(rules=rules_strategy, seed=st.integers(0, 2**32))
def test_random_games_4_players(rules: Rules, seed: int) -> None:
    run_random_game(4, rules, seed)


@PROPERTY_SETTINGS
@given(rules=rules_strategy, seed=st.integers(0, 2**32))
def test_random_games_5_players(rules: Rules, seed: int) -> None:
    run_random_game(5, rules, seed)
