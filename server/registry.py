"""The registry: every table of the server, the player tokens, and the limits that keep what
clients can make the server hold bounded and given back.

- ``--max-tables`` counts tables not yet finished; finished ones stay ``--finished-table-ttl``
  seconds for late watchers (and at most ``--max-tables`` of them), then go.
- A waiting table with no person connected expires after ``--waiting-table-ttl`` seconds.
- ``--max-players`` counts the people seated in games not finished; a seat given up, or left
  in a running game, frees its slot.
- At most ``--max-bot-tables`` tables without a person play at once, at ``--bot-table-pace``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import hashlib
import itertools
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import structlog
from copas.v1 import copas_pb2

from engine import Rules, RulesError
from server import inputs
from server.bots import POLICIES as BOT_POLICIES
from server.bots import Thinker
from server.clock import LoopScheduler, Scheduler
from server.config import Config
from server.errors import ServiceError, from_engine
from server.idempotency import Remembered, check_reuse, request_key
from server.lobby import SNAPSHOT_MAX, Lobby, LobbyFilter, lobby_key
from server.observability import Metrics
from server.storage import Storage, StorageFailed
from server.table import JOIN_SCOPE, Table

if TYPE_CHECKING:
    from server.cluster import Cluster

log = structlog.get_logger("copas.registry")

LOBBY_POLL_SECONDS = 1.0  # a cluster's lobby watchers read the database this often
LOBBY_READS = 256  # lobby filters whose latest read is kept
CREATE_MEMORY = 10_000  # CreateTable request_ids remembered
ANY_TABLE = LobbyFilter()


def _page_size(requested: int) -> int:
    """A page size from a request: 0 means 20, at most 100."""
    if requested < 0:
        raise ServiceError.invalid("page_size must not be negative", "INVALID_PAGE_SIZE")
    return min(requested or 20, 100)


def _make_page_token(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


def _read_page_token(token: str, parse: Callable[[str], Any]) -> Any:
    """What a page token holds, read by ``parse``; INVALID_ARGUMENT when it is not a token
    this server gave."""
    inputs.check_length("page_token", token, inputs.PAGE_TOKEN_MAX, "INVALID_PAGE_TOKEN")
    try:
        return parse(base64.urlsafe_b64decode(token.encode()).decode())
    except ValueError:  # bad base64, bad UTF-8 and a bad number are all ValueErrors
        raise ServiceError.invalid("page_token is not one this server gave",
                                   "INVALID_PAGE_TOKEN") from None


def _record_position(text: str) -> tuple[float, str]:
    finished, _, record_id = text.partition("|")
    return float(finished), record_id


class TableManager:
    """Every table of the server, the player tokens, and the limits."""

    def __init__(self, config: Config, metrics: Metrics, storage: Storage | None = None,
                 scheduler: Scheduler | None = None) -> None:
        self.config = config
        self.metrics = metrics
        self.storage = storage if storage is not None else Storage()
        self.scheduler: Scheduler = scheduler if scheduler is not None else LoopScheduler()
        self.tables: dict[str, Table] = {}  # in creation order
        self.tokens: dict[str, tuple[str, int]] = {}  # token hash -> (table_id, seat)
        self.quarantined: dict[str, str] = {}  # table_id -> why its log did not replay
        self._create_requests: OrderedDict[str, Remembered] = OrderedDict()
        self._order = itertools.count(1)
        self.is_accepting = True
        self.seated = 0  # people holding a --max-players slot
        self.open_tables = 0  # tables not finished
        self.bot_tables = 0  # tables without a person, not finished
        self._finished: OrderedDict[str, None] = OrderedDict()  # finished tables, oldest first
        self._release_handles: dict[str, Any] = {}
        self._undelivered: dict[Table, int] = {}
        self._delivery: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self.join_index: dict[str, str] = {}  # JoinTable request key -> table_id
        # Seats given up before their game: the token's LeaveTable answer (request id,
        # sequence), and the JoinTable keys that took them; both bounded.
        self.revoked: OrderedDict[str, tuple[str, int]] = OrderedDict()
        self.spent_joins: OrderedDict[str, None] = OrderedDict()
        self.lobby = Lobby(config.watcher_queue)
        self.bots: Thinker | None = None  # set by the server when bots think in workers
        self.cluster: Cluster | None = None  # set when nodes share a PostgreSQL
        self._lobby_reads: OrderedDict[tuple[Any, ...], tuple[
            float, asyncio.Future[list[copas_pb2.TableSummary]]]] = OrderedDict()

    @staticmethod
    def hash_token(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    # ------------------------------------------------------------ limits

    def check_writable(self) -> None:
        if self.storage.failure is not None:
            raise ServiceError.unavailable(
                "the server's store failed; it is restarting from its log, retry shortly",
                "STORAGE_FAILED")

    def check_room_for_player(self) -> None:
        if self.seated >= self.config.max_players:
            raise ServiceError.exhausted("the server has no room for another player",
                                         "SERVER_FULL")

    def take_slot(self) -> None:
        self.seated += 1

    def give_slot(self) -> None:
        self.seated -= 1

    def register_token(self, token_hash: str, table_id: str, seat: int) -> None:
        self.tokens[token_hash] = (table_id, seat)
        self.storage.register_token(token_hash, table_id, seat)  # for a cluster's other nodes

    def forget_token(self, token_hash: str) -> None:
        found = self.tokens.pop(token_hash, None)
        if found is not None:
            self.storage.forget_token(token_hash, found[0])

    def players_seated(self) -> int:
        return self.seated

    def index_join(self, key: str, table_id: str) -> None:
        self.join_index[key] = table_id

    def seat_given_up(self, token_hash: str, join_key: str, request_id: str,
                      sequence: int) -> None:
        """Remember a given-up seat's LeaveTable answer and spent JoinTable request."""
        self.revoked[token_hash] = (request_id, sequence)
        if join_key:
            self.spent_joins[join_key] = None
        for memory in (self.revoked, self.spent_joins):
            while len(memory) > CREATE_MEMORY:
                memory.popitem(last=False)

    def first_answer_of_revoked(self, token_hash: str, request_id: str) -> int | None:
        known = self.revoked.get(token_hash)
        return known[1] if known is not None and known[0] == request_id else None

    def forget_join(self, key: str) -> None:
        self.join_index.pop(key, None)

    # ------------------------------------------------------------ tables

    def create(self, *, preset: str, overrides: dict[str, Any], bot_seats: int, name: str,
               seed: str | None, request_id: str = "", fingerprint: str = "",
               bot_policy: str = "") -> Table:
        """A new table (or, for a retried request_id, the table it created)."""
        if self.cluster is not None:  # a node without its lease makes no tables
            self.cluster.check_lease()
        key = request_key("create", request_id) if request_id else ""
        if key:
            known = check_reuse(self._create_requests.get(key), fingerprint)
            if known is not None:
                return self.get(str(known.answer))
        if not self.is_accepting:
            raise ServiceError.unavailable("the server is shutting down; no new tables")
        self.check_writable()
        if self.open_tables >= self.config.max_tables:
            raise ServiceError.exhausted("the server has no room for another table",
                                         "SERVER_FULL")
        preset = preset or "online"
        try:
            rules = Rules.preset(preset, **{**self.config.rule_defaults, **overrides})
        except RulesError as error:
            raise from_engine(error) from None
        if rules.point_limit > self.config.max_point_limit:
            raise ServiceError.invalid(
                f"point_limit is at most {self.config.max_point_limit} on this server",
                "INVALID_RULES")
        for limit in ("play_timeout", "pass_timeout", "moon_timeout"):
            value = getattr(rules, limit)
            if 0 < value < self.config.min_timeout:
                raise ServiceError.invalid(
                    f"{limit}_seconds is 0 (no limit) or at least {self.config.min_timeout:g} on "
                    "this server", "INVALID_RULES")
        if rules.max_hands > self.config.max_hands_limit:
            raise ServiceError.invalid(
                f"max_hands is at most {self.config.max_hands_limit} on this server",
                "INVALID_RULES")
        if not 0 <= bot_seats <= rules.players:
            raise ServiceError.invalid(f"bot_seats must be 0..{rules.players}",
                                       "INVALID_BOT_SEATS")
        is_bot_table = bot_seats == rules.players
        if is_bot_table and self.bot_tables >= self.config.max_bot_tables:
            raise ServiceError.exhausted(
                f"at most {self.config.max_bot_tables} tables of bots only play at once",
                "TOO_MANY_BOT_TABLES")
        bot_policy = bot_policy or self.config.bot_policy
        if bot_policy not in BOT_POLICIES:
            raise ServiceError.invalid(
                f"bot_policy must be one of {', '.join(BOT_POLICIES)}", "INVALID_BOT_POLICY")
        if seed is not None and not self.config.allow_seed:
            raise ServiceError.denied("this server does not accept explicit seeds "
                                      "(start it with --allow-seed)", "SEED_NOT_ALLOWED")
        table_id = "t_" + secrets.token_urlsafe(9)
        table = Table(self, table_id=table_id, name=name or table_id, preset=preset,
                      rules=rules, seed=seed if seed is not None else secrets.randbits(64),
                      bot_seats=bot_seats, order=next(self._order),
                      created=self.scheduler.now(), request_key=key, fingerprint=fingerprint,
                      bot_policy=bot_policy)
        self._adopt(table)
        self.lobby.table_changed(table)
        if key:
            self._remember_create(key, fingerprint, table_id)
        self.storage.create_table(table_id, table.created, table.meta())
        if self.cluster is not None:
            self._share_summary(table)
        table.log.debug("table_created", preset=preset, players=rules.players, bots=bot_seats)
        if is_bot_table:
            table.start()
            table._end_step()
        else:
            table._arm_watchdog()
        self._kick()
        return table

    def note_order(self, order: int) -> None:
        """Tables made from now on list after ``order`` (a recovered table's)."""
        following = next(self._order)
        self._order = itertools.count(max(following, order + 1))

    def _remember_create(self, key: str, fingerprint: str, table_id: str) -> None:
        self._create_requests[key] = Remembered(fingerprint, table_id)
        while len(self._create_requests) > CREATE_MEMORY:
            self._create_requests.popitem(last=False)

    def _adopt(self, table: Table) -> None:
        self.tables[table.id] = table
        if table.is_finished:
            self._finished[table.id] = None
            return
        self.open_tables += 1
        if not table.has_people:
            self.bot_tables += 1

    def get(self, table_id: str) -> Table:
        if not table_id:
            raise ServiceError.invalid("table_id is required", "MISSING_TABLE_ID")
        inputs.check_length("table_id", table_id, inputs.ID_MAX)
        table = self.tables.get(table_id)
        if table is None:
            if table_id in self.quarantined:
                raise ServiceError.unavailable(
                    f"table {table_id} could not be recovered after a restart; the operators "
                    "have been told and it is retried at the next start", "TABLE_QUARANTINED")
            raise ServiceError.not_found(f"no table {inputs.quote(table_id)}")
        return table

    def page(self, page_size: int, page_token: str, lobby_filter: LobbyFilter = ANY_TABLE
             ) -> tuple[list[Table], str]:
        size = _page_size(page_size)
        before = _read_page_token(page_token, int) if page_token else None
        page: list[Table] = []
        more = False
        for table in reversed(self.tables.values()):  # newest first
            if before is not None and table.order >= before:
                continue
            if not lobby_filter.matches(table):
                continue
            if len(page) == size:
                more = True
                break
            page.append(table)
        return page, _make_page_token(str(page[-1].order)) if more else ""

    async def cluster_summaries(self, wanted: LobbyFilter, limit: int = SNAPSHOT_MAX,
                                before: float | None = None) -> list[copas_pb2.TableSummary]:
        """Tables of every node matching ``wanted``, newest first (from the database)."""
        preset = wanted.preset.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        pattern = (f"{'joinable' if wanted.only_joinable else '%'}:{preset or '%'}:"
                   f"{wanted.players or '%'}")
        await self.storage.sync()  # this node's latest summaries first
        rows = await asyncio.to_thread(
            self.storage.summaries, pattern,  # type: ignore[attr-defined]
            wanted.include_finished, limit, before)
        return [copas_pb2.TableSummary.FromString(data) for _, data in rows]

    async def cluster_lobby(self, wanted: LobbyFilter) -> list[copas_pb2.TableSummary]:
        """``cluster_summaries`` for lobby watchers: one database read per filter and second,
        however many watch."""
        key = (wanted.only_joinable, wanted.preset, wanted.players, wanted.include_finished)
        now = time.monotonic()
        hit = self._lobby_reads.get(key)
        if hit is None or now - hit[0] >= LOBBY_POLL_SECONDS * 0.9 or \
                (hit[1].done() and hit[1].exception() is not None):
            hit = (now, asyncio.ensure_future(self.cluster_summaries(wanted)))
            self._lobby_reads[key] = hit
            self._lobby_reads.move_to_end(key)
            while len(self._lobby_reads) > LOBBY_READS:
                self._lobby_reads.popitem(last=False)
        return await asyncio.shield(hit[1])

    async def cluster_page(self, page_size: int, page_token: str, wanted: LobbyFilter
                           ) -> tuple[list[copas_pb2.TableSummary], str]:
        size = _page_size(page_size)
        before = _read_page_token(page_token, float) if page_token else None
        found = await self.cluster_summaries(wanted, size + 1, before)
        more = len(found) > size
        page = found[:size]
        created = page[-1].create_time.ToNanoseconds() / 1e9 if page else 0.0
        return page, _make_page_token(repr(created)) if more else ""

    def join(self, table_id: str, name: str, seat: int | None, request_id: str = "",
             fingerprint: str = "", *, preset: str = "", players: int | None = None
             ) -> tuple[Table, int, str]:
        """Seat a person at ``table_id``, or (quick match, ``preset`` instead) at the oldest
        waiting table of that kind with a free seat, or at a new one."""
        name = inputs.display_name(name, inputs.PLAYER_NAME_MAX, required=True)
        if request_id:
            if request_key(JOIN_SCOPE, request_id) in self.spent_joins:
                raise ServiceError.precondition(
                    "the seat this request_id took was given up: join again with a new "
                    "request_id", "JOIN_GIVEN_UP")
            known = self.join_index.get(request_key(JOIN_SCOPE, request_id))
            if known is not None and known in self.tables:  # a retry: the same table
                table = self.tables[known]
                seat_number, token = table.join(name, seat, request_id, fingerprint)
                return table, seat_number, token
        table = self.get(table_id) if table_id or not preset else self._open_table(preset, players)
        seat_number, token = table.join(name, seat, request_id, fingerprint)
        return table, seat_number, token

    def _open_table(self, preset: str, players: int | None) -> Table:
        """Quick match: the oldest waiting table of this kind with a free seat, or a new one."""
        inputs.check_length("preset", preset, inputs.PRESET_MAX, "INVALID_RULES")
        wanted = LobbyFilter(only_joinable=True, preset=preset, players=players or 4)
        for table in self.tables.values():  # oldest first
            if table.has_people and wanted.matches(table):
                return table
        overrides = {"players": players} if players is not None else {}
        return self.create(preset=preset, overrides=overrides, bot_seats=0, name="", seed=None)

    def authenticate(self, token_hash: str | None, table_id: str) -> tuple[Table, int]:
        """The table and seat a token belongs to."""
        if token_hash is None:
            raise ServiceError.unauthenticated(
                "missing player token: send metadata 'authorization: Bearer <token>'")
        entry = self.tokens.get(token_hash)
        if entry is None:
            if token_hash in self.revoked:
                raise ServiceError.unauthenticated(
                    "you gave up this seat: your player token is no longer valid",
                    "TOKEN_REVOKED")
            raise ServiceError.unauthenticated("unknown player token")
        if table_id and entry[0] != table_id:
            self.get(table_id)  # NOT_FOUND for an unknown table
            raise ServiceError.denied("this token belongs to another table")
        return self.get(entry[0]), entry[1]

    def seat_for_watch(self, token_hash: str | None, table_id: str) -> tuple[Table, int | None]:
        if token_hash is None:
            return self.get(table_id), None
        return self.authenticate(token_hash, table_id)

    def live(self) -> Iterator[Table]:
        return iter(self.tables.values())

    # ------------------------------------------------------------ the end of tables

    def table_finished(self, table: Table) -> None:
        """A game ended: the table no longer counts as open; it goes after the ttl (or
        sooner when more than --max-tables finished tables wait)."""
        self.open_tables -= 1
        if not table.has_people:
            self.bot_tables -= 1
        self._finished[table.id] = None
        self._schedule_release(table, self.config.finished_table_ttl)
        while len(self._finished) > self.config.max_tables:
            oldest = next(iter(self._finished))
            self.release(oldest)

    def _schedule_release(self, table: Table, delay: float) -> None:
        handle = self.scheduler.call_later(delay, lambda: self.release(table.id))
        self._release_handles[table.id] = handle

    def expire(self, table: Table) -> None:
        """A waiting table nobody is at: it goes, its seats' tokens with it."""
        table.log.info("table_expired")
        self.release(table.id, ServiceError.not_found(
            "this table expired: nobody was at it", "TABLE_EXPIRED"))

    def release(self, table_id: str, error: ServiceError | None = None) -> None:
        """Forget a table: its tokens stop working, its streams end, its log goes."""
        table = self._let_go(table_id, error, is_ours=True)
        if table is not None:
            self.storage.release_table(table.id)
            self._kick()
            table.log.debug("table_released")

    def drop(self, table_id: str, error: ServiceError) -> None:
        """Forget a table this node lost to another (nothing is written: it is not ours)."""
        table = self._let_go(table_id, error, is_ours=False)
        if table is not None:
            self._undelivered.pop(table, None)
            table.log.warning("table_dropped")

    def _let_go(self, table_id: str, error: ServiceError | None, *, is_ours: bool
                ) -> Table | None:
        """The table leaves this server's memory: counts, seats, tokens, timers, streams,
        the lobby. ``is_ours``: its tokens are given up in the store too."""
        table = self.tables.pop(table_id, None)
        handle = self._release_handles.pop(table_id, None)
        if handle is not None:
            handle.cancel()
        if table is None:
            return None
        if table.id in self._finished:
            del self._finished[table.id]
        else:
            self.open_tables -= 1
            if not table.has_people:
                self.bot_tables -= 1
        for seat in table.seats:
            if seat.token_hash:
                if is_ours:
                    self.forget_token(seat.token_hash)
                else:
                    self.tokens.pop(seat.token_hash, None)
            if seat.holds_slot:
                seat.holds_slot = False
                self.give_slot()
        table.release(error)
        self.lobby.table_changed(table)
        for seat in table.seats:
            if seat.join_key:
                self.forget_join(seat.join_key)
        if table.request_key:
            self._create_requests.pop(table.request_key, None)
        return table

    def close_all(self) -> None:
        if self._delivery is not None:
            self._delivery.cancel()
        self.lobby.close_all()
        for handle in self._release_handles.values():
            handle.cancel()
        for table in self.tables.values():
            table.release()

    # ------------------------------------------------------------ durability

    def table_changed(self, table: Table) -> None:
        """Show a table's new events to its watchers once they are on disk; commit what
        the server did by itself (bots, timers) without waiting for a request."""
        if table.is_released:
            return
        self.storage.note_sequence(table.id, table.sequence)
        self._undelivered[table] = table.sequence
        self.lobby.table_changed(table)
        if self.cluster is not None:
            self._share_summary(table)
        self._kick()

    def _share_summary(self, table: Table) -> None:
        """Keep the table's summary in the shared database (every node's lobby)."""
        key = lobby_key(table)
        if table.shared_lobby_key == key:
            return
        table.shared_lobby_key = key
        where = ("joinable" if table.is_waiting and table.has_free_seat()
                 else "finished" if table.is_finished else "playing")
        self.storage.update_summary(  # type: ignore[attr-defined]
            table.id, table.summary().SerializeToString(),
            f"{where}:{table.preset}:{table.rules.players}")

    def _kick(self) -> None:
        """Wake the delivery task (one for the server's life, started on first use)."""
        if self._delivery is None:
            with contextlib.suppress(RuntimeError):  # no loop: the next sync commits it
                self._delivery = asyncio.get_running_loop().create_task(
                    self._deliver_loop(), context=contextvars.Context())
        self._wake.set()

    async def _deliver_loop(self) -> None:
        try:
            while True:
                if not (self._undelivered or self.storage.has_pending
                        or self.lobby.has_staged):
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                marks, self._undelivered = self._undelivered, {}
                staged = self.lobby.take_staged()
                try:
                    await self.storage.sync()
                except StorageFailed:
                    return  # fail-stop: nothing more is shown; the server is stopping
                for table, upto in marks.items():
                    if not table.is_released:
                        table.fanout.deliver(upto, self.metrics.snapshots_for_slow.inc)
                self.lobby.deliver(staged)
        finally:
            self._delivery = None

    # ------------------------------------------------------------ records

    def record(self, record_id: str) -> bytes:
        if not record_id:
            raise ServiceError.invalid("record_id is required", "MISSING_RECORD_ID")
        inputs.check_length("record_id", record_id, inputs.ID_MAX)
        found = self.storage.get_record(record_id)
        if found is None:
            raise ServiceError.not_found(f"no game record {inputs.quote(record_id)}",
                                         "RECORD_NOT_FOUND")
        return found

    def record_page(self, page_size: int, page_token: str
                    ) -> tuple[list[dict[str, Any]], str]:
        size = _page_size(page_size)
        before = _read_page_token(page_token, _record_position) if page_token else None
        rows = self.storage.list_records(size + 1, before)
        token = ""
        if len(rows) > size:
            rows = rows[:size]
            token = _make_page_token(f"{rows[-1][0]!r}|{rows[-1][1]}")
        return [summary for _, _, summary in rows], token

    def prune_records(self) -> int:
        removed = self.storage.prune_records(self.config.keep_records,
                                             self.config.keep_records_days * 86400,
                                             self.scheduler.now())
        if removed:
            log.info("records_pruned", removed=removed)
        return removed
