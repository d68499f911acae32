"""The information set of one seat: everything that seat may know, and nothing else.

Public: every card played this hand with who played it (so the voids shown by not following
suit, and who took which points), the trick in progress, points taken, totals, the pass
direction, who has chosen a pass, who left, whose turn it is. Private to the seat: its hand,
the three cards it passed and the three it received. Cards are engine card indexes and card
sets engine bitmasks (``engine.cards``).

Two ways to build one: ``info_from_game`` (a server-side bot reads the engine's state, only
the public parts and its own seat's), and ``InfoTracker`` (a networked bot follows the
public event stream and sets its own cards from its view).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine import (
    CardPlayed,
    CardsExchanged,
    Event,
    Game,
    GameOver,
    HandScored,
    HandStarted,
    MoonShot,
    PassChosen,
    PassDirection,
    Phase,
    PlayerLeft,
    Rules,
    TrickWon,
)
from engine.cards import CARD_POINTS, QUEEN_SPADES
from engine.game import DECKS, legal_play_mask, opening_card_for


@dataclass(frozen=True, slots=True)
class InfoSet:
    """What ``seat`` may know at one moment of a game (immutable, picklable)."""

    seat: int
    rules: Rules
    phase: Phase
    hand_number: int
    pass_direction: PassDirection
    hand: int  # this seat's cards now (a bitmask)
    passed: int  # the cards this seat chose to pass this hand (0: none chosen, or a hold hand)
    received: int  # the cards it received (0 until the exchange)
    plays: tuple[tuple[int, int], ...]  # (seat, card) of every card played this hand, in order
    trick_number: int
    hearts_broken: bool
    taken: tuple[int, ...]  # points taken this hand, per seat
    totals: tuple[int, ...]
    has_passed: tuple[bool, ...]
    left_order: tuple[int, ...]  # seats that left, the first to leave first
    moon_shooter: int | None
    to_act: tuple[int, ...]

    @property
    def players(self) -> int:
        return self.rules.players

    @property
    def trick(self) -> tuple[tuple[int, int], ...]:
        """The trick in progress: (seat, card) in play order."""
        return self.plays[self.trick_number * self.players:]

    @property
    def must_act(self) -> bool:
        return self.seat in self.to_act

    def played_by(self, seat: int) -> int:
        """The cards ``seat`` has played this hand."""
        mask = 0
        for s, c in self.plays:
            if s == seat:
                mask |= 1 << c
        return mask

    @property
    def played(self) -> int:
        """Every card played this hand."""
        mask = 0
        for _, c in self.plays:
            mask |= 1 << c
        return mask

    def voids(self) -> tuple[int, ...]:
        """Per seat, the suits (bit s for suit s) it has shown it no longer holds, by not
        following a led suit."""
        n = self.players
        voids = [0] * n
        for start in range(0, len(self.plays), n):
            trick = self.plays[start:start + n]
            led = trick[0][1] // 13
            for s, c in trick[1:]:
                if c // 13 != led:
                    voids[s] |= 1 << led
        return tuple(voids)

    def captured(self) -> tuple[int, ...]:
        """Per seat, the point cards it has taken in tricks this hand."""
        n = self.players
        won = [0] * n
        for start in range(0, self.trick_number * n, n):
            trick = self.plays[start:start + n]
            led = trick[0][1] // 13
            winner, best = trick[0]
            points = 0
            for s, c in trick:
                if CARD_POINTS[c]:
                    points |= 1 << c
                if c // 13 == led and c > best:
                    winner, best = s, c
            won[winner] |= points
        return tuple(won)

    def card_counts(self) -> tuple[int, ...]:
        """How many cards each seat holds now (public: hand size less the cards played)."""
        size = self.rules.hand_size
        counts = [size] * self.players
        for s, _ in self.plays:
            counts[s] -= 1
        return tuple(counts)

    @property
    def deck(self) -> int:
        mask = 0
        for c in DECKS[self.players]:
            mask |= 1 << c
        return mask

    def legal(self) -> int:
        """The cards this seat may use now (the engine's rule, from its own hand)."""
        if self.phase is Phase.PASSING:
            return self.hand if not self.passed and self.pass_direction is not \
                PassDirection.HOLD else 0
        if self.phase is not Phase.PLAYING or not self.must_act:
            return 0
        trick = self.trick
        return legal_play_mask(self.hand, trick[0][1] // 13 if trick else -1, self.trick_number,
                               self.hearts_broken, opening_card_for(self.players),
                               not self.rules.points_on_first_trick)

    def pass_target(self) -> int:
        """The seat this seat's pass goes to (itself on a hold hand)."""
        return (self.seat + self.pass_direction.offset) % self.players


def info_from_game(game: Game, seat: int) -> InfoSet:
    """``seat``'s information set, read from the engine: the public state plus that seat's
    own hand, pass and received cards (never another seat's hand or pass)."""
    n = game.players
    plays: list[tuple[int, int]] = []
    for won in game.tricks:
        plays += [((won.leader + i) % n, int(c)) for i, c in enumerate(won.cards)]
    plays += [(s, int(c)) for s, c in zip(game.trick_seats, game.trick_cards)]
    chosen = game.passes[seat]
    return InfoSet(
        seat=seat, rules=game.rules, phase=game.phase, hand_number=game.hand_number,
        pass_direction=game.pass_direction, hand=game.hands[seat],
        passed=chosen if chosen is not None and game.pass_direction is not PassDirection.HOLD
        else 0,
        received=game.received[seat], plays=tuple(plays), trick_number=game.trick_number,
        hearts_broken=game.hearts_broken, taken=tuple(game.taken), totals=tuple(game.totals),
        has_passed=tuple(p is not None for p in game.passes),
        left_order=tuple(lv.seat for lv in game.left), moon_shooter=game.moon_shooter,
        to_act=game.to_act())


@dataclass
class InfoTracker:
    """Builds ``seat``'s information set from the public event stream (``observe`` each
    engine event, in order) and what the seat's view shows (``see``: its own cards and
    whose turn it is)."""

    seat: int
    rules: Rules
    phase: Phase = Phase.PASSING
    hand_number: int = -1
    pass_direction: PassDirection = PassDirection.HOLD
    hand: int = 0
    passed: int = 0
    received: int = 0
    plays: list[tuple[int, int]] = field(default_factory=list)
    trick_number: int = 0
    hearts_broken: bool = False
    taken: list[int] = field(default_factory=list)
    totals: list[int] = field(default_factory=list)
    has_passed: list[bool] = field(default_factory=list)
    left_order: list[int] = field(default_factory=list)
    moon_shooter: int | None = None
    to_act: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        n = self.rules.players
        self.taken = self.taken or [0] * n
        self.totals = self.totals or [0] * n
        self.has_passed = self.has_passed or [False] * n

    def see(self, hand: int, passed: int, received: int, to_act: tuple[int, ...]) -> None:
        """What the seat's view shows: its own cards, and whose turn it is (public)."""
        self.hand, self.passed, self.received, self.to_act = hand, passed, received, to_act

    def observe(self, event: Event) -> None:
        if isinstance(event, CardPlayed):
            self.plays.append((event.seat, int(event.card)))
            if event.seat == self.seat:
                self.hand &= ~(1 << event.card)
            if event.card >= 39 or (event.card == QUEEN_SPADES and self.rules.queen_breaks_hearts):
                self.hearts_broken = True
        elif isinstance(event, TrickWon):
            self.taken[event.winner] += event.points
            self.trick_number += 1
        elif isinstance(event, PassChosen):
            self.has_passed[event.seat] = True
        elif isinstance(event, CardsExchanged):
            self.phase = Phase.PLAYING
        elif isinstance(event, HandStarted):
            n = self.rules.players
            self.hand_number = event.hand_number
            self.pass_direction = event.pass_direction
            self.phase = Phase.PLAYING if event.pass_direction is PassDirection.HOLD \
                else Phase.PASSING
            self.passed = self.received = 0
            self.plays = []
            self.trick_number = 0
            self.hearts_broken = False
            self.taken = [0] * n
            self.has_passed = [False] * n
            self.moon_shooter = None
        elif isinstance(event, MoonShot):
            if event.awaits_choice:
                self.phase = Phase.MOON_CHOICE
                self.moon_shooter = event.seat
        elif isinstance(event, HandScored):
            self.totals = list(event.totals)
            self.moon_shooter = None
        elif isinstance(event, PlayerLeft):
            self.left_order.append(event.seat)
        elif isinstance(event, GameOver):
            self.phase = Phase.GAME_OVER

    def info(self) -> InfoSet:
        return InfoSet(
            seat=self.seat, rules=self.rules, phase=self.phase, hand_number=self.hand_number,
            pass_direction=self.pass_direction, hand=self.hand, passed=self.passed,
            received=self.received, plays=tuple(self.plays), trick_number=self.trick_number,
            hearts_broken=self.hearts_broken, taken=tuple(self.taken), totals=tuple(self.totals),
            has_passed=tuple(self.has_passed), left_order=tuple(self.left_order),
            moon_shooter=self.moon_shooter, to_act=self.to_act)
