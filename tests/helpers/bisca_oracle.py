"""An independent model of Bisca, written from docs/RULES.md ("Bisca") and not from the
engine: its own cards (text such as "7H"), ranking, card points, legal moves, trick winner,
drawing, hand scoring, game end and places. It takes only the deal from the engine (the
shuffle is the seed's business) and checks the deal against the written rules; everything
after the deal it works out itself, as a list of expected events in plain values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

RANKS_HIGH_TO_LOW = "A7KJQ65432"
POINTS = {"A": 11, "7": 10, "K": 4, "J": 3, "Q": 2}
SUITS = "CDSH"  # also the timeout's suit order


def pack(players: int) -> set[str]:
    cards = {r + s for r in RANKS_HIGH_TO_LOW for s in SUITS}
    if players == 3:
        cards.discard("2D")
    if players == 6:
        cards -= {"2" + s for s in SUITS}
    return cards


def points(card: str) -> int:
    return POINTS.get(card[0], 0)


def beats(challenger: str, best: str, trump: str) -> bool:
    """Does ``challenger``, played after ``best`` (the trick's winner so far), take over?"""
    if challenger[1] == best[1]:
        return RANKS_HIGH_TO_LOW.index(challenger[0]) < RANKS_HIGH_TO_LOW.index(best[0])
    return challenger[1] == trump


class OracleViolation(AssertionError):
    """The engine did something the written rules do not allow (or the oracle expected
    something else)."""


Deal = tuple[list[set[str]], list[str]]  # the hands and the stock (next card first)


class BiscaOracle:
    def __init__(self, rules: dict[str, Any], deal_of: Callable[[int], Deal]) -> None:
        self.players: int = rules["players"]
        self.partnerships: bool = rules["partnerships"]
        self.hand_size: int = rules["hand_size"]
        self.follow_when_stock_empty = rules["follow_suit"] == "STOCK_EMPTY"
        self.margin_bonus: bool = rules["margin_bonus"]
        self.carry_ties = rules["tie"] == "CARRIED_OVER"
        self.target: int = rules["target"]
        self.max_hands: int = rules["max_hands"]
        self.deal_of = deal_of
        n = self.players
        self.n_sides = 2 if self.partnerships else n
        self.totals = [0] * self.n_sides
        self.left: list[int] = []  # seats, in the order they left
        self.hands_done = 0
        self.carried = 0
        self.over = False
        self.reason: str | None = None
        self.places: list[tuple[int, int]] = []
        self.hand_number = -1
        self.events: list[tuple[Any, ...]] = []
        self._new_hand()

    # ------------------------------------------------------------ the rules, as written

    def side(self, seat: int) -> int:
        return seat % 2 if self.partnerships else seat

    def stock_empty(self) -> bool:
        return not self.stock

    def legal(self, seat: int) -> set[str]:
        if self.over or seat != self.turn:
            return set()
        hand = self.hands[seat]
        if self.trick and self.follow_when_stock_empty and self.stock_empty():
            led = self.trick[0][1][1]
            same = {c for c in hand if c[1] == led}
            if same:
                return same
        return set(hand)

    def timeout_card(self, seat: int) -> str:
        def key(c: str) -> tuple[int, bool, int, int]:
            return (points(c), c[1] == self.trump[1], -RANKS_HIGH_TO_LOW.index(c[0]),
                    SUITS.index(c[1]))
        return min(self.legal(seat), key=key)

    # ------------------------------------------------------------ actions

    def play(self, seat: int, card: str, automatic: bool = False) -> list[tuple[Any, ...]]:
        self.events = []
        self._play(seat, card, automatic)
        self._leavers()
        return self.events

    def leave(self, seat: int) -> list[tuple[Any, ...]]:
        self.events = []
        if self.over or seat in self.left:
            raise OracleViolation(f"seat {seat} cannot leave now")
        self.left.append(seat)
        self.events.append(("left", seat, self.hand_number, self.tricks_done))
        sides_staying = {self.side(s) for s in range(self.players) if s not in self.left}
        if len(sides_staying) <= 1:
            self._finish("LAST_PLAYER")
        else:
            self._leavers()
        return self.events

    def end_now(self, reason: str) -> list[tuple[Any, ...]]:
        self.events = []
        self._finish(reason)
        return self.events

    # ------------------------------------------------------------ how a hand goes

    def _new_hand(self) -> None:
        n, k = self.players, self.hand_size
        self.hand_number += 1
        hands, stock = self.deal_of(self.hand_number)
        cards = [c for h in hands for c in h] + stock
        if len(cards) != len(set(cards)) or set(cards) != pack(n):
            raise OracleViolation(f"hand {self.hand_number}: the deal is not the pack for {n}")
        if any(len(h) != k for h in hands):
            raise OracleViolation(f"hand {self.hand_number}: hands of {[len(h) for h in hands]}")
        self.hands = [set(h) for h in hands]
        self.stock = list(stock)
        self.trump = stock[-1]  # the turned-up card lies under the stock: drawn last
        self.dealer = (self.hand_number - 1) % n
        self.turn = self.hand_number % n  # the player after the dealer leads
        self.trick: list[tuple[int, str]] = []
        self.taken = [0] * n
        self.tricks_done = 0
        self.events.append(("hand", self.hand_number, self.dealer, self.turn, self.trump,
                            len(self.stock)))

    def _play(self, seat: int, card: str, automatic: bool) -> None:
        if card not in self.legal(seat):
            raise OracleViolation(f"seat {seat} may not play {card} (legal: "
                                  f"{sorted(self.legal(seat))})")
        self.hands[seat].remove(card)
        self.trick.append((seat, card))
        self.events.append(("play", seat, card, automatic))
        if len(self.trick) < self.players:
            self.turn = (seat + 1) % self.players
            return
        best_seat, best = self.trick[0]
        for s, c in self.trick[1:]:
            if beats(c, best, self.trump[1]):
                best_seat, best = s, c
        won = sum(points(c) for _, c in self.trick)
        self.taken[best_seat] += won
        self.events.append(("trick", self.tricks_done, best_seat, self.trick[0][0],
                            tuple(c for _, c in self.trick), won))
        self.trick = []
        self.tricks_done += 1
        self.turn = best_seat
        if self.stock:
            order = [(best_seat + i) % self.players for i in range(self.players)]
            trump_to = None
            for s in order:
                if not self.stock:
                    raise OracleViolation("the stock ran out in the middle of a draw")
                self.hands[s].add(self.stock.pop(0))
                if not self.stock:
                    trump_to = s
            self.events.append(("draw", tuple(order), len(self.stock), trump_to))
        if all(not h for h in self.hands):
            self._score_hand()

    def _score_hand(self) -> None:
        side_points = [0] * self.n_sides
        for s in range(self.players):
            side_points[self.side(s)] += self.taken[s]
        if sum(side_points) != 120:
            raise OracleViolation(f"a hand of {sum(side_points)} points")
        best = max(side_points)
        leaders = [s for s in range(self.n_sides) if side_points[s] == best]
        scored = [0] * self.n_sides
        winner = None
        if len(leaders) == 1:
            winner = leaders[0]
            value = 1
            if self.margin_bonus and best == 120:
                value = 4
            elif self.margin_bonus and best >= 91:
                value = 2
            scored[winner] = value + self.carried
            self.carried = 0
        elif self.carry_ties:
            self.carried += 1
        self.totals = [t + p for t, p in zip(self.totals, scored, strict=True)]
        self.hands_done += 1
        self.events.append(("scored", self.hand_number, tuple(self.taken), tuple(side_points),
                            winner, tuple(scored), tuple(self.totals), self.carried))
        if max(self.totals) >= self.target:
            self._finish("POINT_LIMIT")
        elif self.max_hands and self.hands_done >= self.max_hands:
            self._finish("HAND_LIMIT")
        else:
            self._new_hand()

    def _finish(self, reason: str) -> None:
        if self.over:
            raise OracleViolation("the game is already over")
        self.over = True
        self.reason = reason
        self.turn = -1
        # Sides with a leaver go last, the first to leave last of all.
        leaving_sides: list[int] = []
        for seat in self.left:
            if self.side(seat) not in leaving_sides:
                leaving_sides.append(self.side(seat))
        staying = [s for s in range(self.n_sides) if s not in leaving_sides]
        place = {}
        for s in staying:
            place[s] = 1 + len([o for o in staying if self.totals[o] > self.totals[s]])
        for i, s in enumerate(reversed(leaving_sides)):
            place[s] = len(staying) + 1 + i
        self.places = sorted(((seat, place[self.side(seat)]) for seat in range(self.players)),
                             key=lambda sp: (sp[1], sp[0]))
        self.events.append(("over", reason, tuple(self.places)))

    def _leavers(self) -> None:
        while not self.over and self.turn in self.left:
            self._play(self.turn, self.timeout_card(self.turn), True)
