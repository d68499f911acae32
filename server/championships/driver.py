"""The driver: runs every championship from the store, step by step, so that a restart (or,
on a cluster, another node) carries on where the last step left off.

One step of a championship reads it from the store and does the next thing it needs:
- registering: start it when its start time has come or it is full (with enough players);
  with check-in, those who did not check in are removed first;
- running, no round yet or the last one over (plus its pause): pair the next round, by the
  draw in round 1, by the standings after (its players: those entered by then, less the
  dropped, the withdrawn and the disqualified), and for a final the top of the standings;
  with a pairing notice, write the pairings (announced) and seat them at their start time;
  make its tables (the championship's rules, clocks on), seat each account there itself
  and, last, write the round with its tables' ids in one transaction. Making and seating
  are idempotent (request ids derived from the championship's secret seed, the round and
  the table), so a kill -9 before that write seats the same round at the same tables
  again, and the write's key seats no round twice;
- running, a round in play: count each game whose record is in the store (keyed by its
  table id: counted once; its no-shows dropped with it when the championship drops them),
  and bring its tables here in line with the championship (``enforce``): a withdrawn or
  disqualified player leaves the game they are in, a paused championship's tables are held
  (and released when it resumes), the games still running at the round's time limit end;
- paused: nothing is paired or seated, the time limit waits;
- the last round (or the final) over, or fewer than 3 players left: the final standings
  (FINISHED).

Every node brings the tables it holds in line with their championships at each pass, those it
does not drive too (a table stays on a node that drained or took it over), so a pause, a time
limit or a cancel reaches a table wherever it runs.

A game's end reaches the driver as its record (written with the game's last move), as it
reaches the accounts' ratings (``server.accounts.games.GameIntake``): so a kill -9 between a
game's end and its count loses nothing, the next step counts it.

On a cluster one node drives a championship at a time: ``DriverLease.holds`` says whether
this node is it (one node: always; a cluster: ``StoreLease``, a lease row per championship
in the shared database). The store's keys keep two drivers from seating one round twice or
counting one game twice even if two ever ran at once. The tables of a round are made on the
driving node; when it dies the cluster's takeover moves them as any table, and the next
driver counts their records from the shared store.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import time
from collections.abc import Callable, Iterable
from typing import Protocol

import structlog
from prometheus_client.core import GaugeMetricFamily

from server.bounded import Bounded
from server.championships.format import (
    ChampionshipError,
    GameResult,
    deal_seed,
    seat_final,
    seat_round,
)
from server.championships.model import Championship, Counted, Phase, SeatedTable
from server.championships.store import ChampionshipStore, Refused
from server.championships.tables import TablePort
from server.errors import ServiceError
from server.observability import Metrics, gauges
from server.store.base import GameRecord, StorageError, StoreUnreachable, StoreUnusable
from server.tables.idempotency import seal

log = structlog.get_logger("copas.championships")


class DriverLease(Protocol):
    """Which championships this node drives (a cluster's lease per championship)."""

    async def holds(self, championship_id: str) -> bool: ...


class EveryChampionship:
    """One node drives every championship."""

    async def holds(self, championship_id: str) -> bool:
        return True


class StoreLease:
    """A cluster's: a lease per championship in the shared store, by the database's clock (as
    the nodes' own leases), renewed at each step and taken over by another node ``ttl``
    seconds after its holder stopped renewing it. A draining node holds none: it gives its
    leases up at once, and another node drives its championships from its next step (their
    running tables are handed over with the node's other tables)."""

    def __init__(self, store: ChampionshipStore, node: str, ttl: float,
                 is_draining: Callable[[], bool] = lambda: False) -> None:
        self._store = store
        self._node = node
        self._ttl = ttl
        self._is_draining = is_draining
        self._has_released = False

    async def holds(self, championship_id: str) -> bool:
        if self._is_draining():
            if not self._has_released:
                released = await self._store.release(self._node)
                self._has_released = True
                log.info("championship_leases_released", leases=released)
            return False
        self._has_released = False
        return await self._store.claim(championship_id, self._node, self._ttl)


class Records(Protocol):
    def get_kept_record(self, record_id: str) -> GameRecord | None: ...


SEAT_SCOPE = "championship-seat"  # what a seat's sealed token is sealed for
EXPIRE_AFTER = 7 * 86400.0  # seconds a championship may wait to start (then it is cancelled)
VERSIONS_KEPT = 10_000  # championships whose changes this node counts (the oldest forgotten)
LEFT_KEPT = 10_000  # seats a leave was made for that this node remembers (the oldest forgotten)


def seat_key(championship: Championship, table_id: str, account_id: str) -> str:
    """The request id of an account's join at a table: it also seals its token."""
    return request_id(championship, "seat", table_id, account_id)


def request_id(championship: Championship, *parts: object) -> str:
    """A request id for the tables (secret: it derives from the championship's seed)."""
    text = "/".join(str(p) for p in (championship.id, *parts))
    return "ch_" + hmac.new(championship.spec.seed.encode(), text.encode(),
                            hashlib.sha256).hexdigest()[:40]


def result_of(record: GameRecord, table: SeatedTable, game_name: str = "") -> GameResult:
    """A finished table's game as the championship counts it: the seated players by seat,
    the totals, the leavers in the order they left, the no-shows (no move of their own);
    ``game_name``: the championship's game ("" for the default game)."""
    players = table.players
    summary = record.summary
    leavers = tuple(players[lv.seat] for lv in summary.result.leavers)
    no_shows = tuple(players[s.seat] for s in summary.seats
                     if not s.has_acted and players[s.seat] not in leavers)
    return GameResult(table.round_no, table.table_no, players, tuple(summary.result.totals),
                      leavers, no_shows, game_name)


class Driver:
    def __init__(self, store: ChampionshipStore, tables: TablePort, records: Records,
                 metrics: Metrics, *, lease: DriverLease | None = None,
                 clock: Callable[[], float] = time.time, interval: float = 1.0,
                 expire_after: float = EXPIRE_AFTER) -> None:
        self._store = store
        self._tables = tables
        self._records = records
        self._metrics = metrics
        self._lease = lease if lease is not None else EveryChampionship()
        self._clock = clock
        self._interval = interval
        self._expire_after = expire_after
        self._wake = asyncio.Event()
        self._changes: dict[str, asyncio.Event] = {}  # its watchers wait for a change
        self._versions: dict[str, int] = {}  # changes seen (championships of this process)
        # (table, seat) a withdrawn or disqualified player left (a leave again does nothing)
        self._left: Bounded[tuple[str, int], bool] = Bounded(LEFT_KEPT)
        self._driven: set[str] = set()  # championships this node drove at its last pass
        self._dirty: set[str] = set()  # changed since the last pass: stepped by the next
        self._running = 0

    # ------------------------------------------------------------ watchers

    def changed(self, championship_id: str, *, step: bool = True) -> None:
        """Something changed (here, or on another node: its notification): the watchers look
        again, and (``step``) the driver steps it at once; a change that cannot make it due
        (a registration that does not fill it, an unregistration, a check-in) need not."""
        self._versions[championship_id] = self._versions.get(championship_id, 0) + 1
        if len(self._versions) > VERSIONS_KEPT:  # championships long over: forgotten
            self._versions.pop(next(iter(self._versions)))
        event = self._changes.pop(championship_id, None)
        if event is not None:
            event.set()
        if step:
            self.step_soon(championship_id)

    def step_soon(self, championship_id: str) -> None:
        """The driver's next pass, at once, steps the championship."""
        self._dirty.add(championship_id)
        self._wake.set()

    def changed_all(self) -> None:
        """Any championship may have changed (this node heard nothing for a while)."""
        for championship_id in [*self._versions, *self._changes]:
            self.changed(championship_id)

    def version(self, championship_id: str) -> int:
        """How many changes this node saw of the championship (a watcher's mark)."""
        return self._versions.get(championship_id, 0)

    async def wait_change(self, championship_id: str, seen: int, timeout: float) -> None:
        """Returns once the championship changed after ``seen`` (its ``version``), or after
        ``timeout`` (a change another node made shows then)."""
        if self.version(championship_id) != seen:
            return
        event = self._changes.setdefault(championship_id, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):  # no task per watcher, as wait_for makes
                await event.wait()

    def gauges(self) -> Iterable[GaugeMetricFamily]:
        return gauges(("copas_championships_running", "Championships this node drives that "
                       "are running", self._running))

    # ------------------------------------------------------------ the loop

    async def run(self) -> None:
        """The background task: every championship not over, a step each, every
        ``interval`` seconds or at once when woken."""
        while True:
            self._wake.clear()
            try:
                await self.step_all()
            except Exception as exc:  # the store unreachable: the next pass tries again
                log.warning("championship_driver_failed", error=str(exc)[:200])
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._interval)

    async def step_all(self) -> None:
        """One pass: the championships due a step (running ones, those whose start time came
        and those to expire: ``ChampionshipStore.due``) and those changed since the last
        pass; a championship waiting for registrations costs nothing until one comes."""
        running = 0
        now = self._clock()
        dirty, self._dirty = self._dirty, set()
        due = await self._store.due(now, now - self._expire_after)
        active = [*due, *(c for c in sorted(dirty) if c not in due)]
        here = self._tables.here()
        for championship_id in sorted(set(here) - set(active) | self._driven - set(active)):
            await self._enforce_here(championship_id)  # over, or cancelled meanwhile
        self._driven &= set(active)
        for championship_id in active:
            if not await self._lease.holds(championship_id):
                if championship_id in here:
                    await self._enforce_here(championship_id)  # another node drives it
                continue
            self._driven.add(championship_id)
            try:
                phase = await self.step(championship_id)
            except (StoreUnreachable, StoreUnusable):
                raise
            except Exception as exc:  # one championship's trouble stops no other
                log.error("championship_step_failed", championship_id=championship_id,
                          error=str(exc)[:200])
                continue
            running += phase is Phase.RUNNING
        self._running = running

    async def _enforce_here(self, championship_id: str) -> None:
        """A championship with tables here that this node does not drive (or drove, and it
        ended): its tables here follow it (``enforce``)."""
        championship = await self._store.load(championship_id)
        if championship is not None:
            await self.enforce(championship)

    async def enforce(self, championship: Championship) -> None:
        """The current round's tables still playing on this node follow the championship: a
        cancelled one's end CLOSED; a paused one's are held, else released; past the round's
        time limit they end (TIME_LIMIT); a withdrawn or disqualified player leaves the game
        they are in. A table elsewhere is left to its node (each node does this for its own)."""
        round_no = championship.seated_round
        counted = championship.counted_ids()
        playing = [t for t in championship.tables_of(round_no) if t.table_id not in counted]
        if not playing:
            return
        if championship.phase is Phase.CANCELLED:
            for table in playing:
                self._tables.close(table.table_id)  # not here, or over: nothing to do
            await self._tables.committed()
            return
        if championship.phase is not Phase.RUNNING:
            return
        is_paused = championship.paused is not None
        limit = championship.time_limits.get(round_no)
        is_late = limit is not None and not is_paused and self._clock() >= limit
        leaving = {r.account_id for r in championship.registrations
                   if r.withdrawn is not None or r.disqualified is not None}
        for table in playing:
            if is_late:
                self._tables.time_up(table.table_id)  # over already, or elsewhere: nothing
                continue
            self._tables.hold(table.table_id, is_paused)
            for seat, account_id in enumerate(table.players):
                if account_id in leaving:
                    self._leave(table.table_id, seat)
        await self._tables.committed()

    async def step_if_held(self, championship_id: str) -> None:
        """A step now, when this node drives the championship (else its driver's next step
        does it)."""
        if await self._lease.holds(championship_id):
            await self.step(championship_id)
        self._wake.set()

    async def step(self, championship_id: str) -> Phase | None:
        """The next thing one championship needs; its phase after it."""
        championship = await self._store.load(championship_id)
        if championship is None:
            return None
        if championship.phase.is_over:
            await self.enforce(championship)  # cancelled meanwhile: its tables here end
            return None
        if championship.phase is Phase.REGISTERING:
            if self._is_expired(championship):
                if await self._store.end(championship.id, Phase.CANCELLED, self._clock()):
                    log.info("championship_expired", championship_id=championship.id)
                    self.changed(championship.id)
                return Phase.CANCELLED
            if not self._is_due(championship):
                return championship.phase
            if championship.spec.check_in_opens is not None \
                    and await self._store.close_check_in(championship.id):
                self.changed(championship.id)  # who did not check in is removed
            try:
                await self._store.start(championship.id, self._clock(),
                                        championship.spec.min_players)
            except Refused:
                return championship.phase  # not enough players yet: it waits for them
            log.info("championship_started", championship_id=championship.id,
                     players=len(championship.registrations))
            self.changed(championship.id)
            championship = await self._store.load(championship_id)
            assert championship is not None
        spec = championship.spec
        round_no = championship.seated_round
        if round_no:
            if await self._follow(championship, round_no):
                self.changed(championship.id)
                championship = await self._store.load(championship_id)
                assert championship is not None
            await self.enforce(championship)
            if not championship.is_round_over(round_no):
                return championship.phase
        if championship.paused is not None:
            return championship.phase  # nothing is paired or seated while paused
        announced = championship.announced.get(championship.current_round)
        if announced is not None:
            if self._clock() >= announced.starts:
                await self._seat(championship, announced.round_no,
                                 [list(t) for t in announced.tables])
            return championship.phase
        if round_no and (round_no == spec.final_round or
                         (round_no >= spec.rounds and not spec.final_round)):
            return await self._finish(championship)
        seating = self._pair(championship, round_no + 1)
        if seating is None:
            return await self._finish(championship)
        if round_no:
            last = max(c.counted for c in championship.counted
                       if c.result.round_no == round_no)
            if self._clock() < last + max(0.0, spec.round_pause - spec.pairing_notice):
                return championship.phase
        if spec.pairing_notice:
            now = self._clock()
            if await self._store.announce(championship.id, round_no + 1, now,
                                          now + spec.pairing_notice,
                                          [tuple(t) for t in seating]):
                log.info("championship_round_announced", championship_id=championship.id,
                         round=round_no + 1, tables=len(seating))
                self.changed(championship.id)
            return championship.phase
        await self._seat(championship, round_no + 1, seating)
        return championship.phase

    async def _finish(self, championship: Championship) -> Phase:
        if await self._store.end(championship.id, Phase.FINISHED, self._clock()):
            log.info("championship_finished", championship_id=championship.id,
                     rounds=championship.seated_round)
            self.changed(championship.id)
        return Phase.FINISHED

    def _pair(self, championship: Championship, round_no: int) -> list[list[str]] | None:
        """The accounts at each table of ``round_no``, in seat order (largest tables
        first): a round of the players who play it (None with fewer than 3: the
        championship ends), or the final of the top of the standings (None when too few
        may play it)."""
        spec = championship.spec
        now = self._clock()
        tally = championship.tally()
        accounts = championship.accounts_by_player_id()
        try:
            if round_no > spec.rounds:
                playing = set(championship.plays(round_no, now))
                passed = {championship.player_id(r.account_id)
                          for r in championship.registrations if r.account_id not in playing}
                return [[accounts[p] for p in seat_final(spec.rules, tally.standings(),
                                                         spec.seed, passed_over=passed)]]
            players = championship.plays(round_no, now)
            if len(players) < 3:
                log.info("championship_too_few_players", championship_id=championship.id,
                         round=round_no, players=len(players))
                return None
            return [[accounts[p] for p in table] for table in seat_round(
                [championship.player_id(a) for a in players],
                tally.standings() if tally.results else [], tally.met_pairs(), spec.seed,
                round_no, game=spec.game_name)]
        except ChampionshipError as exc:  # a final with too few players to seat it
            log.info("championship_no_final", championship_id=championship.id,
                     error=str(exc))
            return None

    def _is_expired(self, championship: Championship) -> bool:
        """Registering for longer than ``expire_after`` (past its start time, when it has
        one): nobody came, or not enough, and it will not start."""
        spec = championship.spec
        since = spec.start_at if spec.start_at is not None else spec.created
        return self._clock() - since > self._expire_after

    def _is_due(self, championship: Championship) -> bool:
        spec = championship.spec
        count = len(championship.registrations)
        return (spec.start_at is not None and self._clock() >= spec.start_at) or \
            (spec.start_when_full and count >= spec.max_players)

    async def _seat(self, championship: Championship, round_no: int,
                    seating: list[list[str]]) -> None:
        """Seats ``round_no`` (``seating``: the accounts by table and seat): its tables made
        and their seats taken (idempotently), then the round written with its tables' ids at
        once."""
        began = time.perf_counter()
        spec = championship.spec
        names = {r.account_id: r.display_name for r in championship.registrations}
        withdrawn = {r.account_id for r in championship.registrations
                     if r.withdrawn is not None or r.disqualified is not None}
        label = "final" if round_no == spec.final_round else f"r{round_no}"
        tables = []
        try:
            for number, members in enumerate(seating, start=1):
                size = len(members)
                table_id = self._tables.create(
                    request_id=request_id(championship, "table", round_no, number),
                    name=f"{spec.name} {label} t{number}"[:60], preset=spec.preset,
                    rules=spec.rules.table_rules(size),
                    seed=deal_seed(spec.rules, spec.seed, round_no, number, size),
                    championship=championship.id, is_duplicate=spec.duplicate_deals,
                    game=spec.game_name)
                sealed = []
                for seat, account_id in enumerate(members):
                    key = seat_key(championship, table_id, account_id)
                    token = self._tables.join(table_id, seat, names[account_id], account_id,
                                              key)
                    sealed.append(seal(token, SEAT_SCOPE, key))
                for seat, account_id in enumerate(members):
                    if account_id in withdrawn:
                        self._leave(table_id, seat)
                tables.append(SeatedTable(round_no, number, table_id, tuple(members),
                                          tuple(sealed)))
            await self._tables.committed()
        except (ServiceError, StorageError) as exc:  # a full server: the next step retries
            log.warning("championship_round_not_seated", championship_id=championship.id,
                        round=round_no, error=str(exc)[:200])
            return
        now = self._clock()
        limit = now + spec.round_time_limit if spec.round_time_limit else None
        if await self._store.seat_round(championship.id, round_no, now, tables, limit):
            self._metrics.championship_rounds.inc()
            self._metrics.championship_seating.observe(time.perf_counter() - began)
            log.info("championship_round_seated", championship_id=championship.id,
                     round=round_no, tables=len(tables),
                     players=sum(len(t.players) for t in tables))
            self.changed(championship.id)

    def _leave(self, table_id: str, seat: int) -> None:
        if (table_id, seat) in self._left:
            return
        with contextlib.suppress(ServiceError):  # over, or the table is on another node
            self._tables.leave(table_id, seat)
        self._left[table_id, seat] = True

    async def _follow(self, championship: Championship, round_no: int) -> bool:
        """Counts the round's games whose records are in (their no-shows dropped with them,
        when the championship drops them). Whether anything was counted."""
        counted = championship.counted_ids()
        drops = championship.spec.drop_absent and round_no <= championship.spec.rounds
        is_new = False
        for table in championship.tables_of(round_no):
            if table.table_id in counted:
                continue
            record = await asyncio.to_thread(self._records.get_kept_record, table.table_id)
            if record is None:
                continue
            result = result_of(record, table, championship.spec.game_name)
            if await self._store.count(championship.id, Counted(
                    table.table_id, result, self._clock(), record.summary.result.end_reason),
                    drop_from=round_no + 1 if drops and result.no_shows else 0):
                is_new = True
                log.info("championship_game_counted", championship_id=championship.id,
                         round=round_no, table=table.table_no, table_id=table.table_id)
        return is_new
