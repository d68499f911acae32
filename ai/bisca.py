"""Bisca bots over what one seat may see: ``decide(view, policy, seed, budget)`` is the card
the policy plays for ``view.seat`` (an ``engine.bisca.PlayCard``), always a legal one. The
information set is the seat's ``engine.bisca.View``, which holds nothing the seat may not know.

- ``random``: any legal card.
- ``greedy``: leads the card that gives away least (the timeout card); follows an opponent's
  winning card by taking it with a higher card of its suit (the one worth most), else with
  its lowest trump when the trick holds 10 points or more, else gives the timeout card; when
  its own side is winning and it plays last, it adds its most valuable card that is not a
  trump, else the timeout card.
- ``mc``: determinized Monte Carlo. Each decision deals the unseen cards (the other hands and
  the stock above the trump card) at random many times, consistently with what the seat knows
  (its hand, every card played, the trump card under the stock or in the hand of the seat
  that drew it, the card counts), plays each legal card and the rest of the hand out with the
  greedy rule for everyone, and keeps the card with the most card points for its side on
  average (the same deals for every card; a tie goes to the timeout order). With
  ``STOCK_EMPTY``, a seat that did not follow suit once the stock was empty has none of that
  suit, and the deals respect it.

Randomness comes only from ``seed``: the same view, seed and budget give the same card (a
``Budget.seconds`` cap can cut a decision short on a slow machine).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from ai.policies import Budget
from engine.bisca import CARD_POINTS, CARDS, PlayCard, View, auto_card, legal_mask, trick_winner
from engine.bisca.cards import cards_of, mask_of, pack_for
from engine.bisca.rules import BiscaRules, FollowSuit

DEFAULT_BUDGET = Budget(playouts=100)


def decide(view: View, policy: str = "mc", seed: int = 0,
           budget: Budget | None = None) -> PlayCard:
    """The card ``policy`` plays for ``view.seat`` now.

    :raises ValueError: the seat has nothing to decide, or the policy is unknown.
    """
    try:
        choose = POLICIES[policy]
    except KeyError:
        raise ValueError(f"unknown Bisca policy {policy!r}: choose one of "
                         f"{', '.join(sorted(POLICIES))}") from None
    if view.seat is None or not view.legal_cards:
        raise ValueError(f"seat {view.seat} has nothing to decide now")
    rng = random.Random(f"{seed}:{view.hand_number}:{len(view.played) + len(view.trick)}:"
                        f"{view.seat}")
    chosen = choose(view, rng, budget or DEFAULT_BUDGET)
    assert chosen in view.legal_cards, "a policy chose an illegal card"
    return PlayCard(view.seat, CARDS[chosen])


# ---------------------------------------------------------------- the shared rule


def greedy_card(rules: BiscaRules, hand: int, trick_seats: list[int], trick_cards: list[int],
                trump_suit: int, must_follow: bool, seat: int) -> int:
    """The greedy rule (module docstring) for ``seat`` holding ``hand``."""
    led = trick_cards[0] // 10 if trick_cards else -1
    legal = legal_mask(hand, led, must_follow)
    if not trick_cards:
        return auto_card(legal, trump_suit)
    best = trick_winner(trick_cards, trump_suit)
    best_card = trick_cards[best]
    mine = rules.side_of(seat)
    if rules.side_of(trick_seats[best]) == mine:
        if len(trick_cards) == rules.players - 1:
            loads = [c for c in cards_of(legal) if c // 10 != trump_suit]
            if loads:
                return max(loads, key=lambda c: (CARD_POINTS[c], -(c % 10)))
        return auto_card(legal, trump_suit)
    same_suit = [c for c in cards_of(legal)
                 if c // 10 == best_card // 10 and c % 10 > best_card % 10]
    if same_suit and best_card // 10 != trump_suit:
        return max(same_suit, key=lambda c: (CARD_POINTS[c], c % 10))
    on_table = sum(CARD_POINTS[c] for c in trick_cards)
    if best_card // 10 != trump_suit and on_table >= 10:
        trumps = [c for c in cards_of(legal) if c // 10 == trump_suit]
        if trumps:
            return min(trumps, key=lambda c: (CARD_POINTS[c], c % 10))
    if best_card // 10 == trump_suit and same_suit:
        return max(same_suit, key=lambda c: (CARD_POINTS[c], c % 10))
    return auto_card(legal, trump_suit)


# ---------------------------------------------------------------- policies


def random_play(view: View, rng: random.Random, budget: Budget) -> int:
    return int(rng.choice(view.legal_cards))


def greedy_play(view: View, rng: random.Random, budget: Budget) -> int:
    assert view.seat is not None
    return greedy_card(view.rules, mask_of(view.hand), [s for s, _ in view.trick],
                       [int(c) for _, c in view.trick], view.trump_suit, view.must_follow,
                       view.seat)


def mc_play(view: View, rng: random.Random, budget: Budget) -> int:
    assert view.seat is not None
    legal = [int(c) for c in view.legal_cards]
    if len(legal) == 1:
        return legal[0]
    seat, rules = view.seat, view.rules
    n = rules.players
    hand = mask_of(view.hand)
    trump = int(view.trump_card)
    trump_in_stock = view.trump_drawn_by is None
    seen = hand | mask_of(view.played) | mask_of(c for _, c in view.trick) | 1 << trump
    unseen = [c for c in pack_for(n) if not seen >> c & 1]
    holds_trump = (view.trump_drawn_by if view.trump_drawn_by not in (None, seat)
                   and not (mask_of(view.played) | mask_of(c for _, c in view.trick)) >> trump & 1
                   else None)
    needs = [0 if s == seat else view.card_counts[s] - (s == holds_trump) for s in range(n)]
    stock_unknown = view.stock_size - 1 if trump_in_stock else 0
    assert sum(needs) + stock_unknown == len(unseen), "the view does not add up"
    totals = [0] * len(legal)
    follow_rule = rules.follow_suit is FollowSuit.STOCK_EMPTY
    trick_seats = [s for s, _ in view.trick]
    trick_cards = [int(c) for _, c in view.trick]

    voids = known_voids(view) if follow_rule else [0] * n
    # Seats with known voids are dealt first, from the cards they may hold.
    deal_order = sorted((s for s in range(n) if s != seat), key=lambda s: -voids[s].bit_count())

    def one_deal() -> None:
        hands = [0] * n
        for _attempt in range(20):
            rng.shuffle(unseen)
            left = list(unseen)
            for s in deal_order:
                allowed = [c for c in left if not voids[s] >> (c // 10) & 1]
                if len(allowed) < needs[s]:
                    break
                taken = allowed[:needs[s]]
                hands[s] = mask_of(taken)
                left = [c for c in left if not hands[s] >> c & 1]
            else:
                break
        else:  # no deal fits every void (never seen): deal without them
            at = 0
            for s in deal_order:
                hands[s] = mask_of(unseen[at:at + needs[s]])
                at += needs[s]
            left = unseen[at:]
        if holds_trump is not None:
            hands[holds_trump] |= 1 << trump
        hands[seat] = hand
        stock = left + ([trump] if trump_in_stock else [])
        for i, c in enumerate(legal):
            totals[i] += _playout(rules, list(hands), list(stock), list(trick_seats),
                                  list(trick_cards), trump // 10, follow_rule, seat, c)

    _run(budget, one_deal)
    order = sorted(range(len(legal)), key=lambda i: _auto_rank(legal[i], trump // 10))
    return legal[max(order, key=lambda i: totals[i])]  # the first of the best: timeout order


def known_voids(view: View) -> list[int]:
    """Per seat, a bitmask of the suits (bit = suit) it is known to lack: it played another
    suit to a trick led in that suit while following was compulsory (the stock empty)."""
    rules = view.rules
    n = rules.players
    draw_rounds = (len(pack_for(n)) - n * rules.hand_size) // n
    voids = [0] * n
    tricks = [(t.leader, list(t.cards)) for t in view.tricks if t.trick_number >= draw_rounds]
    if view.must_follow and view.trick:
        tricks.append((view.trick[0][0], [c for _, c in view.trick]))
    for leader, played in tricks:
        led = played[0] // 10
        for i, c in enumerate(played[1:], start=1):
            if c // 10 != led:
                voids[(leader + i) % n] |= 1 << led
    return voids


def _auto_rank(c: int, trump_suit: int) -> tuple[int, bool, int, int]:
    return (CARD_POINTS[c], c // 10 == trump_suit, c % 10, c // 10)


def _playout(rules: BiscaRules, hands: list[int], stock: list[int], trick_seats: list[int],
             trick_cards: list[int], trump_suit: int, follow_rule: bool, seat: int,
             first: int) -> int:
    """Play ``first`` for ``seat``, then the hand out with the greedy rule for everyone;
    the card points ``seat``'s side takes from here."""
    n = rules.players
    mine = rules.side_of(seat)
    won = 0
    turn, card = seat, first
    while True:
        hands[turn] &= ~(1 << card)
        trick_seats.append(turn)
        trick_cards.append(card)
        if len(trick_cards) == n:
            winner = trick_seats[trick_winner(trick_cards, trump_suit)]
            if rules.side_of(winner) == mine:
                won += sum(CARD_POINTS[c] for c in trick_cards)
            trick_seats.clear()
            trick_cards.clear()
            if stock:
                for i in range(n):
                    hands[(winner + i) % n] |= 1 << stock.pop(0)
            if not hands[winner]:
                return won
            turn = winner
        else:
            turn = (turn + 1) % n
        card = greedy_card(rules, hands[turn], trick_seats, trick_cards, trump_suit,
                           follow_rule and not stock, turn)


def _run(budget: Budget, deal: Callable[[], None]) -> None:
    if budget.seconds is None:
        for _ in range(budget.playouts):
            deal()
        return
    deadline = time.perf_counter() + budget.seconds
    for i in range(budget.playouts):
        if i and time.perf_counter() > deadline:
            return
        deal()


Chooser = Callable[[View, random.Random, Budget], int]
POLICIES: dict[str, Chooser] = {"random": random_play, "greedy": greedy_play, "mc": mc_play}
