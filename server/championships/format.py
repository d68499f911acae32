"""Championships: rounds of tables, championship points, standings and tie-breaks.

The rules are those of docs/RULES.md, "Championships". Everything here is a pure function of
the championship's seed, its players (their public ids: every seeded draw is made of them) and
its game results: no I/O, no clock, no global RNG. Start with ``table_sizes(n)`` and
``seat_round(...)`` for a round's tables, ``deal_seed`` for their games, then feed each
finished game to a ``Tally`` built with the championship's rules (or call ``standings``). The
options of ``ChampionshipRules``: duplicate deals, matchpoints scoring (``board_scores``), the
Buchholz tie-break, and a final table (``seat_final``, then ``final_standings``).

The game (``ChampionshipRules.game_name``, ``GameResult.game_name``; through the registry)
says what depends on it: its tables' sizes (``GameModule.championship_tables``), its final's,
and whether the most or the fewest game points win (``GameModule.most_points_win``), which
places, relative points and matchpoints follow.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left, bisect_right
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum, StrEnum
from fractions import Fraction
from itertools import pairwise

from server import games
from server.games.base import GameRules

MAX_ROUNDS = 20
"""The most rounds a championship may have."""

POINTS_FOR_FIRST = 120
"""Championship points of a table's sole winner; its last gets 0, places in between are
spaced evenly. 120 makes every split of shared places a whole number at tables of 3, 4 and 5."""

SEARCH_BUDGET = 30_000
"""Candidates the exact seating search may try in all (over 0, 1, 2... allowed repeated
pairs) before the greedy seating takes over: enough for any 9 players (docs/RULES.md,
"Seating a round")."""

FINAL_TABLE_SIZES = (3, 4, 5)
"""The sizes a final table of the default game may have (``ChampionshipRules.final_table``;
0 is none; another game's: ``GameModule.championship_sizes``)."""

_SCALE = 60  # sixtieths: 1/m for m in 1..6 and 1/n for n in 2..6 are whole numbers of them


class ChampionshipError(ValueError):
    """Championship rules, players or results that do not fit together."""


class TieBreak(IntEnum):
    """What decided a place in the standings. The values are stored and shown: new ones are
    appended, never renumbered (the criteria apply in ``Tally.criteria``'s order)."""

    POINTS = 0
    """The main score: championship points, or with matchpoints scoring the percentages."""
    FIRSTS = 1
    RELATIVE_POINTS = 2
    HEAD_TO_HEAD = 3
    DRAW = 4
    BUCHHOLZ = 5
    """With the ``buchholz`` option, right after POINTS: the opponents' main scores summed."""
    FINAL = 6
    """With a final table: the final decided the finalists' places."""


class Scoring(StrEnum):
    """What the standings rank by first (``TieBreak.POINTS``)."""

    PLACES = "places"
    """Championship points by place at the table (120 for a sole winner, 0 for the last)."""
    MATCHPOINTS = "matchpoints"
    """With duplicate deals: each game's matchpoints against the players who held the same
    cards, as a percentage of the most possible; the percentages are summed."""


@dataclass(frozen=True, slots=True)
class ChampionshipRules:
    """The options of a championship."""

    rounds: int = 5
    """Rounds played (1 to 20); every registered player plays one game in each."""
    game: GameRules = None
    """The rules of every game (its game module's frozen value, with ``replace``; None: not
    set, as for a tally); ``players`` is set per table to the table's size."""
    duplicate_deals: bool = False
    """All tables of one size in a round get the same deals (one seed per round and size)."""
    scoring: Scoring = Scoring.PLACES
    """What ranks first: championship points (``places``) or, only with duplicate deals,
    the matchpoints' percentages (``matchpoints``); a string is taken for its value."""
    buchholz: bool = False
    """The Buchholz tie-break right after the main score: the sum of the main scores of the
    opponents met, once per game shared."""
    final_table: int = 0
    """0 (no final) or a size the game allows (3 to 5 in the default game): after the rounds,
    the top ``final_table`` of the standings play one more game, whose places decide theirs
    (``seat_final``, ``final_standings``)."""
    game_name: str = ""
    """The game every table plays ("" for the default game): its module seats the tables
    (``table_sizes``) and says whether the most or the fewest game points win."""

    def __post_init__(self) -> None:
        try:
            finals = games.get(self.game_name).championship_sizes
        except KeyError:
            raise ChampionshipError(f"game must be one of {', '.join(games.GAMES)},"
                                    f" got {self.game_name!r}") from None
        if (not isinstance(self.rounds, int) or isinstance(self.rounds, bool)
                or not 1 <= self.rounds <= MAX_ROUNDS):
            raise ChampionshipError(f"rounds must be 1 to {MAX_ROUNDS}, got {self.rounds!r}")
        if not isinstance(self.duplicate_deals, bool):
            raise ChampionshipError("duplicate_deals must be true or false")
        if not isinstance(self.scoring, Scoring):
            try:
                object.__setattr__(self, "scoring", Scoring(self.scoring))
            except ValueError:
                raise ChampionshipError(f"scoring must be one of {', '.join(Scoring)},"
                                        f" got {self.scoring!r}") from None
        if self.scoring is Scoring.MATCHPOINTS and not self.duplicate_deals:
            raise ChampionshipError("matchpoints scoring needs duplicate deals")
        if not isinstance(self.buchholz, bool):
            raise ChampionshipError("buchholz must be true or false")
        if (not isinstance(self.final_table, int) or isinstance(self.final_table, bool)
                or self.final_table not in (0, *finals)):
            raise ChampionshipError(
                f"final_table must be 0 (no final) or {span(finals)},"
                f" got {self.final_table!r}")

    def table_rules(self, size: int) -> GameRules:
        """The game rules of a table of ``size`` players.

        :raises ChampionshipError: no game rules were given."""
        if self.game is None:
            raise ChampionshipError("a championship's tables need its game's rules")
        return self.game.replace(players=size)


@dataclass(frozen=True, slots=True)
class GameResult:
    """One finished game of a championship: who sat where and how it ended.

    :raises ChampionshipError: on players, totals, leavers or no-shows that do not fit.
    """

    round_no: int
    """The round (1-based)."""
    table: int
    """The table within the round (1-based, in ``seat_round``'s order)."""
    players: tuple[str, ...]
    """The players by seat (as many as the game seats: 3 to 5 in the default game)."""
    totals: tuple[int, ...]
    """Game points by seat at the end of the game (fewest wins in the default game; in a
    game whose ``most_points_win``, the most)."""
    leavers: tuple[str, ...] = ()
    """Players who left during the game, in the order they left (first to leave first)."""
    no_shows: tuple[str, ...] = ()
    """Players seated who never came: their seat played automatically from the start."""
    game_name: str = ""
    """The game played ("" for the default game): its table sizes, and whether the most
    game points win (``GameModule.most_points_win``)."""
    places: tuple[int, ...] = field(init=False)
    """Places by seat, computed: fewest points first (most first in a game whose most points
    win), equal totals share a place; then the leavers, the first to leave last; then the
    no-shows, sharing the last places."""

    def __post_init__(self) -> None:
        n = len(self.players)
        try:
            module = games.get(self.game_name)
        except KeyError:
            raise ChampionshipError(f"game must be one of {', '.join(games.GAMES)},"
                                    f" got {self.game_name!r}") from None
        sizes = module.championship_sizes
        if n not in sizes or len(set(self.players)) != n:
            raise ChampionshipError(f"a table seats {sizes[0]} to {sizes[-1]} different"
                                    f" players, got {self.players}")
        if len(self.totals) != n:
            raise ChampionshipError(f"{n} players need {n} totals, got {len(self.totals)}")
        gone = (*self.leavers, *self.no_shows)
        if len(set(gone)) != len(gone) or not set(gone) <= set(self.players):
            raise ChampionshipError("leavers and no-shows are distinct players of the table")
        stayers = [i for i, p in enumerate(self.players) if p not in gone]
        places = [0] * n
        sign = -1 if module.most_points_win else 1
        for i in stayers:
            places[i] = 1 + sum(sign * self.totals[o] < sign * self.totals[i] for o in stayers)
        seat = {p: i for i, p in enumerate(self.players)}
        for k, player in enumerate(self.leavers):
            places[seat[player]] = len(stayers) + len(self.leavers) - k
        for player in self.no_shows:
            places[seat[player]] = n - len(self.no_shows) + 1
        object.__setattr__(self, "places", tuple(places))

    @property
    def most_wins(self) -> bool:
        """Its game's places go to the most game points."""
        return games.get(self.game_name).most_points_win

    def place_of(self, player: str) -> int:
        return self.places[self.players.index(player)]


@dataclass(frozen=True, slots=True)
class BoardScore:
    """One player's duplicate score of one game: the game compared with the games of the
    players who held the same cards (the same seat at the round's tables of that size)."""

    round_no: int
    table: int
    seat: int
    player: str
    matchpoints: Fraction
    """1 for each player of the group beaten, 1/2 for each tie."""
    top: int
    """The most matchpoints possible: the others of the group (0 for a group of one)."""
    percentage: Fraction
    """100 * matchpoints / top, exact; 50 for a group of one."""


@dataclass(frozen=True, slots=True)
class Standing:
    """One line of the standings."""

    place: int
    """1 to N; never shared (the draw separates whoever is still tied)."""
    player: str
    """The player."""
    points: int
    """Championship points, summed over the player's games."""
    firsts: Fraction
    """First places; a first shared by m players counts 1/m."""
    relative_points: Fraction
    """Sum over games of (own game points - the table's average), or in a game the most
    points win of (the table's average - own game points); fewer is better in both."""
    head_to_head: int
    """Among the players tied on the criteria above: games in which this player placed ahead
    of another of them minus games placed behind, counted per pair (0 when not tied)."""
    games: int
    """Games played (leavers and no-shows included)."""
    decided_by: TieBreak
    """The first criterion that separates this player from everyone else."""
    matchpoints: Fraction = Fraction(0)
    """With duplicate deals: matchpoints summed over the player's games (else 0)."""
    percentage: Fraction = Fraction(0)
    """With duplicate deals: the games' percentages summed (else 0)."""
    boards: tuple[BoardScore, ...] = ()
    """With duplicate deals: each game's duplicate score, by round (else empty)."""
    buchholz: Fraction = Fraction(0)
    """With the ``buchholz`` option: the main scores (``points``, or with matchpoints scoring
    ``percentage``) of the opponents met, summed once per game shared (else 0)."""
    final: int = 0
    """In the standings after a final (``final_standings``): the finalist's place in the
    final's game (as ``GameResult.places``); 0 for everyone else."""
    disqualified: bool = False
    """Disqualified (``Tally.disqualify``): ranked below everyone who is not, by the same
    criteria among the disqualified; ``decided_by`` compares it with them only."""


def table_sizes(n: int, game: str = "") -> list[int]:
    """The tables of a round of ``n`` players, largest first, as ``game`` ("" for the default
    game) seats them (``GameModule.championship_tables``): in the default game as many tables
    of 4 as possible with at most two tables of another size, fives before threes (13 -> [5,
    4, 4]).

    :raises ChampionshipError: for fewer players than the game seats, or an unknown game.
    """
    try:
        return games.get(game).championship_tables(n)
    except KeyError:
        raise ChampionshipError(f"game must be one of {', '.join(games.GAMES)},"
                                f" got {game!r}") from None
    except ValueError as exc:
        raise ChampionshipError(str(exc)) from None


def span(sizes: Sequence[int]) -> str:
    """Ascending sizes as a message says them: ``(3, 4, 5)`` as "3 to 5", ``(2, 3)`` as "2
    or 3"."""
    if len(sizes) > 2:
        return f"{sizes[0]} to {sizes[-1]}"
    return " or ".join(str(size) for size in sizes)


def derive_seed(seed: int | str, *parts: int | str) -> int:
    """A 64-bit seed derived one way from the championship's seed: publishing it reveals
    neither the championship's seed nor any other derived seed. It is the first 8 bytes,
    big-endian, of the SHA-256 of ``copas-championship/<seed>/<part>/...`` in UTF-8
    (docs/RULES.md, "Seeded draws")."""
    text = "/".join(str(p) for p in ("copas-championship", seed, *parts))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def deal_seed(rules: ChampionshipRules, seed: int | str, round_no: int, table: int,
              size: int) -> int:
    """The seed of the game at ``table`` (1-based) of ``round_no``: one per round and table,
    or with duplicate deals one per round and table size."""
    if rules.duplicate_deals:
        return derive_seed(seed, "deal", round_no, "size", size)
    return derive_seed(seed, "deal", round_no, "table", table)


def draw_order(players: Iterable[str], seed: int | str, purpose: str = "draw") -> list[str]:
    """The players in the order of a seeded draw (the same for any order of ``players``):
    by ``derive_seed(seed, purpose, player)``, smallest first, then by id. ``players`` are
    the ids the record shows (public per-championship ids), so anyone can recompute it."""
    return sorted(players, key=lambda p: (derive_seed(seed, purpose, p), p))


def championship_points(result: GameResult) -> dict[str, int]:
    """Championship points of each player of a game: the place's points, with shared places
    splitting the points of the places they cover."""
    n = len(result.players)
    step = POINTS_FOR_FIRST // (n - 1)
    points: dict[str, int] = {}
    for player, place in zip(result.players, result.places, strict=True):
        shared = result.places.count(place)
        covered = range(place, place + shared)
        points[player] = sum(step * (n - q) for q in covered) // shared
    return points


def board_scores(results: Iterable[GameResult]) -> list[BoardScore]:
    """The duplicate score of every seat of ``results`` (docs/RULES.md, "Duplicate scoring"):
    a board is a round's games of one table size; each seat is compared with the same seat
    at the board's other tables. By round, table and seat."""
    boards: dict[tuple[int, int], list[GameResult]] = {}
    for result in results:
        boards.setdefault((result.round_no, len(result.players)), []).append(result)
    scores = [score for board in boards.values() for score in _score_board(board)]
    scores.sort(key=lambda b: (b.round_no, b.table, b.seat))
    return scores


def _score_board(board: Sequence[GameResult]) -> list[BoardScore]:
    """Each seat of one board's games against that seat at the others: ranked by (stayed,
    left, never came), then among those who stayed by fewer game points (by more in a game
    whose most points win); beating a player is 1 matchpoint, a tie 1/2."""
    scores = []
    sign = -1 if board[0].most_wins else 1
    for seat in range(len(board[0].players)):
        ranks = []
        for result in board:
            player = result.players[seat]
            if player in result.no_shows:
                ranks.append((2, 0))
            elif player in result.leavers:
                ranks.append((1, 0))
            else:
                ranks.append((0, sign * result.totals[seat]))
        top = len(board) - 1
        ordered = sorted(ranks)
        for result, rank in zip(board, ranks, strict=True):
            ahead = bisect_left(ordered, rank)
            tied = bisect_right(ordered, rank) - ahead
            halves = 2 * (len(ordered) - ahead - tied) + tied - 1
            matchpoints = Fraction(halves, 2)
            percentage = matchpoints * 100 / top if top else Fraction(50)
            scores.append(BoardScore(result.round_no, result.table, seat, result.players[seat],
                                     matchpoints, top, percentage))
    return scores


def met_pairs(results: Iterable[GameResult]) -> set[frozenset[str]]:
    """Every pair of players who sat at one table."""
    met: set[frozenset[str]] = set()
    for result in results:
        met.update(_pairs(result.players))
    return met


def _pairs(players: Sequence[str]) -> Iterable[frozenset[str]]:
    return (frozenset((a, b)) for i, a in enumerate(players) for b in players[i + 1:])


# ---------------------------------------------------------------- seating


def seat_round(players: Collection[str], standings: Sequence[Standing],
               met: Collection[frozenset[str]], seed: int | str, round_no: int,
               *, budget: int = SEARCH_BUDGET, game: str = "") -> list[list[str]]:
    """The tables of a round, largest first, each listed in seat order.

    Round 1 (or no standings yet) orders the players by a seeded draw, later rounds by the
    standings; the search then seats neighbours together with the fewest repeated pairs.
    ``players`` are the round's: the standings may also rank players who do not play it (a
    player dropped), who are passed over.

    ``game`` ("" for the default game) gives the tables' sizes (``table_sizes``).

    :raises ChampionshipError: for fewer players than the game seats, repeated players, or
        standings that do not rank each of the players once.
    """
    names = list(players)
    if len(set(names)) != len(names):
        raise ChampionshipError("a player is registered twice")
    sizes = table_sizes(len(names), game)
    if standings:
        ranked = [s.player for s in standings]
        playing = set(names)
        order = [p for p in ranked if p in playing]
        if len(order) != len(names) or len(set(ranked)) != len(ranked):
            missing = ", ".join(sorted(playing - set(order))) or "nobody, but repeat a player"
            raise ChampionshipError(
                f"the standings leave out {missing}: they must list exactly the round's"
                " players, and any who sit the round out")
    else:
        order = draw_order(names, seed, f"round-{round_no}")
    index = {p: i for i, p in enumerate(order)}
    known: list[set[int]] = [set() for _ in order]
    for pair in met:
        a, b = sorted(index.get(p, -1) for p in pair) if len(pair) == 2 else (-1, -1)
        if a >= 0:
            known[a].add(b)
            known[b].add(a)
    tables = _seat(sizes, known, budget)
    return [draw_order((order[i] for i in table), seed, f"seats/{round_no}/{t}")
            for t, table in enumerate(tables, start=1)]


def _seat(sizes: list[int], met: list[set[int]], budget: int) -> list[list[int]]:
    """The exact search for 0, 1, 2... allowed repeats while its budget lasts; past the
    budget, the greedy seating improved by swaps."""
    left = budget
    allowed = 0
    while left > 0:
        found, tries = _search(sizes, met, allowed, left)
        if found is not None:
            return found
        left -= tries
        allowed += 1
    return _improve(_greedy(sizes, met), met)


def _greedy(sizes: list[int], met: list[set[int]]) -> list[list[int]]:
    """Tables in order; the best unseated player opens each, and each next seat takes the
    best-placed unseated player who adds the fewest repeated pairs."""
    unseated = list(range(len(met)))
    tables = []
    for size in sizes:
        members = [unseated.pop(0)]
        while len(members) < size:
            best, fewest = 0, size
            for i, c in enumerate(unseated):
                seen = met[c]
                repeats = sum(m in seen for m in members)
                if repeats < fewest:
                    best, fewest = i, repeats
                    if not repeats:
                        break
            members.append(unseated.pop(best))
        tables.append(members)
    return tables


def _improve(tables: list[list[int]], met: list[set[int]]) -> list[list[int]]:
    """Swap players between tables while a swap removes repeated pairs: tables in order, each
    repeated player in standings order, tables nearest first (below before above), players
    in standings order; the first swap that lowers the count is made, then the table is
    looked at again. Each swap removes at least one repeat, so this ends."""
    def repeats(x: int, table: list[int], without: int) -> int:
        seen = met[x]
        return sum(m in seen for m in table if m != without and m != x)

    count = len(tables)
    t = 0
    while t < count:
        here = tables[t]
        swapped = False
        for a in sorted(here):
            own = repeats(a, here, a)
            if not own:
                continue
            for d in range(1, count):
                for u in (t + d, t - d):
                    if not 0 <= u < count:
                        continue
                    there = tables[u]
                    for b in sorted(there):
                        gain = own + repeats(b, there, b)
                        if repeats(a, there, b) + repeats(b, here, a) < gain:
                            here[here.index(a)] = b
                            there[there.index(b)] = a
                            swapped = True
                            break
                    if swapped:
                        break
                if swapped:
                    break
            if swapped:
                break
        if swapped:
            t = min(t, u)
        else:
            t += 1
    return [sorted(table) for table in tables]


def _search(sizes: list[int], met: list[set[int]], allowed: int,
            budget: int) -> tuple[list[list[int]] | None, int]:
    """Depth-first, seat by seat (tables in order, seats by standings index, ascending), each
    seat taking the best-placed candidate that keeps the repeats within ``allowed``.

    Players are standings indices 0..n-1. A table's players ascend; a table after another of
    its size opens above that table's first player; a table of the last size opens with the
    best unseated player. Returns the seating (None when nothing fits or the budget runs
out) and the candidates tried."""
    n = len(met)
    table_of: list[int] = []
    opening: list[int] = []  # position of each table's first seat
    for t, size in enumerate(sizes):
        opening.append(len(table_of))
        table_of.extend([t] * size)
    last_size_from = next(t for t in range(len(sizes)) if sizes[t] == sizes[-1])
    assign = [-1] * n
    added = [0] * n
    resume = [0] * (n + 1)
    seated = bytearray(n)
    low = 0  # every player below it is seated
    repeats = 0
    tries = 0
    p = 0
    while p < n:
        t = table_of[p]
        first = opening[t]
        if p > first:
            bound = assign[p - 1] + 1
        elif t > 0 and sizes[t] == sizes[t - 1]:
            bound = assign[opening[t - 1]] + 1
        else:
            bound = 0
        c = max(bound, low, resume[p])
        forced = p == first and t >= last_size_from  # the best unseated player opens it
        chosen = -1
        while c < n:
            if not seated[c]:
                if forced and c != low:
                    break
                tries += 1
                if tries > budget:
                    return None, tries
                extra = 0
                if p > first:
                    seen = met[c]
                    for q in range(first, p):
                        if assign[q] in seen:
                            extra += 1
                if repeats + extra <= allowed:
                    chosen = c
                    break
                if forced:
                    break
            c += 1
        if chosen >= 0:
            assign[p] = chosen
            added[p] = extra
            repeats += extra
            seated[chosen] = 1
            resume[p] = chosen + 1
            while low < n and seated[low]:
                low += 1
            p += 1
            resume[p] = 0
            continue
        resume[p] = 0
        p -= 1
        if p < 0:
            return None, tries
        undone = assign[p]
        seated[undone] = 0
        repeats -= added[p]
        assign[p] = -1
        low = min(low, undone)
    return [assign[opening[t]:opening[t] + size] for t, size in enumerate(sizes)], tries


# ---------------------------------------------------------------- standings


class Tally:
    """The running standings of a championship: add each finished game, read the standings.

    ``add`` costs the size of one table; ``standings`` sorts the players once (and with
    duplicate deals scores again the boards whose games were added since).
    """

    def __init__(self, players: Iterable[str], seed: int | str,
                 rules: ChampionshipRules | None = None) -> None:
        self.players = tuple(players)
        if len(set(self.players)) != len(self.players):
            raise ChampionshipError("a player is registered twice")
        self.seed = seed
        self.rules = ChampionshipRules() if rules is None else rules
        self.criteria: tuple[TieBreak, ...] = (
            TieBreak.POINTS, *((TieBreak.BUCHHOLZ,) if self.rules.buchholz else ()),
            TieBreak.FIRSTS, TieBreak.RELATIVE_POINTS, TieBreak.HEAD_TO_HEAD, TieBreak.DRAW)
        """The criteria of the standings, in the order they apply."""
        self._boards: dict[tuple[int, int], list[GameResult]] = {}  # (round, size): games
        self._board_scores: dict[tuple[int, int], list[BoardScore]] = {}
        self._stale: set[tuple[int, int]] = set()  # boards with games not scored yet
        self.results: list[GameResult] = []
        self._games: dict[str, list[GameResult]] = {p: [] for p in self.players}
        self._points = dict.fromkeys(self.players, 0)
        self._firsts = dict.fromkeys(self.players, 0)  # sixtieths
        self._relative = dict.fromkeys(self.players, 0)  # sixtieths
        self._draw = {p: (derive_seed(seed, "draw", p), p) for p in self.players}
        self._seen: set[tuple[int, int]] = set()
        self._ahead: dict[tuple[str, str], int] = {}  # (a, b): games a placed ahead of b - behind
        self.disqualified: set[str] = set()
        """Players disqualified: ranked below everyone else, their results kept."""

    def register(self, player: str) -> None:
        """Register a player after the start (a late entrant): no game in the rounds before,
        so nothing scored there; ranked with everyone by the same criteria.

        :raises ChampionshipError: for a player already registered.
        """
        if player in self._games:
            raise ChampionshipError("a player is registered twice")
        self.players = (*self.players, player)
        self._games[player] = []
        self._points[player] = 0
        self._firsts[player] = 0
        self._relative[player] = 0
        self._draw[player] = (derive_seed(self.seed, "draw", player), player)

    def disqualify(self, player: str) -> None:
        """Rank ``player`` below everyone who is not disqualified (docs/RULES.md, "Standings
        and tie-breaks"): their results stay as played, for them and for their opponents.

        :raises ChampionshipError: for a player not registered.
        """
        if player not in self._games:
            raise ChampionshipError(f"not registered: {player}")
        self.disqualified.add(player)

    def add(self, result: GameResult) -> None:
        """Count one finished game.

        :raises ChampionshipError: for a table already counted, a player not registered, or
            a result of another game than the championship's.
        """
        if (result.round_no, result.table) in self._seen:
            raise ChampionshipError(
                f"round {result.round_no} table {result.table} is already counted")
        unknown = [p for p in result.players if p not in self._games]
        if unknown:
            raise ChampionshipError(f"not registered: {', '.join(unknown)}")
        if result.game_name != self.rules.game_name:
            raise ChampionshipError(f"a game of {result.game_name or 'the default game'} in"
                                    f" a championship of"
                                    f" {self.rules.game_name or 'the default game'}")
        self._seen.add((result.round_no, result.table))
        self.results.append(result)
        n = len(result.players)
        if self.rules.duplicate_deals:
            board = (result.round_no, n)
            self._boards.setdefault(board, []).append(result)
            self._stale.add(board)
        table_total = sum(result.totals) * (_SCALE // n)
        sign = -1 if result.most_wins else 1  # relative points: fewer is better in every game
        winners = result.places.count(1)
        for player, points in championship_points(result).items():
            self._points[player] += points
        for player, total, place in zip(result.players, result.totals, result.places,
                                        strict=True):
            self._games[player].append(result)
            self._relative[player] += sign * (total * _SCALE - table_total)
            if place == 1:
                self._firsts[player] += _SCALE // winners
        ahead = self._ahead
        for player, mine in zip(result.players, result.places, strict=True):
            for other, place in zip(result.players, result.places, strict=True):
                if other != player:
                    pair = (player, other)
                    ahead[pair] = ahead.get(pair, 0) + (place > mine) - (place < mine)

    def met_pairs(self) -> set[frozenset[str]]:
        return met_pairs(self.results)

    def board_scores(self) -> dict[str, list[BoardScore]]:
        """With duplicate deals, each player's duplicate scores by round (docs/RULES.md,
        "Duplicate scoring"); empty without."""
        for board in self._stale:
            self._board_scores[board] = _score_board(self._boards[board])
        self._stale.clear()
        scores: dict[str, list[BoardScore]] = {}
        for board in sorted(self._board_scores):
            for score in self._board_scores[board]:
                scores.setdefault(score.player, []).append(score)
        return scores

    def standings(self) -> list[Standing]:
        """Every player, best first (docs/RULES.md, "Standings")."""
        duplicate = self.rules.duplicate_deals
        boards = self.board_scores() if duplicate else {}
        no_boards: list[BoardScore] = []
        zero = Fraction(0)
        matchpoints = {p: sum((b.matchpoints for b in boards.get(p, no_boards)), zero)
                       for p in self.players} if duplicate else {}
        percentage = {p: sum((b.percentage for b in boards.get(p, no_boards)), zero)
                      for p in self.players} if duplicate else {}
        score: dict[str, Fraction] | dict[str, int] = (
            percentage if self.rules.scoring is Scoring.MATCHPOINTS else self._points)
        with_buchholz = self.rules.buchholz
        buchholz = self._buchholz(score) if with_buchholz else {}

        firsts, relative = self._firsts, self._relative

        if with_buchholz:
            def level(p: str) -> tuple[int | Fraction, ...]:
                return (-score[p], -buchholz[p], -firsts[p], relative[p])
        else:
            def level(p: str) -> tuple[int | Fraction, ...]:
                return (-score[p], -firsts[p], relative[p])

        out = self.disqualified
        groups: dict[tuple[object, ...], list[str]] = {}
        for player in self.players:  # the disqualified are tied with each other only
            groups.setdefault((player in out, *level(player)), []).append(player)
        head = dict.fromkeys(self.players, 0)
        for tied in groups.values():
            if len(tied) > 1:
                head.update(self._head_to_head(tied))
        keys = {p: (*level(p), -head[p], self._draw[p]) for p in self.players}
        ranked = sorted((p for p in self.players if p not in out), key=keys.__getitem__)
        last = sorted(out, key=keys.__getitem__) if out else []

        # gaps[i]: the first criterion that separates ranked[i - 1] from ranked[i] (0, and
        # never taken, where the disqualified begin: they are compared among themselves)
        gaps = [0]
        count = len(self.criteria)
        for above, below in pairwise(ranked):
            upper, lower = keys[above], keys[below]
            gaps.append(next(i for i in range(count) if upper[i] != lower[i]))
        if last:
            gaps.append(0)
            for above, below in pairwise(last):
                upper, lower = keys[above], keys[below]
                gaps.append(next(i for i in range(count) if upper[i] != lower[i]))
            ranked += last
        gaps.append(0)
        # One Fraction per value, shared by every line that has it (most values repeat).
        sixtieths = {v: Fraction(v, _SCALE) for v in {*firsts.values(), *relative.values()}}
        points, games = self._points, self._games
        criteria = self.criteria
        no_duplicate = (zero, zero, ())
        rows = []
        for i, player in enumerate(ranked):
            rows.append(Standing(
                i + 1, player, points[player], sixtieths[firsts[player]],
                sixtieths[relative[player]], head[player], len(games[player]),
                criteria[max(gaps[i], gaps[i + 1])],
                *((matchpoints[player], percentage[player], tuple(boards.get(player, ())))
                  if duplicate else no_duplicate),
                Fraction(buchholz[player]) if with_buchholz else zero, 0, player in out))
        return rows

    def _buchholz(self, score: Mapping[str, int | Fraction]) -> dict[str, int | Fraction]:
        """Each player's Buchholz: the scores of the opponents at each of their games."""
        total: dict[str, int | Fraction] = {}
        for player, played in self._games.items():
            met: int | Fraction = 0
            for result in played:
                for other in result.players:
                    if other != player:
                        met += score[other]
            total[player] = met
        return total

    def _head_to_head(self, tied: list[str]) -> dict[str, int]:
        """Each tied player's games placed ahead of another of them minus games behind (kept
        per pair by ``add``: a group costs its pairs, not its players' games)."""
        ahead = self._ahead
        return {player: sum(ahead.get((player, other), 0) for other in tied if other != player)
                for player in tied}


def standings(results: Iterable[GameResult], players: Iterable[str], seed: int | str,
              rules: ChampionshipRules | None = None) -> list[Standing]:
    """The standings of a championship from its game results alone (under ``rules``'
    scoring and tie-breaks; the default rules when None)."""
    tally = Tally(players, seed, rules)
    for result in results:
        tally.add(result)
    return tally.standings()


# ---------------------------------------------------------------- the final


def seat_final(rules: ChampionshipRules, standings: Sequence[Standing],
               seed: int | str, *, passed_over: Collection[str] = ()) -> list[str]:
    """The final's players in seat order: the top ``rules.final_table`` of the standings
    after the last round, less the players ``passed_over`` (who play no more: dropped,
    withdrawn or disqualified), seated by the seeded draw ``final``. The final is played as
    round ``rules.rounds + 1``, table 1 (``deal_seed`` gives its deal).

    :raises ChampionshipError: without a final table, or with fewer players than it seats.
    """
    size = rules.final_table
    if not size:
        raise ChampionshipError("this championship has no final table")
    eligible = [s.player for s in standings if s.player not in passed_over]
    if len(eligible) < size:
        raise ChampionshipError(
            f"a final table of {size} needs {size} players, the standings have"
            f" {len(eligible)}")
    return draw_order(eligible[:size], seed, "final")


def final_standings(standings: Sequence[Standing], final: GameResult, *,
                    passed_over: Collection[str] = ()) -> list[Standing]:
    """The standings after the final: its players (the top ``len(final.players)`` of
    ``standings``, the standings after the last round, less the players ``passed_over``
    when it was seated) take places 1 to N by their places in the final, a place shared in
    the final by their order before it, each decided by ``TieBreak.FINAL``; everyone else
    keeps their line, after them, in their order (renumbered when a player passed over was
    above a finalist). The final adds no points.

    :raises ChampionshipError: when the final's players are not the top of the standings.
    """
    size = len(final.players)
    top = [s for s in standings if s.player not in passed_over][:size]
    if len(top) != size or {s.player for s in top} != set(final.players):
        raise ChampionshipError("the final's players must be the top of the standings")
    place_in_final = dict(zip(final.players, final.places, strict=True))
    before = {s.player: i for i, s in enumerate(top)}
    order = sorted(top, key=lambda s: (place_in_final[s.player], before[s.player]))
    finalists = [replace(s, place=i, decided_by=TieBreak.FINAL, final=place_in_final[s.player])
                 for i, s in enumerate(order, start=1)]
    rest = [s for s in standings if s.player not in place_in_final]
    return [*finalists, *(s if s.place == i else replace(s, place=i)
                          for i, s in enumerate(rest, start=size + 1))]
