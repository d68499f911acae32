"""Ratings: one per account and kind of game (its player count), by openskill's Plackett-Luce
model (Weng & Lin, a Bayesian multiplayer rating: a rating is mu and sigma, updated from the
places of one game, ties sharing a place). It is chosen over TrueSkill (patented, and built for
teams) and Glicko-2 (two-player, a multiplayer game has to be split into pairs): Plackett-Luce
rates a 3-, 4- or 5-player free-for-all in one update, and openskill is maintained, typed and
pure Python.

The shown rating is the ordinal ``mu - 3 sigma`` (a conservative estimate that rises as games
are played), scaled so that a new account shows 0 and a point is a hundredth of openskill's:
``round((mu - 3 sigma) * 100)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from openskill.models import PlackettLuce

MODEL = PlackettLuce()
MU = MODEL.mu
SIGMA = MODEL.sigma


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


def rate(before: list[Rating], places: list[int], fixed_places: tuple[int, ...] = ()
         ) -> list[Rating]:
    """Ratings after one game: ``before[i]`` of the player who finished ``places[i]`` (1 =
    first; equal places are a tie), beside opponents of a new account's rating that never
    moves (bots) at ``fixed_places``. Returns the players' new ratings in the same order."""
    if len(before) != len(places) or len(before) + len(fixed_places) < 2:
        raise ValueError("a rated game has two players or more, each with a place")
    teams = [[MODEL.create_rating([r.mu, r.sigma])] for r in before] + \
        [[MODEL.create_rating([MU, SIGMA])] for _ in fixed_places]
    after = MODEL.rate(teams, ranks=[float(p) for p in (*places, *fixed_places)])
    return [Rating(team[0].mu, team[0].sigma, r.games + 1, r.wins + (p == 1))
            for r, team, p in zip(before, after[:len(before)], places, strict=True)]
