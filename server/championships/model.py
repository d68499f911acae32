"""A championship as the store keeps it: what its creator chose, its registrations, the
pairings announced, the tables of each round seated and the results counted. Typed values
only; no I/O."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from server.championships.format import (
    ChampionshipRules,
    GameResult,
    Scoring,
    Standing,
    Tally,
    final_standings,
)
from server.games import GameRules
from server.tokens import pseudonym


class Phase(enum.StrEnum):
    """Where a championship is (``copas.v1.ChampionshipState``)."""

    REGISTERING = "registering"
    RUNNING = "running"
    FINISHED = "finished"
    CANCELLED = "cancelled"

    @property
    def is_over(self) -> bool:
        return self in (Phase.FINISHED, Phase.CANCELLED)


@dataclass(frozen=True, slots=True)
class Spec:
    """What a championship's creator chose, fixed at its creation. Stored as JSON: a field
    added later has a default, which is what a championship made before it had."""

    championship_id: str
    """"c_..."."""
    name: str
    preset: str
    """The games' preset (its name; ``game`` is what the server applies)."""
    game: GameRules
    """The rules of every game (``players`` set per table), its game module's value."""
    rounds: int
    duplicate_deals: bool
    max_players: int
    min_players: int
    start_at: float | None
    """When it starts by itself (seconds since the epoch); None: by an operator or when full."""
    start_when_full: bool
    round_pause: float
    """Seconds from a round's last counted game to the next round's seating."""
    seed: str
    """The championship's secret seed: the draw, the seating and the deals follow from it."""
    creator: str
    """The account that created it, or "" for an operator."""
    created: float
    request_key: str = ""
    """The CreateChampionship request that made it ("" without a request_id)."""
    fingerprint: str = ""
    scoring: Scoring = Scoring.PLACES
    buchholz: bool = False
    final_table: int = 0
    """0, or the final's size (3 to 5)."""
    registration_opens: float | None = None
    """Registration opens then (None: at once)."""
    registration_closes: float | None = None
    """Registration closes then (None: at the start, or with late entry at its end)."""
    late_entry_rounds: int = 0
    """0: none; N: after the start a player may register until round N is paired."""
    check_in: float = 0.0
    """Seconds before ``start_at`` that check-in opens (0: no check-in)."""
    drop_absent: bool = False
    """A no-show is dropped from the next rounds (False for championships made before the
    option: they go on as they were made; a new one's default is True)."""
    round_time_limit: float = 0.0
    """Seconds a round's games may run before they are ended (0: no limit)."""
    pairing_notice: float = 0.0
    """Seconds a round's pairings are announced before its tables are made (0: with them)."""
    game_name: str = ""
    """The game every table plays, as its creator named it ("" for the default game; a
    championship made before the option played the default game)."""

    @property
    def rules(self) -> ChampionshipRules:
        return ChampionshipRules(self.rounds, self.game, self.duplicate_deals, self.scoring,
                                 self.buchholz, self.final_table, self.game_name)

    @property
    def final_round(self) -> int:
        """The final's round number (``rounds`` + 1), or 0 without a final."""
        return self.rounds + 1 if self.final_table else 0

    @property
    def check_in_opens(self) -> float | None:
        """When check-in opens (None: no check-in)."""
        if not self.check_in or self.start_at is None:
            return None
        return self.start_at - self.check_in


@dataclass(frozen=True, slots=True)
class Registration:
    account_id: str
    display_name: str
    registered: float
    withdrawn: float | None = None
    """When the player withdrew (after the start): they leave the game they are in and are
    seated in no round paired after (one paired before, announced, seats them: they leave
    at once)."""
    first_round: int = 1
    """The first round they play (later for a late entrant)."""
    checked_in: float | None = None
    """When they checked in (None: not; only a championship with check-in asks it)."""
    dropped: int = 0
    """The first round they no longer play, dropped after a round they never came to (0: not
    dropped)."""
    disqualified: float | None = None
    """When an operator disqualified them (None: not)."""

    def plays(self, round_no: int, at: float | None = None) -> bool:
        """Whether they are seated in ``round_no`` (paired at ``at``): entered by then, not
        dropped from it, neither withdrawn nor disqualified before."""
        return (self.first_round <= round_no and not (self.dropped and self.dropped <= round_no)
                and (self.withdrawn is None or (at is not None and self.withdrawn > at))
                and (self.disqualified is None or (at is not None and self.disqualified > at)))


@dataclass(frozen=True, slots=True)
class SeatedTable:
    """One table of a seated round: written with the round, in one transaction."""

    round_no: int
    table_no: int
    table_id: str
    players: tuple[str, ...]
    """Account ids by seat."""
    sealed_tokens: tuple[str, ...] = ()
    """Each seat's player token, sealed with a key only the championship's seed gives
    (``server.tables.idempotency.seal``), so any node can hand it to its player."""


@dataclass(frozen=True, slots=True)
class Announced:
    """A round's pairings, announced before its tables are made (``pairing_notice``)."""

    round_no: int
    announced: float
    starts: float
    """When its tables are made (later by the length of a pause meanwhile)."""
    tables: tuple[tuple[str, ...], ...]
    """Account ids by table (largest first) and seat."""


@dataclass(frozen=True, slots=True)
class Counted:
    """One game counted in the standings (keyed by its table id: counted once)."""

    table_id: str
    result: GameResult
    counted: float
    end_reason: str | None = None
    """Why its game ended, as its record says (``GameEndReason``'s value; None for a game
    counted before it was kept)."""
    corrected: float | None = None
    """When an operator set this result (None: as the game ended)."""
    correction: str = ""
    """The operator's reason."""


@dataclass(slots=True)
class Championship:
    """Everything the store holds of one championship."""

    spec: Spec
    phase: Phase
    began: float | None = None
    ended: float | None = None
    registrations: list[Registration] = field(default_factory=list)
    """In order of registration."""
    rounds: dict[int, float] = field(default_factory=dict)
    """Round number -> when its tables were made."""
    tables: list[SeatedTable] = field(default_factory=list)
    counted: list[Counted] = field(default_factory=list)
    version: int = 0
    """How many writes made it what it is (the store's count: later reads never show less)."""
    paused: float | None = None
    """When an operator paused it (None: not paused)."""
    time_limits: dict[int, float] = field(default_factory=dict)
    """Round number -> when its games still running are ended (rounds with a time limit)."""
    announced: dict[int, Announced] = field(default_factory=dict)
    """Rounds whose pairings are announced, their tables not made yet."""
    _standings: list[Standing] | None = field(default=None, repr=False, compare=False)
    _published: Championship | None = field(default=None, repr=False, compare=False)
    # Indexes made at their first use (a championship read from the store is not changed
    # after): every watcher's message asks them again.
    _by_account: dict[str, Registration] | None = field(default=None, repr=False,
                                                         compare=False)
    _counted_ids: frozenset[str] | None = field(default=None, repr=False, compare=False)
    _by_round: dict[int, list[SeatedTable]] | None = field(default=None, repr=False,
                                                          compare=False)
    _playing: dict[str, tuple[SeatedTable, int]] | None = field(default=None, repr=False,
                                                                compare=False)

    @property
    def id(self) -> str:
        return self.spec.championship_id

    def players(self) -> list[str]:
        return [r.account_id for r in self.registrations]

    def player_id(self, account_id: str) -> str:
        """The account as this championship names it in public ("p_..."): what its standings,
        its draws and its tie-break use, so anyone can recompute them (RULES.md)."""
        return pseudonym(self.id, account_id)

    def accounts_by_player_id(self) -> dict[str, str]:
        return {self.player_id(a): a for a in self.players()}

    def registration(self, account_id: str) -> Registration | None:
        if self._by_account is None:
            self._by_account = {r.account_id: r for r in self.registrations}
        return self._by_account.get(account_id)

    def playing(self, account_id: str) -> tuple[SeatedTable, int] | None:
        """The account's table and seat in the round seated last, while that game is not
        counted."""
        if self._playing is None:
            done = self.counted_ids()
            self._playing = {player: (table, seat)
                             for table in self.tables_of(self.seated_round)
                             if table.table_id not in done
                             for seat, player in enumerate(table.players)}
        return self._playing.get(account_id)

    @property
    def current_round(self) -> int:
        """The round seated or announced last (0 before the first)."""
        return max((*self.rounds, *self.announced), default=0)

    @property
    def seated_round(self) -> int:
        """The round whose tables were made last (0 before the first)."""
        return max(self.rounds, default=0)

    def tables_of(self, round_no: int) -> list[SeatedTable]:
        if self._by_round is None:
            self._by_round = {}
            for table in self.tables:
                self._by_round.setdefault(table.round_no, []).append(table)
        return list(self._by_round.get(round_no, ()))

    def counted_ids(self) -> frozenset[str]:
        if self._counted_ids is None:
            self._counted_ids = frozenset(c.table_id for c in self.counted)
        return self._counted_ids

    def is_round_over(self, round_no: int) -> bool:
        done = self.counted_ids()
        return bool(self.tables_of(round_no)) and all(
            t.table_id in done for t in self.tables_of(round_no))

    def plays(self, round_no: int, at: float | None = None) -> list[str]:
        """The accounts seated in ``round_no`` (paired at ``at``), in order of registration."""
        return [r.account_id for r in self.registrations if r.plays(round_no, at)]

    def tally(self) -> Tally:
        """The games of the rounds counted (never the final's), by the players' public ids
        (``player_id``), the disqualified ranked last."""
        ids = {a: self.player_id(a) for a in self.players()}
        tally = Tally(ids.values(), self.spec.seed, self.spec.rules)
        for counted in sorted(self.counted, key=lambda c: (c.result.round_no, c.result.table)):
            r = counted.result
            if r.round_no > self.spec.rounds:
                continue
            tally.add(GameResult(r.round_no, r.table, tuple(ids[p] for p in r.players),
                                 r.totals, tuple(ids[p] for p in r.leavers),
                                 tuple(ids[p] for p in r.no_shows), r.game_name))
        for registration in self.registrations:
            if registration.disqualified is not None:
                tally.disqualify(ids[registration.account_id])
        return tally

    def final_result(self) -> GameResult | None:
        """The final's game once counted, by the players' public ids."""
        round_no = self.spec.final_round
        found = next((c.result for c in self.counted if round_no and
                      c.result.round_no == round_no), None)
        if found is None:
            return None
        ids = {a: self.player_id(a) for a in self.players()}
        return GameResult(found.round_no, found.table, tuple(ids[p] for p in found.players),
                          found.totals, tuple(ids[p] for p in found.leavers),
                          tuple(ids[p] for p in found.no_shows), found.game_name)

    def published(self) -> Championship:
        """The championship as anyone may see it: with duplicate deals, the results of a
        round still in play are withheld (every table of the round plays the same deals, so a
        table's scores tell the tables still playing something of their hands) until every
        table of that round has ended; the standings then count only the rounds over."""
        if not self.spec.duplicate_deals or self.phase.is_over:
            return self
        if self._published is None:
            done = self.counted_ids()
            playing = {t.round_no for t in self.tables if t.table_id not in done}
            shown = [c for c in self.counted if c.result.round_no not in playing]
            self._published = self if len(shown) == len(self.counted) else \
                replace(self, counted=shown, _standings=None, _published=None,
                        _counted_ids=None, _playing=None)
        return self._published

    def standings(self) -> list[Standing]:
        """The standings of the games counted, by the players' public ids (computed once per
        read from the store: every watcher of this read shares them); after the final, the
        final standings."""
        if self._standings is None:
            self._standings = self._compute() if self.phase is not Phase.REGISTERING else []
        return self._standings

    def _compute(self) -> list[Standing]:
        lines = self.tally().standings()
        final = self.final_result()
        if final is None:
            return lines
        # The players ranked above a finalist who did not play the final were passed over
        # when it was seated (dropped, withdrawn or disqualified by then).
        finalists = set(final.players)
        lowest = max(i for i, s in enumerate(lines) if s.player in finalists)
        passed = {s.player for s in lines[:lowest] if s.player not in finalists}
        return final_standings(lines, final, passed_over=passed)
