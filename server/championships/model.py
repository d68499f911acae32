"""A championship as the store keeps it: what its creator chose, its registrations, the
tables of each round seated and the results counted. Typed values only; no I/O."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from engine import Rules
from engine.championship import ChampionshipRules, GameResult, Standing, Tally
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
    """What a championship's creator chose, fixed at its creation."""

    championship_id: str
    """"c_..."."""
    name: str
    preset: str
    """The games' preset (its name; ``game`` is what the server applies)."""
    game: Rules
    """The rules of every game (``players`` set per table)."""
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

    @property
    def rules(self) -> ChampionshipRules:
        return ChampionshipRules(self.rounds, self.game, self.duplicate_deals)


@dataclass(frozen=True, slots=True)
class Registration:
    account_id: str
    display_name: str
    registered: float
    withdrawn: float | None = None
    """When the player withdrew (after the start): a leaver in every game from then on."""


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
class Counted:
    """One game counted in the standings (keyed by its table id: counted once)."""

    table_id: str
    result: GameResult
    counted: float


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
    """Round number -> when it was seated."""
    tables: list[SeatedTable] = field(default_factory=list)
    counted: list[Counted] = field(default_factory=list)
    version: int = 0
    """How many writes made it what it is (the store's count: later reads never show less)."""
    _standings: list[Standing] | None = field(default=None, repr=False, compare=False)

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
        return next((r for r in self.registrations if r.account_id == account_id), None)

    @property
    def current_round(self) -> int:
        return max(self.rounds, default=0)

    def tables_of(self, round_no: int) -> list[SeatedTable]:
        return [t for t in self.tables if t.round_no == round_no]

    def counted_ids(self) -> set[str]:
        return {c.table_id for c in self.counted}

    def is_round_over(self, round_no: int) -> bool:
        done = self.counted_ids()
        return bool(self.tables_of(round_no)) and all(
            t.table_id in done for t in self.tables_of(round_no))

    def tally(self) -> Tally:
        """The games counted, by the players' public ids (``player_id``)."""
        ids = {a: self.player_id(a) for a in self.players()}
        tally = Tally(ids.values(), self.spec.seed)
        for counted in sorted(self.counted, key=lambda c: (c.result.round_no, c.result.table)):
            r = counted.result
            tally.add(GameResult(r.round_no, r.table, tuple(ids[p] for p in r.players),
                                 r.totals, tuple(ids[p] for p in r.leavers),
                                 tuple(ids[p] for p in r.no_shows)))
        return tally

    def standings(self) -> list[Standing]:
        """The standings of the games counted, by the players' public ids (computed once per
        read from the store: every watcher of this read shares them)."""
        if self._standings is None:
            self._standings = self.tally().standings() \
                if self.phase is not Phase.REGISTERING else []
        return self._standings
