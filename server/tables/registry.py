"""The registry of one node's tables: making them, finding them, seating people at them
(also by quick match), whose token opens which seat, and letting tables go. It is each
table's ``TableHost``: the end of each table's step goes to its listeners, registered here at
construction (the lobby, the ownership port, the delivery). It keeps what clients can make the
server hold bounded and given back:

- ``--max-tables`` counts tables not yet finished; finished ones stay ``--finished-table-ttl``
  seconds for late watchers (and at most ``--max-tables`` of them), then go.
- A waiting table with no person connected expires after ``--waiting-table-ttl`` seconds.
- ``--max-players`` counts the people seated in games not finished; a seat given up, or left
  in a running game, frees its slot.
- At most ``--max-bot-tables`` tables without a person play at once, at ``--bot-table-pace``.
"""

from __future__ import annotations

import itertools
import secrets
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator

import structlog
from copas.v1 import copas_pb2
from prometheus_client.core import GaugeMetricFamily

from server import games
from server.bounded import Bounded
from server.config import RegistrySettings, TableSettings
from server.errors import ServiceError, quote
from server.games import GameModule, GameRules, RuleOverrides
from server.observability import Metrics, gauges
from server.store.base import Storage, TableMeta
from server.tables import views
from server.tables.bots import Thinker
from server.tables.clock import Handle, Scheduler
from server.tables.creation import check_new_table, game_module
from server.tables.delivery import Delivery
from server.tables.idempotency import Remembered, check_reuse, request_key
from server.tables.lobby import Lobby, LobbyFilter
from server.tables.ownership import OwnershipPort
from server.tables.quick_fill import QuickFill
from server.tables.seating import Seating
from server.tables.table import JOIN_SCOPE, Table

log = structlog.get_logger("copas.registry")

QUICK_MATCH_NAME = "Quick match"  # a quick match's table (a name, not its raw id)
CREATE_MEMORY = 10_000  # CreateTable request_ids remembered


def _quick_overrides(players: int | None, partnerships: bool | None) -> RuleOverrides:
    """The rule options a quick match asks for: its player count, and whether partners play
    together (a game with partnerships: its module refuses the option otherwise)."""
    overrides: dict[str, int | bool] = {}
    if players is not None:
        overrides["players"] = players
    if partnerships is not None:
        overrides["partnerships"] = partnerships
    return overrides


class TableRegistry:
    """Every table this node holds, the player tokens, and the limits."""

    def __init__(self, settings: RegistrySettings, table_settings: TableSettings,
                 metrics: Metrics, store: Storage, scheduler: Scheduler,
                 ownership: OwnershipPort, thinker: Thinker | None = None) -> None:
        self.settings = settings
        self.table_settings = table_settings
        self.metrics = metrics
        self.store = store
        self.scheduler = scheduler
        self._ownership = ownership
        self._thinker = thinker
        self._tables: dict[str, Table] = {}  # in creation order
        self.seating = Seating()
        self.quarantined: dict[str, str] = {}  # table_id -> why its log did not replay
        self._create_requests: Bounded[str, Remembered] = Bounded(CREATE_MEMORY)
        # A finished table -> its rematch (``TableMeta.rematch_of`` of a table held here),
        # as long as the finished table is held: one entry per table at most.
        self.rematch_tables: dict[str, str] = {}
        self._order = itertools.count(1)
        self.is_accepting = True
        self._is_draining = False  # an operator's Drain: no new tables, seats or takeovers
        self.seated = 0  # people holding a --max-players slot
        self.open_tables = 0  # tables not finished
        self.bot_tables = 0  # tables without a person, not finished
        self._finished: OrderedDict[str, None] = OrderedDict()  # finished tables, oldest first
        self._release_handles: dict[str, Handle] = {}
        self.quick_fill = QuickFill(scheduler, settings.quick_match_bots_after, self.holds)
        self._created_by: dict[str, str] = {}  # unfinished table -> the address that made it
        self._tables_of: dict[str, int] = {}  # address -> its unfinished tables here
        # The lobby waits for the delivery's barrier, which shows the lobby's changes.
        self.lobby = Lobby(settings.watcher_queue, self._tables.values,
                           lambda: self.delivery.committed())
        self.delivery = Delivery(store, self.lobby, metrics, ownership, self.drop)
        # Told of each table made, changed (a step ended) or gone, in this order.
        self._listeners: tuple[Callable[[Table], None], ...] = (
            self.lobby.track, ownership.share_summary, self.delivery.step_ended)

    @property
    def is_draining(self) -> bool:
        """An operator drained this node: it takes no new tables or seats, and (in a
        cluster) claims none of the others' tables. The one flag every part reads."""
        return self._is_draining

    def set_draining(self, is_draining: bool) -> None:
        self._is_draining = is_draining

    # ------------------------------------------------------------ TableHost

    @property
    def is_stopping(self) -> bool:
        return not self.is_accepting

    def check_room_for_player(self) -> None:
        if self.seated >= self.settings.max_players:
            raise ServiceError.exhausted("the server has no room for another player",
                                         "SERVER_FULL")

    def slot_taken(self) -> None:
        self.seated += 1

    def slot_freed(self) -> None:
        self.seated -= 1

    def token_issued(self, token_hash: str, table_id: str, seat: int, join_key: str) -> None:
        if not token_hash:  # a bot took a rematch's unclaimed seat: no token
            return
        self.seating.seated(token_hash, table_id, seat, join_key)
        self._ownership.token_issued(token_hash, table_id, seat, join_key)

    def seat_given_up(self, token_hash: str, table_id: str, join_key: str, request_id: str,
                      sequence: int) -> None:
        self.seating.given_up(token_hash, join_key, request_id, sequence)
        self._ownership.token_revoked(token_hash, table_id)

    def reservation_expired(self, token_hash: str, table_id: str, join_key: str) -> None:
        self.seating.expired(token_hash, join_key)
        self._ownership.token_revoked(token_hash, table_id)

    def token_removed(self, token_hash: str, table_id: str, join_key: str) -> None:
        self.seating.removed(token_hash, join_key)
        self._ownership.token_revoked(token_hash, table_id)

    def table_changed(self, table: Table) -> None:
        """A step of a table ended: its listeners hear of it (the delivery shows its events
        once they are on disk, and commits what the server did by itself, bots and timers,
        without waiting for a request)."""
        if not table.is_released:
            self._tell_listeners(table)

    def _tell_listeners(self, table: Table) -> None:
        for listener in self._listeners:
            listener(table)

    def table_finished(self, table: Table) -> None:
        """A game ended: the table no longer counts as open; it goes after the ttl (or
        sooner when more than --max-tables finished tables wait)."""
        self.open_tables -= 1
        if not table.has_people:
            self.bot_tables -= 1
        self._give_back(table.id)
        self._finished[table.id] = None
        self._schedule_release(table, self.settings.finished_table_ttl)
        self._trim_finished()

    def _trim_finished(self) -> None:
        """At most --max-tables finished tables wait for their ttl: the oldest go first."""
        while len(self._finished) > self.settings.max_tables:
            self.release(next(iter(self._finished)))

    def table_idle(self, table: Table) -> None:
        """A waiting table nobody is at: it goes, its seats' tokens with it."""
        table.log.info("table_expired")
        self.release(table.id, ServiceError.not_found(
            "this table expired: nobody was at it", "TABLE_EXPIRED"))

    # ------------------------------------------------------------ tables

    def create(self, *, preset: str, overrides: RuleOverrides, bot_seats: int, name: str,
               seed: str | None, request_id: str = "", fingerprint: str = "",
               bot_policy: str = "", rating: str = "", creator: str = "",
               is_server_seed: bool = False, bot_pace: float | None = None,
               rematch_of: str = "", championship: str = "",
               is_spectating_closed: bool = False, game: str = "") -> Table:
        """A new table of ``game`` ("" for the default game), or, for a retried request_id, the
        table it created; ``creator``, the address asking, may have at most
        --max-tables-per-address unfinished. One a quick match could have opened (no seed
        given) is a quick-match table (``TableMeta.is_quick``);
        ``is_server_seed``: the server chose ``seed`` (a championship's deal), no client.

        :raises ServiceError: RESOURCE_EXHAUSTED SERVER_FULL, TOO_MANY_TABLES (the
            creator's), TOO_MANY_BOT_TABLES; INVALID_ARGUMENT for the rules asked.
        """
        self._ownership.check_serving()  # a node without its lease makes no tables
        key = request_key("create", request_id) if request_id else ""
        if key:
            known = check_reuse(self._create_requests.get(key), fingerprint)
            if known is not None:
                return self.get(str(known.answer))
        if not self.is_accepting:
            raise ServiceError.unavailable("the server is shutting down; no new tables")
        self._check_not_draining()
        if self.open_tables >= self.settings.max_tables:
            raise ServiceError.exhausted("the server has no room for another table",
                                         "SERVER_FULL")
        per_address = self.settings.max_tables_per_address
        if creator and per_address and self._tables_of.get(creator, 0) >= per_address:
            raise ServiceError.over_quota(
                f"{creator} has {per_address} tables not yet finished here, its most: finish "
                "or leave one first", "TOO_MANY_TABLES", f"address {creator}", 60.0)
        new = check_new_table(self.settings, preset=preset, overrides=overrides,
                              bot_seats=bot_seats, bot_policy=bot_policy,
                              has_seed=seed is not None and not is_server_seed,
                              rating=rating, bot_pace=bot_pace, game=game)
        if new.bot_seats == new.rules.players \
                and self.bot_tables >= self.settings.max_bot_tables:
            raise ServiceError.exhausted(
                f"at most {self.settings.max_bot_tables} tables of bots only play at once",
                "TOO_MANY_BOT_TABLES")
        table_id = "t_" + secrets.token_urlsafe(9)
        meta = TableMeta(name=name or table_id, preset=new.preset, rules=new.rules,
                         seed=seed if seed is not None else secrets.randbits(64),
                         bot_seats=new.bot_seats, order=next(self._order), request_key=key,
                         fingerprint=fingerprint, bot_policy=new.bot_policy,
                         rating=new.rating, bot_pace=new.bot_pace, rematch_of=rematch_of,
                         championship=championship, is_spectating_closed=is_spectating_closed,
                         is_quick=seed is None and self._is_quick_match(new.preset, new.rules,
                                                                        new.bot_seats, new.game),
                         game=new.game)
        created = self.scheduler.now()
        self.store.create_table(table_id, created, meta)  # refused once the store failed
        table = self.new_table(table_id, created, meta)
        self.adopt(table)
        if creator:
            self._created_by[table_id] = creator
            self._tables_of[creator] = self._tables_of.get(creator, 0) + 1
        table.log.debug("table_created", preset=new.preset, players=new.rules.players,
                        bots=new.bot_seats)
        table.open()
        self._tell_listeners(table)
        return table

    def _give_back(self, table_id: str) -> None:
        """A table finished or went: its creator may make another."""
        creator = self._created_by.pop(table_id, None)
        if creator is not None:
            left = self._tables_of[creator] - 1
            if left:
                self._tables_of[creator] = left
            else:
                del self._tables_of[creator]

    def tables_of(self, creator: str) -> int:
        """Unfinished tables ``creator`` made here."""
        return self._tables_of.get(creator, 0)

    def new_table(self, table_id: str, created: float, meta: TableMeta) -> Table:
        """A table object with this node's collaborators (not yet held: see ``adopt``)."""
        return Table(self, self.store, table_id=table_id, created=created, meta=meta,
                     settings=self.table_settings, metrics=self.metrics,
                     scheduler=self.scheduler, thinker=self._thinker)

    def adopt(self, table: Table) -> None:
        """Hold ``table`` (new, or rebuilt from its log): it counts, it is found, its
        CreateTable request_id answers again; a finished one counts in no limit and goes
        after what is left of its ttl (or sooner, as in ``table_finished``)."""
        self._tables[table.id] = table
        if table.meta.rematch_of in self._tables:
            self.rematch_tables[table.meta.rematch_of] = table.id
            self._tables[table.meta.rematch_of].rematch_id = table.id
        if table.request_key:
            self._create_requests[table.request_key] = Remembered(table.fingerprint, table.id)
        if table.is_finished:
            self._finished[table.id] = None
            if table.finished_at is not None:
                self._schedule_release(table, table.finished_at
                                       + self.settings.finished_table_ttl
                                       - self.scheduler.now())
            self._trim_finished()
            return
        self.open_tables += 1
        if not table.has_people:
            self.bot_tables += 1

    def note_order(self, order: int) -> None:
        """Tables made from now on list after ``order`` (a table's in the store)."""
        following = next(self._order)
        self._order = itertools.count(max(following, order + 1))

    def forget_replayed(self, table: Table) -> None:
        """A table whose replay failed: undo what replaying it registered (its tokens, its
        slots); its log stays in the store as it is."""
        self.seating.forget(table.seats.token_hashes(), table.seats.join_keys())
        table.seats.free_all_slots()

    def get(self, table_id: str) -> Table:
        if not table_id:
            raise ServiceError.invalid("table_id is required", "MISSING_TABLE_ID")
        table = self._tables.get(table_id)
        if table is None:
            if table_id in self.quarantined:
                raise ServiceError.unavailable(
                    f"table {table_id} could not be recovered after a restart; the operators "
                    "have been told and it is retried at the next start", "TABLE_QUARANTINED")
            raise ServiceError.not_found(f"no table {quote(table_id)}")
        return table

    def holds(self, table_id: str) -> bool:
        return table_id in self._tables

    def remembers(self, create_key: str, join_key: str) -> bool:
        """A CreateTable (``create_key``) or JoinTable (``join_key``) request a table held
        here answers (see ``idempotency.request_key``)."""
        return create_key in self._create_requests or (
            self.seating.joins.get(join_key, "") in self._tables) or \
            self.seating.is_spent(join_key)

    def live(self) -> Iterator[Table]:
        return iter(self._tables.values())

    def gauges(self) -> Iterable[GaugeMetricFamily]:
        """The tables by phase, and the seats, streams and people they hold now."""
        by_phase = GaugeMetricFamily("copas_tables", "Tables by phase", labels=["phase"])
        counts: dict[str, int] = {name: 0 for name in copas_pb2.Phase.keys()[1:]}
        connected = watchers = stuck = 0
        for table in self.live():
            counts[copas_pb2.Phase.Name(views.phase_of(table))] += 1  # type: ignore[arg-type]
            watchers += len(table.fanout)
            stuck += table.is_stuck()
            connected += sum(1 for s in table.seats if table.is_connected(s.number))
        for phase, count in counts.items():
            by_phase.add_metric([phase.removeprefix("PHASE_").lower()], count)
        yield by_phase
        yield from gauges(
            ("copas_seats_connected", "Player seats with a stream open", connected),
            ("copas_watch_streams", "WatchTable streams open", watchers),
            ("copas_players_seated", "People seated in games not finished", self.seated),
            ("copas_tables_stuck", "Games with no progress for longer than their rules allow "
             "(a deadline passed and not played, a bot to act and nothing to make it)", stuck))

    # ------------------------------------------------------------ seats

    def join(self, table_id: str, name: str, seat: int | None, request_id: str = "",
             fingerprint: str = "", *, preset: str = "", players: int | None = None,
             account_id: str = "", address: str = "", game: str = "",
             partnerships: bool | None = None) -> tuple[Table, int, str]:
        """Seat a person (signed in as ``account_id``, if any; ``address``, theirs) at
        ``table_id``, or (quick match, ``preset`` instead) at the oldest waiting table of that
        kind with a free seat and without their account, or at a new one (``address`` its
        creator). At a quick-match table an anonymous person is one per address. A quick
        match's kind: ``game`` ("" the default) and ``preset``, with ``players`` and
        ``partnerships`` when given."""
        if request_id:
            key = request_key(JOIN_SCOPE, request_id)
            if self.seating.is_spent(key):
                raise ServiceError.precondition(
                    "the seat this request_id took was given up: join again with a new "
                    "request_id", "JOIN_GIVEN_UP")
            known = self.seating.joins.get(key)
            if known is not None and known in self._tables:  # a retry: the same table
                table = self._tables[known]
                seat_number, token = table.join(name, seat, request_id, fingerprint,
                                                account_id, address)
                return table, seat_number, token
        self._check_not_draining()
        if table_id or not preset:
            table = self.get(table_id)
            _check_kind_asked(table, game, partnerships)
        else:
            table = self._open_table(preset, players, account_id, address, game, partnerships)
        seat_number, token = table.join(name, seat, request_id, fingerprint, account_id,
                                        address)
        if not table_id and preset:  # a quick match: bots take the free seats if nobody comes
            self.quick_fill.watch(table)
        return table, seat_number, token

    def _check_not_draining(self) -> None:
        if self.is_draining:
            raise ServiceError.unavailable(
                "this node is draining for maintenance and takes no new tables or seats: "
                "retry through another node, or later", "NODE_DRAINING")

    # ------------------------------------------------------------ operators

    def remove_account(self, account_id: str) -> list[Table]:
        """An operator banned an account: each of its seats here is given up (before a game)
        or played as a leaver's; the tables changed."""
        changed = []
        for table in list(self._tables.values()):
            for seat in table.seats:
                if seat.account_id == account_id and seat.token_hash and \
                        not table.is_finished:
                    table.remove_person(seat.number)
                    changed.append(table)
        return changed

    def close_table(self, table_id: str) -> Table:
        """An operator ends a table: a running game ends now (CLOSED, its record kept); a
        waiting table goes, its streams told TABLE_CLOSED.

        :raises ServiceError: WRONG_PHASE for a finished game.
        """
        table = self.get(table_id)
        if table.is_waiting:
            self.release(table_id, ServiceError.not_found(
                "an operator closed this table", "TABLE_CLOSED"))
        else:
            table.close_by_operator()
        return table

    def game_module_of(self, table_id: str) -> GameModule:
        """The game of table ``table_id``, which reads its actions; the default game's when
        no such table is here (the call is refused later, as it always was)."""
        table = self._tables.get(table_id)
        return table.game_module if table is not None else games.get()

    def games_running(self) -> int:
        """Games started and not finished on this node."""
        return sum(1 for t in self._tables.values()
                   if t.game is not None and not t.game.is_over)

    def quick_match_rules(self, preset: str, players: int | None, game: str = "",
                          partnerships: bool | None = None) -> GameRules:
        """The rules of a table a quick match opens: ``game``'s ``preset``'s, with this
        server's defaults (--play-timeout ...), for ``players`` (and ``partnerships``).

        :raises ServiceError: INVALID_RULES for a game, preset, player count or partnership
            it does not take.
        """
        return check_new_table(self.settings, preset=preset,
                               overrides=_quick_overrides(players, partnerships), bot_seats=0,
                               bot_policy="", has_seed=False, game=game).rules

    def quick_match_rules_pb(self, preset: str, players: int | None, game: str = "",
                             partnerships: bool | None = None) -> copas_pb2.Rules:
        """``quick_match_rules`` as a table's summary shows them."""
        return game_module(game).rules_to_pb(
            self.quick_match_rules(preset, players, game, partnerships))

    def _open_table(self, preset: str, players: int | None, account_id: str = "",
                    creator: str = "", game: str = "", partnerships: bool | None = None
                    ) -> Table:
        """Quick match: the oldest waiting table of this kind with a free seat, or a new one.
        A table of the kind is joined only when a quick match could have opened it
        (``TableMeta.is_quick``): the preset's rules and this server's defaults, no bots, no
        seed given (not a table someone made with a point limit of 1,000 and no clock, to
        catch every quick match, nor one whose deal they know)."""
        rules = self.quick_match_rules(preset, players, game, partnerships)
        module = game_module(game)
        wanted = LobbyFilter(only_joinable=True, preset=preset, players=rules.players)
        for table in self._tables.values():  # oldest first
            if table.has_people and table.meta.is_quick and table.rules == rules \
                    and table.game_module is module \
                    and wanted.matches(table) and not (
                        account_id and any(s.account_id == account_id for s in table.seats)):
                return table
        return self.create(preset=preset, overrides=_quick_overrides(players, partnerships),
                           bot_seats=0, name=QUICK_MATCH_NAME, seed=None, creator=creator,
                           game=game)

    def _is_quick_match(self, preset: str, rules: GameRules, bot_seats: int, game: str = ""
                        ) -> bool:
        """A table of a quick match's rules (its preset's and this server's defaults, no
        bots); without a seed given, one a quick match could have opened: its seats are
        reservations, one per client."""
        try:
            return not bot_seats and rules == self.quick_match_rules(
                preset, rules.players, game, getattr(rules, "partnerships", None))
        except ServiceError:
            return False

    def authenticate(self, token_hash: str | None, table_id: str) -> tuple[Table, int]:
        """The table and seat a token belongs to."""
        if token_hash is None:
            raise ServiceError.unauthenticated(
                "missing player token: send metadata 'authorization: Bearer <token>'")
        entry = self.seating.seat_of(token_hash)
        if entry is None:
            if self.seating.was_removed(token_hash):
                raise ServiceError.unauthenticated(
                    "an operator removed you from this table: your player token is no "
                    "longer valid", "TOKEN_REVOKED")
            if self.seating.has_expired(token_hash):
                raise ServiceError.unauthenticated(
                    "your quick-match seat was reserved for you to connect and you did not "
                    "in time: it went back; join again", "RESERVATION_EXPIRED")
            if self.seating.is_revoked(token_hash):
                raise ServiceError.unauthenticated(
                    "you gave up this seat: your player token is no longer valid",
                    "TOKEN_REVOKED")
            raise ServiceError.unauthenticated("unknown player token")
        if table_id and entry[0] != table_id:
            self.get(table_id)  # NOT_FOUND for an unknown table
            raise ServiceError.denied("this token belongs to another table")
        return self.get(entry[0]), entry[1]

    def seat_for_watch(self, token_hash: str | None, table_id: str) -> tuple[Table, int | None]:
        """The table and the caller's seat (None: a spectator).

        :raises ServiceError: a bad token's refusals; PERMISSION_DENIED SPECTATING_CLOSED for
            a spectator of a table only its players watch.
        """
        if token_hash is None:
            table = self.get(table_id)
            if table.meta.is_spectating_closed:
                raise ServiceError.denied(
                    "this championship table is watched by its players only: its cards would "
                    "tell the tables playing the same deal (duplicate deals); its record is "
                    "published when the round ends", "SPECTATING_CLOSED")
            return table, None
        return self.authenticate(token_hash, table_id)

    def is_valid_token(self, token_hash: str) -> bool:
        return self.seating.seat_of(token_hash) is not None

    # ------------------------------------------------------------ the end of tables

    def _schedule_release(self, table: Table, delay: float) -> None:
        handle = self.scheduler.call_later(delay, lambda: self.release(table.id))
        self._release_handles[table.id] = handle

    def release(self, table_id: str, error: ServiceError | None = None) -> None:
        """Forget a table: its tokens stop working, its streams end, its log goes."""
        if table_id not in self._tables:
            return
        self.store.release_table(table_id)  # refused once the store failed: nothing changes
        table = self._let_go(table_id, error, is_ours=True)
        if table is not None:
            table.log.debug("table_released")

    def drop(self, table_id: str, error: ServiceError) -> None:
        """Forget a table this node lost to another (nothing is written: it is not ours):
        the one way a lost table leaves, for the delivery's barrier and the takeovers."""
        table = self._let_go(table_id, error, is_ours=False)
        if table is not None:
            table.log.warning("table_dropped")

    def _let_go(self, table_id: str, error: ServiceError | None, *, is_ours: bool
                ) -> Table | None:
        """The table leaves this node's memory: counts, seats, tokens, timers, streams,
        the listeners told. ``is_ours``: its tokens are given up in the store too."""
        table = self._tables.pop(table_id, None)
        self.rematch_tables.pop(table_id, None)  # (a finished table: its pointer)
        handle = self._release_handles.pop(table_id, None)
        if handle is not None:
            handle.cancel()
        if table is None:
            return None
        if self.rematch_tables.get(table.meta.rematch_of) == table_id:  # a rematch that went
            del self.rematch_tables[table.meta.rematch_of]
            if (old := self._tables.get(table.meta.rematch_of)) is not None:
                old.rematch_id = ""
        if table.id in self._finished:
            del self._finished[table.id]
        else:
            self.open_tables -= 1
            if not table.has_people:
                self.bot_tables -= 1
            self._give_back(table.id)
        token_hashes = table.seats.token_hashes()
        self.seating.forget(token_hashes, table.seats.join_keys())
        if is_ours:
            for token_hash in token_hashes:
                self._ownership.token_revoked(token_hash, table.id)
        table.seats.free_all_slots()
        table.release(error, is_lost=not is_ours)
        self._tell_listeners(table)
        if table.request_key:
            self._create_requests.pop(table.request_key, None)
        return table

    def close_all(self) -> None:
        """The server stops: every table's timers and streams end (their logs stay)."""
        self.delivery.stop()
        self.lobby.close_all()
        for handle in self._release_handles.values():
            handle.cancel()
        for table in self._tables.values():
            table.release()

    def stop_accepting(self) -> None:
        """The server is stopping: no new tables or seats."""
        self.is_accepting = False

    def fail_all(self, error: ServiceError) -> None:
        """The store failed: nothing more is accepted or released (memory stays as the log
        has it), every stream ends with ``error``."""
        self.is_accepting = False
        self.delivery.stop()
        for handle in self._release_handles.values():
            handle.cancel()
        self._release_handles.clear()
        for table in list(self._tables.values()):
            table.release(error)


def _check_kind_asked(table: Table, game: str, partnerships: bool | None) -> None:
    """A join of ``table`` by its id that also names a game (or partnerships, quick match's
    fields) is refused unless the table is of that kind: a client asking for a seat at one
    game is never seated at another.

    :raises ServiceError: INVALID_ARGUMENT (INVALID_RULES) naming the table's game."""
    module = table.game_module
    if game:
        asked = game_module(game)  # an unknown game is refused with the games listed
        if asked is not module:
            raise ServiceError.invalid(
                f"table {table.id} plays {module.name}, not {asked.name}: leave game empty "
                "to join it, or leave table_id empty for a quick match", "INVALID_RULES")
    has_partnerships = bool(getattr(table.rules, "partnerships", False))
    if partnerships is not None and partnerships != has_partnerships:
        raise ServiceError.invalid(
            f"table {table.id} is played {'in partnerships' if has_partnerships else 'alone'}:"
            " leave partnerships unset to join it, or leave table_id empty for a quick match",
            "INVALID_RULES")
