"""Ratings: one per account and kind of game (its player count), by openskill's Plackett-Luce
model (Weng & Lin, a Bayesian multiplayer rating: a rating is mu and sigma, updated from the
places of one game, ties sharing a place). It is chosen over TrueSkill (patented, and built for
teams) and Glicko-2 (two-player, a multiplayer game has to be split into pairs): Plackett-Luce
rates a 3-, 4- or 5-player free-for-all in one update, and openskill is maintained, typed and
pure Python.

Which games are rated, and who moves whom, is RULES.md's "Rated games" (``rate_game`` here):
only seats whose people played and stayed to the end rate each other, and of those only the
seats alone of their network at the table; a seat that did not play, or left, loses rating and
gives none; an established account (``PROVISIONAL_GAMES`` rated games or more) is rated only
against established opponents.

The shown rating is the ordinal ``mu - 3 sigma`` (a conservative estimate that rises as games
are played), scaled so that a new account shows 0 and a point is a hundredth of openskill's:
``round((mu - 3 sigma) * 100)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from openskill.models import PlackettLuce

from server.games.names import DEFAULT_GAME, GAMES

MODEL = PlackettLuce()
MU = MODEL.mu
SIGMA = MODEL.sigma
PROVISIONAL_GAMES = 10  # rated games before a rating is established (and on a leaderboard)
PLAYED_SHARE = 0.5  # of a seat's cards (a hand's at least) its person must play themselves
DEFAULT_KIND = DEFAULT_GAME  # the kind of game of a rating, a history line or a call naming none


def rating_kind(game: str, has_partnerships: bool = False) -> str:
    """The kind of game a rating is kept for, beside its player count: the game's name, and
    ``/teams`` when partners share a result (a game of 4 in partnerships is not a game of 4
    each for themselves)."""
    return f"{game}/teams" if has_partnerships else game


RATING_KINDS = tuple(rating_kind(game, teams) for game in GAMES for teams in (False, True))
"""Every kind a rating may be kept for (the default game's first)."""


def kind_parts(kind: str) -> tuple[str, bool]:
    """A kind's game and whether partners shared the result (``rating_kind`` undone)."""
    game, _, teams = kind.partition("/")
    return game, teams == "teams"


@dataclass(frozen=True, slots=True)
class Rating:
    """One account's rating in one kind of game."""

    mu: float = MU
    """The estimated skill."""
    sigma: float = SIGMA
    """The uncertainty of ``mu``."""
    games: int = 0
    """Rated games played."""
    wins: int = 0
    """Rated games finished 1st (alone or shared)."""

    @property
    def shown(self) -> int:
        """The number people see: the conservative estimate, 0 for a new account."""
        return round((self.mu - 3 * self.sigma) * 100)

    @property
    def is_provisional(self) -> bool:
        """Fewer than PROVISIONAL_GAMES rated games: on no leaderboard, and no established
        account's rating moves against it."""
        return self.games < PROVISIONAL_GAMES


def has_played(own_cards: int, cards: int, hand_cards: int) -> bool:
    """A seat's person played the game: of the cards the seat played, or of a whole hand's
    ``hand_cards`` if the seat played fewer (a game cut short by people leaving is short for
    everyone), at least PLAYED_SHARE were theirs, not played for them on a timeout, while
    away or after they left."""
    return own_cards > 0 and own_cards >= PLAYED_SHARE * max(cards, hand_cards)


@dataclass(frozen=True, slots=True)
class Contender:
    """One signed-in seat of a rated game, as the rule reads it."""

    seat: int
    place: int
    """Its place in the game's standings (1 = first; ties share)."""
    has_played: bool
    """``has_played`` of its cards."""
    network: str
    """Its network's tag ("" when not known: then it shares none)."""
    before: Rating
    """Its account's rating in this kind of game before the game."""
    has_left: bool = False
    """Its person left before the game's end (the server played the seat from then on)."""


@dataclass(frozen=True, slots=True)
class Update:
    """How one seat's rating moved, and against whom: everyone can redo it with openskill
    from the opponents' ``before`` ratings and the places."""

    seat: int
    before: Rating
    after: Rating
    opponents: tuple[int, ...]
    """The seats it was rated against (their places and ratings before)."""


def rate_game(contenders: Sequence[Contender], *, is_one_network_rated: bool = False
              ) -> list[Update]:
    """The rating updates of a finished game whose every seat held a signed-in account (the
    caller checked that and the other conditions of RULES.md's "Rated games").

    The seats that **count** are those whose people played and stayed to the end, each the
    only seat of its network at the table (unless ``is_one_network_rated``): one person's
    accounts, or a household's, never count, whoever they play. Nothing is rated unless two
    seats count. Each seat is then rated against the counting seats other than itself, less
    those of its network, less the provisional ones when it is established; a seat with no
    opponent is not rated. A counting seat is placed as in the game; a seat that played but
    left is placed as in the game too (behind those who stayed), and one that did not play
    behind everyone: both lose, and give nothing (they are nobody's opponent)."""
    if is_one_network_rated:
        crowded: set[str] = set()
    else:
        networks = [c.network for c in contenders if c.network]
        crowded = {n for n in networks if networks.count(n) > 1}
    counting = [c for c in contenders if c.has_played and not c.has_left
                and c.network not in crowded]
    if len(counting) < 2:
        return []
    last = max(c.place for c in contenders) + 1
    updates: list[Update] = []
    computed: dict[tuple[tuple[int, ...], int], dict[int, Rating]] = {}
    for c in contenders:
        opponents = [o for o in counting if o.seat != c.seat
                     and (is_one_network_rated or not c.network or o.network != c.network)
                     and (c.before.is_provisional or not o.before.is_provisional)]
        if not opponents:
            continue
        group = sorted([c, *opponents], key=lambda x: x.seat)
        absent = -1 if c.has_played else c.seat  # the one placed last, if any
        key = (tuple(x.seat for x in group), absent)
        if key not in computed:
            teams = [[MODEL.create_rating([x.before.mu, x.before.sigma])] for x in group]
            ranks = [float(last if x.seat == absent else x.place) for x in group]
            rated = MODEL.rate(teams, ranks=ranks)
            computed[key] = {x.seat: Rating(team[0].mu, team[0].sigma) for x, team
                             in zip(group, rated, strict=True)}
        new = computed[key][c.seat]
        won = c in counting and c.place == 1
        updates.append(Update(c.seat, c.before,
                              Rating(new.mu, new.sigma, c.before.games + 1,
                                     c.before.wins + won),
                              tuple(o.seat for o in opponents)))
    return updates


def rate(before: list[Rating], places: list[int]) -> list[Rating]:
    """Ratings after a game in which everyone played and rated everyone: ``before[i]`` of
    the player who finished ``places[i]``; the new ratings in the same order."""
    if len(before) != len(places) or len(before) < 2:
        raise ValueError("a rated game has two players or more, each with a place")
    updates = rate_game([Contender(n, p, True, "", b) for n, (b, p)
                         in enumerate(zip(before, places, strict=True))],
                        is_one_network_rated=True)
    by_seat = {u.seat: u.after for u in updates}
    return [by_seat.get(n, b) for n, b in enumerate(before)]
