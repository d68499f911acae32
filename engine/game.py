"""The game: a mutable state that accepts actions and reports what happened as events.

One legality authority: ``legal_cards`` (and, for passing, "three distinct cards of your
hand") is exactly what ``apply`` accepts; anything else raises a typed error naming the
rule and leaves the state untouched. Hands are int bitmasks (see ``engine.cards``).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any, Final, NamedTuple

from engine.actions import (
    Abandon,
    Action,
    CardPlayed,
    CardsExchanged,
    ChooseMoon,
    Close,
    Event,
    GameEndReason,
    GameOver,
    HandScored,
    HandStarted,
    Leave,
    MoonChoice,
    MoonChosen,
    MoonShot,
    PassCards,
    PassChosen,
    PassDirection,
    Phase,
    PlayCard,
    PlayerLeft,
    Standing,
    TimeUp,
    TrickWon,
)
from engine.cards import (
    ACE_SPADES,
    CARD_POINTS,
    CARDS,
    HEARTS_MASK,
    KING_SPADES,
    POINTS_MASK,
    QUEEN_SPADES,
    SUIT_BLOCKS,
    SUIT_MASKS,
    SUIT_OF,
    THREE_CLUBS,
    TWO_CLUBS,
    TWO_DIAMONDS,
    Card,
    Suit,
    cards_of,
    lowest_by_rank,
)
from engine.errors import IllegalActionError, InvalidActionError, Reason
from engine.rules import MoonRule, Rules

DIRECTIONS: dict[int, tuple[PassDirection, ...]] = {
    4: (PassDirection.LEFT, PassDirection.RIGHT, PassDirection.ACROSS, PassDirection.HOLD),
    3: (PassDirection.LEFT, PassDirection.RIGHT, PassDirection.HOLD),
    5: (PassDirection.LEFT, PassDirection.RIGHT, PassDirection.HOLD),
}
DECKS: dict[int, tuple[Card, ...]] = {
    4: CARDS,
    3: tuple(c for c in CARDS if c != TWO_DIAMONDS),
    5: tuple(c for c in CARDS if c not in (TWO_DIAMONDS, TWO_CLUBS)),
}
MOON_POINTS = 26

# Pass-timeout priority: Q♠ A♠ K♠, then hearts high to low, then the rest high to low
# with rank ties broken ♠, ♦, ♣.
_PASS_FIRST = (QUEEN_SPADES, ACE_SPADES, KING_SPADES)
_PASS_PRIORITY: tuple[int, ...] = (
    _PASS_FIRST
    + tuple(Suit.HEARTS * 13 + r for r in range(12, -1, -1))
    + tuple(s * 13 + r for r in range(12, -1, -1)
            for s in (Suit.SPADES, Suit.DIAMONDS, Suit.CLUBS) if s * 13 + r not in _PASS_FIRST)
)
# Builds events and log entries without the NamedTuple constructor's Python-level call.
_new: Any = tuple.__new__

# Hot-path constants. ``Final`` lets mypyc keep them in C statics (see docs/DESIGN.md,
# "Engine speed"); read as plain module globals they cost the same as before.
_PASSING: Final = Phase.PASSING
_PLAYING: Final = Phase.PLAYING
_MOON_CHOICE: Final = Phase.MOON_CHOICE
_HOLD: Final = PassDirection.HOLD
_CARDS: Final[tuple[Card, ...]] = CARDS
_SUIT_MASKS: Final[tuple[int, ...]] = SUIT_MASKS
_CARD_POINTS: Final[tuple[int, ...]] = CARD_POINTS
_HEARTS: Final = HEARTS_MASK
_NOT_POINTS: Final = ~POINTS_MASK
_QUEEN: Final = int(QUEEN_SPADES)
# engine.cards' tables of the cards of every 13-bit pattern, for a compiled cards_of.
_CLUBS: Final = SUIT_BLOCKS[0]
_DIAMONDS: Final = SUIT_BLOCKS[1]
_SPADES: Final = SUIT_BLOCKS[2]
_HEARTS_BLOCK: Final = SUIT_BLOCKS[3]


# Actions and events are immutable values, so the few that one card makes are made once:
# PlayCard by seat * 52 + card, CardPlayed by (seat * 52 + card) * 2 + is_automatic.
_PLAY_ACTIONS: Final[tuple[PlayCard, ...]] = tuple(
    _new(PlayCard, (seat, c)) for seat in range(5) for c in CARDS)
_CARDS_PLAYED: Final[tuple[CardPlayed, ...]] = tuple(
    _new(CardPlayed, (seat, c, is_automatic))
    for seat in range(5) for c in CARDS for is_automatic in (False, True))


def _cards_of(mask: int) -> tuple[Card, ...]:
    """engine.cards.cards_of, compiled; a one-suit mask costs no concatenation."""
    low = mask & 0x3FFFFFF  # clubs and diamonds
    high = mask >> 26
    if not high:
        if not low >> 13:
            return _CLUBS[low]
        if not low & 0x1FFF:
            return _DIAMONDS[low >> 13]
        return _CLUBS[low & 0x1FFF] + _DIAMONDS[low >> 13]
    if not low:
        if not high >> 13:
            return _SPADES[high]
        if not high & 0x1FFF:
            return _HEARTS_BLOCK[high >> 13]
    return (_CLUBS[low & 0x1FFF] + _DIAMONDS[low >> 13]
            + _SPADES[high & 0x1FFF] + _HEARTS_BLOCK[high >> 13])


def legal_play_mask(hand: int, led_suit: int, trick_number: int, hearts_broken: bool,
                    opening_card: int, no_points_first: bool) -> int:
    """The cards of ``hand`` that may be played: the one rule of play that
    ``Game.legal_mask`` applies (``led_suit`` -1 when leading). Public so that a bot's
    playouts use the same rule."""
    if led_suit >= 0:
        legal = hand & _SUIT_MASKS[led_suit]
        if not legal:
            legal = hand
            if trick_number == 0 and no_points_first:
                legal = (hand & _NOT_POINTS) or hand
        return legal
    if trick_number == 0:
        return 1 << opening_card
    if not hearts_broken:
        return (hand & ~_HEARTS) or hand
    return hand


def pass_direction_for(players: int, hand_number: int) -> PassDirection:
    cycle = DIRECTIONS[players]
    return cycle[hand_number % len(cycle)]


def opening_card_for(players: int) -> Card:
    return THREE_CLUBS if players == 5 else TWO_CLUBS


def compute_standings(totals: list[int] | tuple[int, ...],
                      left_order: list[int] | tuple[int, ...]) -> tuple[Standing, ...]:
    """Fewest points first, equal totals share a place (1, 1, 3); leavers behind everyone
    who stayed, the first to leave last."""
    stayers = [s for s in range(len(totals)) if s not in left_order]
    rows = [Standing(s, 1 + sum(totals[o] < totals[s] for o in stayers), totals[s], False)
            for s in stayers]
    rows += [Standing(s, len(stayers) + len(left_order) - i, totals[s], True)
             for i, s in enumerate(left_order)]
    return tuple(sorted(rows, key=lambda r: (r.place, r.seat)))


class HandResult(NamedTuple):
    hand_number: int
    pass_direction: PassDirection
    taken: tuple[int, ...]
    points: tuple[int, ...]
    totals: tuple[int, ...]
    moon_shooter: int | None
    moon_choice: MoonChoice | None


class LeaverRecord(NamedTuple):
    seat: int
    hand_number: int
    trick_number: int


class Game:
    """A whole game from ``(rules, seed)``. Attributes are readable; change the state only
    through ``apply`` (or its typed shortcuts ``pass_cards``, ``play``, ``choose_moon``,
    ``leave``)."""

    def __init__(self, rules: Rules | None = None, seed: int | str = 0) -> None:
        self.rules = rules if rules is not None else Rules()
        self.seed = seed
        self._rng = random.Random(seed)
        n = self.players = self.rules.players
        self.hand_size = self.rules.hand_size
        self.opening_card = opening_card_for(n)
        self._no_points_first = not self.rules.points_on_first_trick
        self._queen_breaks = self.rules.queen_breaks_hearts
        self.totals = [0] * n
        self.has_left = [False] * n
        self.left: list[LeaverRecord] = []
        self.hands_played: list[HandResult] = []
        self.actions: list[Action] = []
        self.phase = _PASSING
        self.end_reason: GameEndReason | None = None
        self.standings: tuple[Standing, ...] = ()
        self.hand_number = -1
        # Per-hand state, set by _start_hand.
        self.pass_direction = PassDirection.HOLD
        self.hands: list[int] = [0] * n
        self.dealt: list[int] = [0] * n
        self.passes: list[int | None] = [None] * n
        self.received: list[int] = [0] * n
        self.taken = [0] * n
        self.trick_cards: list[int] = []  # the trick in progress (Card values), in play order
        self.trick_seats: list[int] = []
        self.last_trick: TrickWon | None = None
        self.tricks: list[TrickWon] = []  # the tricks won so far this hand, in order
        # The trick in progress, kept up to date card by card.
        self._led_suit = -1
        self._best = -1
        self._winner = -1
        self._trick_points = 0
        self.trick_number = 0
        self.hearts_broken = False
        self.turn = -1
        self._turn_legal = -1  # cached legal mask of the seat to play; -1 = not computed
        self.moon_shooter: int | None = None
        self.started_events: list[Event] = []
        self._start_hand(self.started_events)

    # ------------------------------------------------------------ queries

    @property
    def is_over(self) -> bool:
        return self.phase is Phase.GAME_OVER

    def to_act(self) -> tuple[int, ...]:
        """The seats that may act now (several while passing)."""
        if self.phase is _PLAYING:
            return (self.turn,)
        if self.phase is _PASSING:
            return tuple(s for s, p in enumerate(self.passes) if p is None)
        if self.phase is _MOON_CHOICE:
            assert self.moon_shooter is not None
            return (self.moon_shooter,)
        return ()

    def legal_mask(self, seat: int) -> int:
        """Bitmask of the cards ``seat`` may use now: to play when it is their turn, to
        choose a pass from while passing (any three distinct ones); else 0."""
        if self.phase is _PLAYING:
            if seat != self.turn:
                return 0
            legal = self._turn_legal
            if legal < 0:
                legal = self._turn_legal = legal_play_mask(
                    self.hands[seat], self._led_suit, self.trick_number, self.hearts_broken,
                    self.opening_card, self._no_points_first)
            return legal
        if self.phase is _PASSING and 0 <= seat < self.players \
                and self.passes[seat] is None:
            return self.hands[seat]
        return 0

    def legal_cards(self, seat: int) -> tuple[Card, ...]:
        """The cards ``seat`` may use now, in order (see ``legal_mask``)."""
        return _cards_of(self.legal_mask(seat))

    def hand(self, seat: int) -> tuple[Card, ...]:
        return _cards_of(self.hands[seat])

    # ------------------------------------------------------------ actions

    def apply(self, action: Action, *, is_automatic: bool = False) -> list[Event]:
        """Apply one action; return the events it caused (automatic play for seats that
        have left included). Raises InvalidActionError or IllegalActionError, changing
        nothing."""
        # The fields are checked here, in the order the shortcuts check them, so that a
        # compiled engine (typed parameters) refuses malformed values with the same errors.
        fields: Any = action
        if isinstance(action, PlayCard):
            self._check_seat(fields.seat)
            return self.play(fields.seat, _as_card(fields.card), is_automatic=is_automatic)
        if isinstance(action, PassCards):
            self._check_seat(fields.seat)
            return self.pass_cards(fields.seat, fields.cards, is_automatic=is_automatic)
        if isinstance(action, ChooseMoon):
            self._check_seat(fields.seat)
            return self.choose_moon(fields.seat, _as_moon_choice(fields.choice),
                                    is_automatic=is_automatic)
        if isinstance(action, Leave):
            self._check_seat(fields.seat)
            return self.leave(fields.seat)
        if isinstance(action, Abandon):
            return self.abandon()
        if isinstance(action, Close):
            return self.close()
        if isinstance(action, TimeUp):
            return self.time_up()
        raise InvalidActionError(f"not an action: {action!r}")

    def play(self, seat: int, card: object, *, is_automatic: bool = False) -> list[Event]:
        """Play ``card`` (a Card, its index or its text) for ``seat``."""
        if (type(card) is Card and type(seat) is int and seat == self.turn
                and self.phase is _PLAYING):
            played: Card = card
        else:
            played = self._check_play(seat, card)
        card_index: int = played
        legal = self._turn_legal
        if legal < 0:
            legal = self.legal_mask(seat)
        if not legal >> card_index & 1:
            if not self.hands[seat] >> card_index & 1:
                raise IllegalActionError(f"{played} is not in your hand",
                                         Reason.CARD_NOT_IN_HAND)
            raise self._why_illegal(seat, played)
        index = seat * 52 + card_index
        self.actions.append(_PLAY_ACTIONS[index])
        events: list[Event] = [_CARDS_PLAYED[index * 2 + is_automatic]]
        self._play(seat, played, events)
        if self.phase is not _PLAYING or self.has_left[self.turn]:
            self._play_for_leavers(events)
        return events

    def pass_cards(self, seat: int, cards: Iterable[int], *,
                   is_automatic: bool = False) -> list[Event]:
        self._check_seat(seat)
        chosen = tuple(_as_card(c) for c in cards)
        mask = 0
        for c in chosen:
            mask |= 1 << c
        if len(chosen) != 3 or mask.bit_count() != 3:
            raise InvalidActionError("a pass is exactly three different cards",
                                     Reason.PASS_NEEDS_THREE_CARDS)
        if self.phase is not _PASSING:
            raise IllegalActionError(f"cannot pass cards during {self.phase}"
                                     + (" (no passing this hand)"
                                        if self.pass_direction is PassDirection.HOLD else ""),
                                     Reason.WRONG_PHASE)
        if self.passes[seat] is not None:
            raise IllegalActionError("you have already chosen your pass; it is final",
                                     Reason.ALREADY_PASSED)
        missing = mask & ~self.hands[seat]
        if missing:
            raise IllegalActionError(
                f"{' '.join(map(str, cards_of(missing)))} not in your hand",
                Reason.CARD_NOT_IN_HAND)
        self.actions.append(_new(PassCards, (seat, chosen)))
        events: list[Event] = []
        self._pass(seat, mask, is_automatic, events)
        self._play_for_leavers(events)
        return events

    def choose_moon(self, seat: int, choice: MoonChoice | str, *,
                    is_automatic: bool = False) -> list[Event]:
        self._check_seat(seat)
        choice = _as_moon_choice(choice)
        if self.phase is not _MOON_CHOICE:
            raise IllegalActionError(f"no moon choice is pending ({self.phase})",
                                     Reason.WRONG_PHASE)
        if seat != self.moon_shooter:
            raise IllegalActionError(f"only the shooter (seat {self.moon_shooter}) chooses",
                                     Reason.NOT_THE_SHOOTER)
        self.actions.append(ChooseMoon(seat, choice))
        events: list[Event] = []
        self._choose_moon(seat, choice, is_automatic, events)
        self._play_for_leavers(events)
        return events

    def leave(self, seat: int) -> list[Event]:
        """The seat leaves: it stays in automatic play, placed behind everyone who stayed."""
        self._check_seat(seat)
        if self.phase is Phase.GAME_OVER:
            raise IllegalActionError("the game is over", Reason.WRONG_PHASE)
        if self.has_left[seat]:
            raise IllegalActionError("this seat has already left", Reason.SEAT_HAS_LEFT)
        self.actions.append(Leave(seat))
        self.has_left[seat] = True
        self.left.append(LeaverRecord(seat, self.hand_number, self.trick_number))
        events: list[Event] = [PlayerLeft(seat, self.hand_number, self.trick_number)]
        if self.has_left.count(False) <= 1:
            self._end_game(GameEndReason.LAST_PLAYER, events)
        else:
            self._play_for_leavers(events)
        return events

    def abandon(self) -> list[Event]:
        """The table ends the game now (reason ABANDONED): a hand in progress is not scored;
        places as at the end of the last completed hand, leavers behind."""
        if self.phase is Phase.GAME_OVER:
            raise IllegalActionError("the game is over", Reason.WRONG_PHASE)
        self.actions.append(Abandon())
        events: list[Event] = []
        self._end_game(GameEndReason.ABANDONED, events)
        return events

    def close(self) -> list[Event]:
        """An operator ends the game now (reason CLOSED), scored as ``abandon`` is."""
        if self.phase is Phase.GAME_OVER:
            raise IllegalActionError("the game is over", Reason.WRONG_PHASE)
        self.actions.append(Close())
        events: list[Event] = []
        self._end_game(GameEndReason.CLOSED, events)
        return events

    def time_up(self) -> list[Event]:
        """A championship round's time limit ends the game now (reason TIME_LIMIT), scored
        as ``abandon`` is."""
        if self.phase is Phase.GAME_OVER:
            raise IllegalActionError("the game is over", Reason.WRONG_PHASE)
        self.actions.append(TimeUp())
        events: list[Event] = []
        self._end_game(GameEndReason.TIME_LIMIT, events)
        return events

    # ------------------------------------------------------------ automatic choices

    def auto_action(self, seat: int) -> Action:
        """What RULES.md plays for ``seat`` on a timeout (or after leaving)."""
        if self.phase is _PASSING and self.passes[seat] is None:
            return PassCards(seat, auto_pass(self.hands[seat]))
        if self.phase is _PLAYING and seat == self.turn:
            return PlayCard(seat, auto_play(self.legal_mask(seat)))
        if self.phase is _MOON_CHOICE and seat == self.moon_shooter:
            return ChooseMoon(seat, self.auto_moon_choice())
        raise IllegalActionError(f"seat {seat} has nothing to do now", Reason.NOT_YOUR_TURN)

    def auto_moon_choice(self) -> MoonChoice:
        """The choice that places the shooter better; on a tie, add 26 to the others."""
        shooter = self.moon_shooter
        assert shooter is not None
        places = {}
        for choice in (MoonChoice.ADD_TO_OTHERS, MoonChoice.SUBTRACT_FROM_SELF):
            after = [t + p for t, p in zip(self.totals, self._moon_points(shooter, choice))]
            places[choice] = next(r.place for r in compute_standings(
                after, [lv.seat for lv in self.left]) if r.seat == shooter)
        if places[MoonChoice.SUBTRACT_FROM_SELF] < places[MoonChoice.ADD_TO_OTHERS]:
            return MoonChoice.SUBTRACT_FROM_SELF
        return MoonChoice.ADD_TO_OTHERS

    # ------------------------------------------------------------ internals

    def _check_play(self, seat: object, card: object) -> Card:
        """The slow path of ``play``: raise the error that fits, or return the card."""
        self._check_seat(seat)
        card = _as_card(card)
        if self.phase is not _PLAYING:
            raise IllegalActionError(f"cannot play a card during {self.phase}", Reason.WRONG_PHASE)
        if seat != self.turn:
            raise IllegalActionError(f"it is seat {self.turn}'s turn, not seat {seat}'s",
                                     Reason.NOT_YOUR_TURN)
        return card

    def _check_seat(self, seat: object) -> None:
        if type(seat) is not int or not 0 <= seat < self.players:
            raise InvalidActionError(f"seat must be 0..{self.players - 1}, got {seat!r}",
                                     Reason.INVALID_SEAT)

    def _why_illegal(self, seat: int, card: Card) -> IllegalActionError:
        if not self.trick_cards:
            if self.trick_number == 0:
                return IllegalActionError(f"the first trick must be led with {self.opening_card}",
                                          Reason.MUST_LEAD_OPENING_CARD)
            return IllegalActionError("hearts are not broken: lead another suit",
                                      Reason.HEARTS_NOT_BROKEN)
        led = Suit(SUIT_OF[self.trick_cards[0]])
        if self.hands[seat] & SUIT_MASKS[led]:
            return IllegalActionError(f"you must follow suit ({led.symbol})",
                                      Reason.MUST_FOLLOW_SUIT)
        return IllegalActionError("no hearts or Q♠ on the first trick while you hold another card",
                                  Reason.NO_POINTS_ON_FIRST_TRICK)

    def _start_hand(self, events: list[Event]) -> None:
        n = self.players
        self.hand_number += 1
        deck = list(DECKS[n])
        _shuffle(deck, self._rng)
        k = self.hand_size
        hands = [0] * n
        for i in range(n * k):
            c: int = deck[i]
            hands[i // k] |= 1 << c
        self.hands = hands
        self.dealt = list(hands)
        self.passes = [None] * n
        self.received = [0] * n
        self.taken = [0] * n
        self.trick_cards = []
        self.trick_seats = []
        self.last_trick = None
        self.tricks = []
        self._led_suit = -1
        self.trick_number = 0
        self.hearts_broken = False
        self.moon_shooter = None
        self.pass_direction = pass_direction_for(n, self.hand_number)
        events.append(_new(HandStarted, (self.hand_number, self.pass_direction)))
        if self.pass_direction is _HOLD:
            self._begin_play()
        else:
            self.phase = _PASSING

    def _begin_play(self) -> None:
        self.phase = _PLAYING
        self._turn_legal = -1
        bit = 1 << self.opening_card
        self.turn = next(s for s in range(self.players) if self.hands[s] & bit)

    def _pass(self, seat: int, mask: int, is_automatic: bool, events: list[Event]) -> None:
        self.passes[seat] = mask
        events.append(_new(PassChosen, (seat, is_automatic)))
        if any(p is None for p in self.passes):
            return
        n, offset = self.players, self.pass_direction.offset
        for s in range(n):
            self.hands[s] &= ~self.passes[s]  # type: ignore[operator]
        for s in range(n):
            target = (s + offset) % n
            chosen = self.passes[s]
            assert chosen is not None
            self.hands[target] |= chosen
            self.received[target] = chosen
        events.append(_new(CardsExchanged, (self.hand_number, self.pass_direction)))
        self._begin_play()

    def _play(self, seat: int, card: Card, events: list[Event]) -> None:
        c: int = card
        hand: int = self.hands[seat]
        self.hands[seat] = hand ^ 1 << c
        trick = self.trick_cards
        trick.append(card)
        self.trick_seats.append(seat)
        if c >= 39 or (c == _QUEEN and self._queen_breaks):
            self.hearts_broken = True
        self._turn_legal = -1
        suit = c // 13
        if len(trick) == 1:
            self._led_suit = suit
            self._best = c
            self._winner = seat
            self._trick_points = _CARD_POINTS[c]
        else:
            self._trick_points += _CARD_POINTS[c]
            if suit == self._led_suit and c > self._best:
                self._best = c
                self._winner = seat
        if len(trick) < self.players:
            seat += 1
            self.turn = seat if seat < self.players else 0
            return
        winner = self._winner
        points = self._trick_points
        self.taken[winner] += points
        won = _new(TrickWon, (self.trick_number, winner, self.trick_seats[0], tuple(trick),
                              points))
        events.append(won)
        self.last_trick = won
        self.tricks.append(won)
        self.trick_cards = []
        self.trick_seats = []
        self._led_suit = -1
        self.trick_number += 1
        self.turn = winner
        if self.trick_number == self.hand_size:
            self._end_hand(events)

    def _end_hand(self, events: list[Event]) -> None:
        shooter = None
        if self.rules.moon is not MoonRule.DISABLED:
            shooter = next((s for s, t in enumerate(self.taken) if t == 26), None)
        if shooter is None:
            self._score_hand(tuple(self.taken), None, None, events)
        elif self.rules.moon is MoonRule.OTHERS_PLUS_26:
            events.append(MoonShot(shooter, self.hand_number, False))
            points = tuple(0 if s == shooter else MOON_POINTS for s in range(self.players))
            self._score_hand(points, shooter, None, events)
        else:
            events.append(MoonShot(shooter, self.hand_number, True))
            self.moon_shooter = shooter
            self.phase = _MOON_CHOICE
            self.turn = -1

    def _moon_points(self, shooter: int, choice: MoonChoice) -> tuple[int, ...]:
        if choice is MoonChoice.SUBTRACT_FROM_SELF:
            return tuple(-min(MOON_POINTS, self.totals[s]) if s == shooter else 0
                         for s in range(self.players))
        return tuple(0 if s == shooter else MOON_POINTS for s in range(self.players))

    def _choose_moon(self, seat: int, choice: MoonChoice, is_automatic: bool,
                     events: list[Event]) -> None:
        events.append(MoonChosen(seat, choice, is_automatic))
        self._score_hand(self._moon_points(seat, choice), seat, choice, events)

    def _score_hand(self, points: tuple[int, ...], shooter: int | None,
                    choice: MoonChoice | None, events: list[Event]) -> None:
        for s, p in enumerate(points):
            self.totals[s] += p
        totals = tuple(self.totals)
        taken = tuple(self.taken)
        self.hands_played.append(_new(HandResult, (self.hand_number, self.pass_direction,
                                                   taken, points, totals, shooter, choice)))
        events.append(_new(HandScored, (self.hand_number, taken, points, totals, shooter,
                                        choice)))
        if max(totals) >= self.rules.point_limit:
            self._end_game(GameEndReason.POINT_LIMIT, events)
        elif self.rules.max_hands and len(self.hands_played) >= self.rules.max_hands:
            self._end_game(GameEndReason.HAND_LIMIT, events)
        else:
            self._start_hand(events)

    def _end_game(self, reason: GameEndReason, events: list[Event]) -> None:
        self.phase = Phase.GAME_OVER
        self.turn = -1
        self.end_reason = reason
        self.standings = compute_standings(self.totals, [lv.seat for lv in self.left])
        events.append(GameOver(reason, self.standings))

    def _play_for_leavers(self, events: list[Event]) -> None:
        """Leavers are played for at once, with the timeout rules."""
        while True:
            phase = self.phase
            if phase is _PLAYING and self.has_left[self.turn]:
                card = auto_play(self.legal_mask(self.turn))
                events.append(_CARDS_PLAYED[(self.turn * 52 + card) * 2 + 1])
                self._play(self.turn, card, events)
            elif phase is _PASSING and any(
                    self.has_left[s] and self.passes[s] is None for s in range(self.players)):
                seat = next(s for s in range(self.players)
                            if self.has_left[s] and self.passes[s] is None)
                self._pass(seat, _mask(auto_pass(self.hands[seat])), True, events)
            elif (phase is _MOON_CHOICE and self.moon_shooter is not None
                  and self.has_left[self.moon_shooter]):
                self._choose_moon(self.moon_shooter, self.auto_moon_choice(), True, events)
            else:
                return


def auto_pass(hand: int) -> tuple[Card, Card, Card]:
    """Pass-timeout choice: Q♠ A♠ K♠ held, then the highest hearts, then the highest
    remaining cards (rank ties ♠, ♦, ♣)."""
    chosen = [CARDS[c] for c in _PASS_PRIORITY if hand >> c & 1][:3]
    return chosen[0], chosen[1], chosen[2]


def auto_play(legal: int) -> Card:
    """Play-timeout choice: the lowest legal card, preferring cards without points
    (rank ties ♣, ♦, ♠, ♥)."""
    return lowest_by_rank((legal & ~POINTS_MASK) or legal)


def _shuffle(deck: list[Card], rng: random.Random) -> None:
    """``rng.shuffle(deck)``, the same permutation from the same state, with the
    standard library's ``_randbelow`` inlined (the deal was a fifth of a random hand)."""
    getrandbits = rng.getrandbits
    for i in range(len(deck) - 1, 0, -1):
        n = i + 1
        k = n.bit_length()
        j = getrandbits(k)
        while j >= n:
            j = getrandbits(k)
        deck[i], deck[j] = deck[j], deck[i]


def _as_moon_choice(value: object) -> MoonChoice:
    loose: Any = value  # any value: a bad one raises ValueError, as MoonChoice does
    try:
        return MoonChoice(loose)
    except ValueError:
        raise InvalidActionError(
            f"moon choice must be one of {', '.join(MoonChoice)}") from None


def _mask(cards: Iterable[int]) -> int:
    mask = 0
    for c in cards:
        mask |= 1 << c
    return mask


def _as_card(value: object) -> Card:
    if type(value) is Card:
        return value
    if isinstance(value, str):
        return Card.parse(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 52:
        return CARDS[value]
    raise InvalidActionError(f"{value!r} is not a card", Reason.INVALID_CARD)
