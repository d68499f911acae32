"""Bot policies over information sets: ``decide(info, policy, seed, budget)`` is the action
the policy takes for ``info.seat`` (a pass, a card or a moon choice), always a legal one.

- ``random``: any legal card; any three cards to pass.
- ``greedy``: a faithful port of ``clients/bots.py`` ``choose_greedy`` (the benchmark's
  reference): passes A♠ K♠ Q♠ first, then hearts, then by rank; leads low; follows under the
  winner, else its highest card when last to a pointless trick (Q♠ included), else its lowest;
  when void sheds points, then its highest card.
- ``duck``: pass the three most dangerous cards (A♠, K♠ and Q♠ first, then by rank with a
  heart counted 5 ranks higher); lead the lowest card (a non-heart on ties); follow with the
  highest card below the current winner, else, last to play in a trick with no points, the
  highest card that is not Q♠, else the lowest card that is not Q♠; when void discard Q♠,
  else the highest heart, else the highest card. Rank ties go to the later suit (♥ ♠ ♦ ♣)
  when shedding and to the earlier one when leading low.
- ``mc`` (the strong one): determinized Monte Carlo. Each decision deals the unseen cards
  many times, consistently with everything the seat knows (voids shown, the cards it passed
  are with their receiver, cards played), plays each legal card and the rest of the hand
  out with the duck rule for everyone, and keeps the card with the fewest points on average
  (the same deals for every card). Shooting the moon: when nobody else has taken a point,
  each card is also played out with the bot going for the moon, deal by deal the better plan
  counts; the defence comes from the playouts, which score a moon as 26 for everyone else.
  The pass is chosen the same way among a few candidate passes (the duck pass, voiding a
  short suit, keeping a well-guarded Q♠), each played out over sampled deals.

Every policy takes the automatic moon choice (the better place, a tie to "add 26").
Randomness comes only from ``seed``: the same information set, seed and budget give the
same decision (a ``Budget.seconds`` cap can cut a decision short on a slow machine).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import ai.playout as playout  # not `from ai import`: ai/__init__.py imports this module
from ai.infoset import InfoSet
from engine import (
    CARDS,
    Action,
    ChooseMoon,
    MoonChoice,
    MoonRule,
    PassCards,
    Phase,
    PlayCard,
    compute_standings,
)
from engine.cards import QUEEN_SPADES, SUIT_MASKS, cards_of
from engine.game import opening_card_for


@dataclass(frozen=True, slots=True)
class Budget:
    """How hard ``mc`` thinks: ``playouts`` deals per decision (each plays out every legal
    card); ``seconds``, if set, stops earlier when the clock says so (then decisions depend
    on the machine's speed)."""

    playouts: int = 200
    seconds: float | None = None


DEFAULT_BUDGET = Budget()
_MOON_RULE = {MoonRule.OTHERS_PLUS_26: playout.MOON_OTHERS_PLUS_26,
              MoonRule.SHOOTER_CHOICE: playout.MOON_OTHERS_PLUS_26,
              MoonRule.DISABLED: playout.MOON_DISABLED}


def decide(info: InfoSet, policy: str = "mc", seed: int = 0,
           budget: Budget | None = None) -> Action:
    """The action ``policy`` takes for ``info.seat`` now.

    :raises ValueError: the seat has nothing to decide, or the policy is unknown.
    """
    try:
        choose_pass, choose_play = POLICIES[policy]
    except KeyError:
        raise ValueError(f"unknown policy {policy!r}: choose one of "
                         f"{', '.join(sorted(POLICIES))}") from None
    seat = info.seat
    budget = budget or DEFAULT_BUDGET
    if info.phase is Phase.MOON_CHOICE and info.moon_shooter == seat:
        return ChooseMoon(seat, moon_choice(info))
    legal = info.legal()
    if not legal:
        raise ValueError(f"seat {seat} has nothing to decide now ({info.phase})")
    rng = random.Random(f"{seed}:{info.hand_number}:{len(info.plays)}:{seat}")
    if info.phase is Phase.PASSING:
        chosen = choose_pass(info, rng, budget)
        assert chosen.bit_count() == 3 and not chosen & ~info.hand
        return PassCards(seat, cards_of(chosen))
    card = choose_play(info, rng, budget)
    assert legal >> card & 1, "a policy chose an illegal card"
    return PlayCard(seat, CARDS[card])


def moon_choice(info: InfoSet) -> MoonChoice:
    """The better place for the shooter; on a tie, add 26 to the others (as the engine's
    automatic choice)."""
    places = {}
    for choice in (MoonChoice.ADD_TO_OTHERS, MoonChoice.SUBTRACT_FROM_SELF):
        after = list(info.totals)
        for s in range(info.players):
            if choice is MoonChoice.SUBTRACT_FROM_SELF:
                after[s] -= min(26, after[s]) if s == info.seat else 0
            elif s != info.seat:
                after[s] += 26
        places[choice] = next(r.place for r in compute_standings(after, info.left_order)
                              if r.seat == info.seat)
    if places[MoonChoice.SUBTRACT_FROM_SELF] < places[MoonChoice.ADD_TO_OTHERS]:
        return MoonChoice.SUBTRACT_FROM_SELF
    return MoonChoice.ADD_TO_OTHERS


# ---------------------------------------------------------------- random


def random_pass(info: InfoSet, rng: random.Random, budget: Budget) -> int:
    return _mask(rng.sample(_cards(info.legal()), 3))


def random_play(info: InfoSet, rng: random.Random, budget: Budget) -> int:
    return rng.choice(_cards(info.legal()))


# ---------------------------------------------------------------- greedy (clients/bots.py)


def greedy_pass(info: InfoSet, rng: random.Random, budget: Budget) -> int:
    def danger(c: int) -> tuple[bool, bool, int]:
        return c // 13 == 2 and c % 13 >= 10, c >= 39, c % 13
    return _mask(sorted(_cards(info.legal()), key=danger, reverse=True)[:3])


def greedy_play(info: InfoSet, rng: random.Random, budget: Budget) -> int:
    legal = _cards(info.legal())
    trick = info.trick
    if not trick:
        return min(legal, key=lambda c: (_points(c) > 0, c % 13))
    led = trick[0][1] // 13
    following = [c for c in legal if c // 13 == led]
    if following:
        winning = max(c % 13 for _, c in trick if c // 13 == led)
        under = [c for c in following if c % 13 < winning]
        if under:
            return max(under, key=lambda c: c % 13)
        no_points_yet = not any(_points(c) for _, c in trick)
        if len(trick) == info.players - 1 and no_points_yet:
            return max(following, key=lambda c: c % 13)
        return min(following, key=lambda c: c % 13)
    return max(legal, key=lambda c: (_points(c), c % 13))


# ---------------------------------------------------------------- duck


def duck_pass(info: InfoSet, rng: random.Random, budget: Budget) -> int:
    return playout.duck_pass(info.hand)


def duck_play(info: InfoSet, rng: random.Random, budget: Budget) -> int:
    legal = info.legal()
    trick = info.trick
    if not trick:
        return playout.duck_card(legal, -1, -1, 0, False)
    led = trick[0][1] // 13
    best = max(c for _, c in trick if c // 13 == led)
    points = sum(_points(c) for _, c in trick)
    return playout.duck_card(legal, led, best, points, len(trick) == info.players - 1)


# ---------------------------------------------------------------- mc


def mc_play(info: InfoSet, rng: random.Random, budget: Budget) -> int:
    legal = info.legal()
    candidates = _cards(legal)
    if len(candidates) == 1:
        return candidates[0]
    n = info.players
    seat = info.seat
    played = info.played
    counts = info.card_counts()
    fixed = [0] * n
    if info.passed and info.phase is Phase.PLAYING:
        target = info.pass_target()
        fixed[target] = info.passed & ~info.played_by(target)
    known = info.hand | played
    for mask in fixed:
        known |= mask
    unseen = info.deck & ~known
    need = [0 if s == seat else counts[s] - fixed[s].bit_count() for s in range(n)]
    trick = info.trick
    leader = trick[0][0] if trick else seat
    others_clean = all(info.taken[s] == 0 for s in range(n) if s != seat)
    strong = (info.hand & _HIGH).bit_count() >= 5
    try_moon = info.rules.moon is not MoonRule.DISABLED and others_clean and (
        info.taken[seat] > 0 or strong)
    totals = _run(budget, rng, lambda samples, seed: playout.evaluate_plays(
        seat, candidates, info.hand, unseen, need, list(info.voids()), fixed,
        [c for _, c in trick], leader, info.trick_number, info.hearts_broken,
        list(info.taken), opening_card_for(n), not info.rules.points_on_first_trick,
        info.rules.queen_breaks_hearts, _MOON_RULE[info.rules.moon], try_moon, samples, seed),
        len(candidates))
    return candidates[min(range(len(candidates)), key=lambda k: totals[k])]


def mc_pass(info: InfoSet, rng: random.Random, budget: Budget) -> int:
    hand = info.hand
    candidates = pass_candidates(hand)
    if len(candidates) == 1:
        return candidates[0]
    n = info.players
    target = info.pass_target()
    totals = _run(Budget(max(4, budget.playouts // 4), budget.seconds), rng,
                  lambda samples, seed: playout.evaluate_passes(
                      info.seat, hand, candidates, target, info.deck & ~hand, n,
                      info.rules.hand_size, opening_card_for(n),
                      not info.rules.points_on_first_trick, info.rules.queen_breaks_hearts,
                      _MOON_RULE[info.rules.moon], samples, seed), len(candidates))
    return candidates[min(range(len(candidates)), key=lambda k: totals[k])]


def pass_candidates(hand: int) -> list[int]:
    """A few passes worth comparing: the duck pass; voiding each short side suit (its cards,
    then the most dangerous others); keeping a Q♠ guarded by four or more spades."""
    duck = playout.duck_pass(hand)
    out = [duck]

    for suit in (0, 1):  # clubs, diamonds
        block = hand & SUIT_MASKS[suit]
        if 0 < block.bit_count() <= 3:
            out.append(_top_up(hand, block))
    spades = hand & SUIT_MASKS[2]
    if hand >> QUEEN_SPADES & 1 and spades.bit_count() >= 5:
        out.append(_top_up(hand, 0, keep=spades & ~(1 << 38) & ~(1 << 37)))
    unique: list[int] = []
    for mask in out:
        if mask.bit_count() == 3 and mask not in unique:
            unique.append(mask)
    return unique


def _top_up(hand: int, chosen: int, keep: int = 0) -> int:
    """``chosen`` plus the most dangerous other cards (not in ``keep``), three in all."""
    while chosen.bit_count() < 3:
        rest = hand & ~chosen & ~keep
        if not rest:
            rest = hand & ~chosen
        best = max(_cards(rest), key=playout.pass_danger)
        chosen |= 1 << best
    return chosen


def _run(budget: Budget, rng: random.Random, evaluate: Callable[[int, int], list[int]],
         size: int) -> list[int]:
    """Run ``evaluate(samples, seed)`` up to ``budget.playouts`` samples, in slices when
    there is a clock to watch; sum the totals."""
    seed = rng.getrandbits(31)
    if budget.seconds is None:
        return evaluate(max(1, budget.playouts), seed)
    deadline = time.perf_counter() + budget.seconds
    totals = [0] * size
    done = 0
    step = 8
    while done < budget.playouts:
        part = evaluate(min(step, budget.playouts - done), seed + done)
        totals = [a + b for a, b in zip(totals, part)]
        done += step
        if time.perf_counter() >= deadline:
            break
    return totals


_HIGH = 0
for _c in range(52):
    if _c % 13 >= 10 and (_c >= 39 or _c // 13 == 2):
        _HIGH |= 1 << _c


def _cards(mask: int) -> list[int]:
    return [int(c) for c in cards_of(mask)]


def _mask(cards: list[int]) -> int:
    mask = 0
    for c in cards:
        mask |= 1 << c
    return mask


def _points(c: int) -> int:
    return 13 if c == QUEEN_SPADES else 1 if c >= 39 else 0


Chooser = Callable[[InfoSet, random.Random, Budget], int]
POLICIES: dict[str, tuple[Chooser, Chooser]] = {
    "random": (random_pass, random_play),
    "greedy": (greedy_pass, greedy_play),
    "duck": (duck_pass, duck_play),
    "mc": (mc_pass, mc_play),
}
