"""``copas.admin.v1.AdminService``: what an operator sees and does (see admin.proto).

Every call goes through the gateway (``server.rpc.gateway``), as copas.v1's do: its quotas,
then the operator's check, before the call is routed, and at its end the audit line
(``server.rpc.operators``: who may call). In a cluster each node answers for all of them:
a call about one table goes to its owner (``server.cluster.routing.ADMIN_ROUTES``, relayed by
``server.cluster.admin``), ListTables asks every node with a lease for its own tables (the
nodes are read from the database) and adds the tables nobody holds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import time
from collections.abc import Callable
from typing import Any, Protocol

import grpc
import structlog
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import copas_pb2

from server import names
from server.accounts.games import DELETED_NAME, forget_in_records
from server.accounts.model import Account
from server.accounts.service import Accounts
from server.championships.service import Championships
from server.config import Config
from server.errors import ServiceError
from server.observability import version
from server.rpc import inputs
from server.rpc.accounts import account_pb, ratings_pb
from server.rpc.championships import ChampionshipAdmin
from server.rpc.gateway import caller
from server.rpc.operators import REASON_MAX
from server.rpc.peers import PeerTrust
from server.rpc.quotas import Quotas
from server.tables import paging
from server.tables.registry import TableRegistry
from server.tables.table import Table
from server.wire import timestamp

log = structlog.get_logger("copas.admin")

Context = grpc.aio.ServicerContext[Any, Any]

SERVICE = "copas.admin.v1.AdminService"
PAGE_DEFAULT = 100
PAGE_MAX = 1_000
EVENTS_SHOWN = 50  # GetTable's latest events
SECRET_SETTINGS = frozenset({"database"})  # may hold a password
REDACTED = "(redacted)"
Position = tuple[int, str]  # a table's place in a listing: (-created µs, table_id)


class Cluster(Protocol):
    """What the admin service needs of a cluster (``server.cluster.admin``)."""

    node_id: str

    async def other_nodes(self) -> list[tuple[str, str]]:
        """The other nodes whose lease holds: (node_id, address)."""

    async def orphans(self, limit: int, after_created: float | None
                      ) -> list[admin_pb2.AdminTable]:
        """Tables not finished that no live node holds (stuck until one claims them), newest
        first, created at or before ``after_created`` when given."""

    async def relay(self, address: str, path: str, raw: bytes, context: Context,
                    who: str) -> bytes:
        """The operator's call on the node at ``address``.

        :raises grpc.aio.AioRpcError: its refusal, or that it did not answer in time.
        """

    async def drain(self) -> int:
        """Hand this node's tables to the others; how many went."""

    def lease_state(self) -> tuple[str, float]: ...


class OneProcess:
    """The cluster of a server alone: no other node, no table it does not hold, no lease."""

    node_id = ""

    async def other_nodes(self) -> list[tuple[str, str]]:
        return []

    async def orphans(self, limit: int, after_created: float | None
                      ) -> list[admin_pb2.AdminTable]:
        return []

    async def relay(self, address: str, path: str, raw: bytes, context: Context,
                    who: str) -> bytes:
        raise RuntimeError("one process relays nothing")

    async def drain(self) -> int:
        return 0  # nobody to hand the tables to: their games finish here

    def lease_state(self) -> tuple[str, float]:
        return "none", 0.0


def settings_in_force(config: Config) -> dict[str, str]:
    """Every setting by flag name, secrets redacted."""
    out: dict[str, str] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        name = f.name.replace("_", "-")
        if f.name in SECRET_SETTINGS and value:
            out[name] = REDACTED
        elif isinstance(value, dict):
            out[name] = ",".join(f"{k}={v}" for k, v in sorted(value.items()))
        else:
            out[name] = str(value)
    return out


def table_state(table: Table, owner: str) -> admin_pb2.AdminTable:
    """A table as an operator sees it: its public summary, its seats' accounts, who is
    connected now (the summary shows presence as the players are told it, a change at most
    once per --presence-interval) and how it is doing."""
    summary = table.summary()
    now = table.now()
    state = _from_summary(summary, created=table.created, now=now,
                          idle=now - table.last_event_at, owner=owner,
                          stuck=table.is_stuck(), connected=table.people_connected())
    for shown, seat in zip(state.seats, table.seats, strict=True):
        shown.account_id = seat.account_id
        shown.is_connected = table.is_connected(seat.number)
    return state


def _from_summary(summary: copas_pb2.TableSummary, *, created: float, now: float, idle: float,
                  owner: str, stuck: bool, connected: int) -> admin_pb2.AdminTable:
    return admin_pb2.AdminTable(
        table_id=summary.table_id, display_name=summary.display_name, preset=summary.preset,
        phase=summary.phase, hand_number=summary.hand_number,
        create_time=summary.create_time, age_seconds=max(0.0, now - created),
        idle_seconds=max(0.0, idle), owner_node=owner, bot_policy=summary.bot_policy,
        is_stuck=stuck, rules=summary.rules, people_connected=connected,
        seats=[admin_pb2.AdminSeat(
            seat=s.seat, display_name=s.display_name, is_taken=s.is_taken, is_bot=s.is_bot,
            is_connected=s.is_connected, has_left=s.has_left, total=s.total)
            for s in summary.seats])


def _position(table: admin_pb2.AdminTable) -> Position:
    """Newest first, then by id (microseconds: exact in a page token's number)."""
    return (-table.create_time.ToMicroseconds(), table.table_id)


def _position_of(table: Table) -> Position:
    """As ``_position`` of its AdminTable (whose create_time is ``timestamp(created)``)."""
    return (-(int(table.created * 1e9) // 1000), table.id)


def _after(token: str) -> Position | None:
    position = paging.decode(paging.Listing.ADMIN_TABLES, token)
    return None if position is None else (-int(position[0]), position[1])


def _checked_table_id(table_id: str) -> str:
    inputs.check_length("table_id", table_id, inputs.ID_MAX)
    if not table_id:
        raise ServiceError.invalid("table_id is required", "MISSING_TABLE_ID")
    return table_id


def _account_id(account_id: str) -> str:
    inputs.check_length("account_id", account_id, inputs.ID_MAX)
    if not account_id:
        raise ServiceError.not_found("account_id is required: no account has none",
                                     "ACCOUNT_NOT_FOUND")
    return account_id


def _reason(text: str) -> str:
    text = inputs.check_length("reason", text.strip(), REASON_MAX)
    if not text:
        raise ServiceError.invalid("reason is required: say why, for the audit log",
                                   "MISSING_REASON")
    return text


def _page_of(tables: list[admin_pb2.AdminTable], size: int, after: Position | None
             ) -> admin_pb2.ListTablesResponse:
    """Newest first, then by id; each table once (a table moving between nodes may be
    reported twice)."""
    unique = {t.table_id: t for t in tables}
    ordered = sorted((t for t in unique.values() if after is None or _position(t) > after),
                     key=_position)
    page = ordered[:size]
    response = admin_pb2.ListTablesResponse(tables=page)
    if len(ordered) > size:
        created, table_id = _position(page[-1])
        response.next_page_token = paging.encode(paging.Listing.ADMIN_TABLES,
                                                (float(-created), table_id))
    return response


class AdminService(ChampionshipAdmin, admin_pb2_grpc.AdminServiceServicer):
    """The operator's calls, once the gateway let them in and routed them here."""

    def __init__(self, trust: PeerTrust, registry: TableRegistry, quotas: Quotas,
                 config: Config, store_kind: str, store_healthy: Callable[[], bool],
                 cluster: Cluster, accounts: Accounts,
                 championships: Championships | None = None) -> None:
        self._championships = championships
        self._accounts = accounts
        self._trust = trust
        self._registry = registry
        self._quotas = quotas
        self._config = config
        self._store_kind = store_kind
        self._store_healthy = store_healthy
        self._cluster = cluster
        self._started = time.monotonic()
        self._node = cluster.node_id

    # ------------------------------------------------------------ tables

    async def ListTables(self, request: admin_pb2.ListTablesRequest, context: Context
                         ) -> admin_pb2.ListTablesResponse:
        if request.page_size < 0:
            raise ServiceError.invalid("page_size must not be negative", "INVALID_PAGE_SIZE")
        size = min(request.page_size or PAGE_DEFAULT, PAGE_MAX)
        after = _after(inputs.check_length(
            "page_token", request.page_token, inputs.PAGE_TOKEN_MAX, "INVALID_PAGE_TOKEN"))
        tables = self._local_page(size + 1, after, request.only_stuck)
        unreachable: list[str] = []
        if not self._trust.is_relayed(context.invocation_metadata() or ()):
            tables += await self._others(size + 1, after, request, context, unreachable)
        answer = _page_of(tables, size, after)
        answer.unreachable_nodes.extend(unreachable)
        return answer

    def _local_page(self, count: int, after: Position | None, only_stuck: bool
                    ) -> list[admin_pb2.AdminTable]:
        """This node's first ``count`` tables after ``after``: positions are compared for
        every table, messages built for those shown only."""
        candidates: list[tuple[Position, Table]] = []
        for table in self._registry.live():
            position = _position_of(table)
            if (after is None or position > after) and (not only_stuck or table.is_stuck()):
                candidates.append((position, table))
        chosen = heapq.nsmallest(count, candidates, key=lambda pair: pair[0])
        return [table_state(table, self._node) for _, table in chosen]

    async def _others(self, count: int, after: Position | None,
                      request: admin_pb2.ListTablesRequest, context: Context,
                      unreachable: list[str]) -> list[admin_pb2.AdminTable]:
        """Every other live node's first ``count`` tables after the token (asked at once,
        each within the relay's deadline: a node that does not answer is named in
        ``unreachable``), and the tables nobody holds."""
        cluster, who = self._cluster, caller().who
        raw = admin_pb2.ListTablesRequest(
            page_size=count, page_token=request.page_token,
            only_stuck=request.only_stuck).SerializeToString()

        async def ask(node_id: str, address: str) -> list[admin_pb2.AdminTable]:
            try:
                answer = await cluster.relay(address, f"/{SERVICE}/ListTables", raw, context,
                                             who)
            except grpc.aio.AioRpcError as error:
                log.warning("admin_node_unreachable", node_id=node_id, code=error.code().name)
                unreachable.append(node_id)
                return []
            return list(admin_pb2.ListTablesResponse.FromString(answer).tables)
        found: list[admin_pb2.AdminTable] = []
        nodes = await cluster.other_nodes()
        for tables in await asyncio.gather(*(ask(n, a) for n, a in nodes)):
            found += tables
        orphans = await cluster.orphans(count, None if after is None else -after[0] / 1e6)
        found += [t for t in orphans if after is None or _position(t) > after]
        return found

    async def GetTable(self, request: admin_pb2.GetTableRequest, context: Context
                       ) -> admin_pb2.GetTableResponse:
        table = self._registry.get(_checked_table_id(request.table_id))
        answer = admin_pb2.GetTableResponse(
            table=table_state(table, self._node), view=table.view(None),
            last_events=list(table.history)[-EVENTS_SHOWN:])
        for kind, at, seats in table.timers():
            answer.timers.add(kind=kind, at=timestamp(at), seats=seats)
        return answer

    async def CloseTable(self, request: admin_pb2.CloseTableRequest, context: Context
                         ) -> admin_pb2.CloseTableResponse:
        table_id = _checked_table_id(request.table_id)
        why = _reason(request.reason)
        table = self._registry.close_table(table_id)
        await self._registry.delivery.committed(table)
        log.warning("table_closed_by_operator", table_id=table_id, reason=why)
        return admin_pb2.CloseTableResponse(
            table=table_state(table, self._node),
            record_id=table.id if table.finished_at is not None else "")

    async def RemovePlayer(self, request: admin_pb2.RemovePlayerRequest, context: Context
                           ) -> admin_pb2.RemovePlayerResponse:
        table_id = _checked_table_id(request.table_id)
        _reason(request.reason)
        table = self._registry.get(table_id)
        table.remove_person(request.seat)
        await self._registry.delivery.committed(table)
        return admin_pb2.RemovePlayerResponse(table=table_state(table, self._node))

    # ------------------------------------------------------------ accounts

    async def _account_pb(self, account: Account) -> admin_pb2.AdminAccount:
        profile = await self._accounts.profile(account)
        return admin_pb2.AdminAccount(
            account=account_pb(account, profile.identities), is_banned=account.is_banned,
            ratings=ratings_pb(profile, is_provisional_shown=False),
            games=profile.games, wins=profile.wins)

    async def FindAccount(self, request: admin_pb2.FindAccountRequest, context: Context
                          ) -> admin_pb2.FindAccountResponse:
        query = inputs.check_length("query", request.query.strip(), inputs.ID_MAX)
        return admin_pb2.FindAccountResponse(
            account=await self._account_pb(await self._accounts.find_by(query)))

    async def RenameAccount(self, request: admin_pb2.RenameAccountRequest, context: Context
                            ) -> admin_pb2.RenameAccountResponse:
        _reason(request.reason)
        name = names.person(request.display_name)
        account = await self._accounts.rename(_account_id(request.account_id), name)
        return admin_pb2.RenameAccountResponse(account=await self._account_pb(account))

    async def RevokeSessions(self, request: admin_pb2.RevokeSessionsRequest, context: Context
                             ) -> admin_pb2.RevokeSessionsResponse:
        _reason(request.reason)
        ended = await self._accounts.revoke(_account_id(request.account_id))
        return admin_pb2.RevokeSessionsResponse(sessions_ended=ended)

    async def BanAccount(self, request: admin_pb2.BanAccountRequest, context: Context
                         ) -> admin_pb2.BanAccountResponse:
        _reason(request.reason)
        account = await self._accounts.set_banned(_account_id(request.account_id),
                                                  request.is_banned)
        removed = self._registry.remove_account(account.id) if account.is_banned else []
        for table in removed:
            await self._registry.delivery.committed(table)
        return admin_pb2.BanAccountResponse(account=await self._account_pb(account),
                                            seats_removed=len(removed))

    async def DeleteAccount(self, request: admin_pb2.DeleteAccountRequest, context: Context
                            ) -> admin_pb2.DeleteAccountResponse:
        _reason(request.reason)
        account_id = _account_id(request.account_id)
        await self._accounts.find(account_id)
        games, before = [], None
        while page := await self._accounts.games_of_id(account_id, 100, before):
            games += [g.record_id for g in page]
            before = (page[-1].finished, page[-1].record_id)
        await self._accounts.delete(account_id)
        for table in self._registry.remove_account(account_id):  # played as a leaver's
            await self._registry.delivery.committed(table)
        if self._championships is not None:
            await self._championships.forget_player(account_id, DELETED_NAME)
        await forget_in_records(self._registry.store, account_id, games)
        return admin_pb2.DeleteAccountResponse(records_rewritten=len(games))

    # ------------------------------------------------------------ the node

    async def Drain(self, request: admin_pb2.DrainRequest, context: Context
                    ) -> admin_pb2.DrainResponse:
        self._registry.set_draining(True)
        try:
            handed = await self._cluster.drain()
        except ServiceError:
            raise
        except Exception as exc:  # the database: nothing was handed over
            log.error("drain_failed", error=str(exc)[:200])
            raise ServiceError.unavailable(
                "this node is draining but could not hand its tables over (a database "
                "error): call Drain again", "NODE_DRAINING") from None
        return admin_pb2.DrainResponse(is_draining=True, tables_handed_over=handed,
                                       games_running=self._registry.games_running())

    async def Undrain(self, request: admin_pb2.UndrainRequest, context: Context
                      ) -> admin_pb2.UndrainResponse:
        self._registry.set_draining(False)
        return admin_pb2.UndrainResponse(is_draining=False)

    async def ServerStatus(self, request: admin_pb2.ServerStatusRequest, context: Context
                           ) -> admin_pb2.ServerStatusResponse:
        registry = self._registry
        phases = {"waiting": 0, "playing": 0, "finished": 0}
        stuck = connected = 0
        for table in registry.live():
            phase = "waiting" if table.is_waiting else \
                "finished" if table.is_finished else "playing"
            phases[phase] += 1
            stuck += table.is_stuck()
            connected += table.people_connected()
        lease, lease_age = self._cluster.lease_state()
        return admin_pb2.ServerStatusResponse(
            version=version(), uptime_seconds=time.monotonic() - self._started,
            node_id=self._node, lease_state=lease, lease_age_seconds=lease_age,
            store=self._store_kind, is_store_healthy=self._store_healthy(),
            is_draining=registry.is_draining, tables=phases, players=registry.seated,
            players_connected=connected, quota_clients=self._quotas.clients(),
            bot_workers=self._config.bot_workers, tables_stuck=stuck,
            settings=settings_in_force(self._config))
