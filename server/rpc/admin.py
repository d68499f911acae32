"""``copas.admin.v1.AdminService``: what an operator sees and does (see admin.proto).

Who may call: the holder of ``--admin-token-file``'s token (``authorization: Bearer``,
compared in constant time) or of a client certificate whose common name or a subject
alternative name is in ``--admin-subjects`` (mutual TLS). A call another node relays carries
the operator's token as it came, and every node checks it. Only without a token (mutual TLS
alone) does a relayed call about one table, or a relayed ListTables, pass on the cluster
key's word and the operator's name it carries (``x-copas-admin-by``): never Drain, Undrain or
ServerStatus, which are never relayed. Nothing else, a player token least of all. Every
call is audited: one ``admin_call`` log line with who, what, and how it ended, and
``copas_admin_actions_total``.

Every call goes through the gateway (``server.rpc.gateway``), as copas.v1's do: its quotas,
then the operator's check and, at its end, the audit line (``AdminAudit``, the service's
``CallCheck``), both before a call is routed. In a cluster each node answers for all of them:
a call about one table goes to its owner (``server.cluster.routing.ADMIN_ROUTES``, relayed by
``server.cluster.admin``), ListTables asks every node with a lease for its own tables (the
nodes are read from the database) and adds the tables nobody holds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import heapq
import hmac
import time
from collections.abc import Callable
from typing import Any, Protocol

import grpc
import structlog
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import copas_pb2

from server.config import Config
from server.errors import ServiceError
from server.metadata import ADMIN_BY
from server.observability import Metrics, version
from server.rpc import inputs
from server.rpc.gateway import caller
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
REASON_MAX = 200
SECRET_SETTINGS = frozenset({"database"})  # may hold a password
REDACTED = "(redacted)"
# The methods about tables a node relays to another (ListTables: asked of every node).
RELAYED_METHODS = frozenset({"ListTables", "GetTable", "CloseTable", "RemovePlayer"})
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


class AdminAuth:
    def __init__(self, token: str, subjects: frozenset[str], trust: PeerTrust) -> None:
        self._token = token.encode()
        self._subjects = subjects
        self._trust = trust

    @property
    def is_enabled(self) -> bool:
        return bool(self._token or self._subjects)

    def who(self, method: str, context: Context) -> str:
        """Who is calling, for the audit line.

        :raises ServiceError: ADMIN_DISABLED, ADMIN_CREDENTIAL_REQUIRED or ADMIN_DENIED.
        """
        if not self.is_enabled:
            raise ServiceError.denied(
                "the admin service is off on this server: start it with --admin-token-file "
                "or --admin-subjects", "ADMIN_DISABLED")
        metadata = context.invocation_metadata() or ()
        presented = [v for k, v in metadata if k == "authorization"]
        if not presented and not self._token and method in RELAYED_METHODS \
                and self._trust.is_relayed(metadata):
            by = next((v for k, v in metadata if k == ADMIN_BY and isinstance(v, str)), "")
            if by:
                return f"{by[:80]} (relayed)"
        if self._subjects:
            peer = context.auth_context()  # empty without TLS
            names = [*peer.get("x509_common_name", []),
                     *peer.get("x509_subject_alternative_name", [])]
            for name in names:
                text = name.decode(errors="replace")
                if text in self._subjects:
                    return f"certificate {text}"
        if not presented:
            raise ServiceError.unauthenticated(
                "the admin service needs an operator credential: send 'authorization: Bearer "
                "<admin token>' (or an operator's client certificate)",
                "ADMIN_CREDENTIAL_REQUIRED")
        value = presented[0]
        text = value.decode(errors="replace") if isinstance(value, bytes) else value
        scheme, _, secret = text.partition(" ")
        given = secret.strip().encode()
        if scheme.lower() != "bearer" or not given:
            raise ServiceError.unauthenticated(
                "authorization metadata must be 'Bearer <admin token>'",
                "ADMIN_CREDENTIAL_REQUIRED")
        # Constant time over the token's length: compare_digest looks at every byte.
        if not self._token or not hmac.compare_digest(given, self._token):
            raise ServiceError.denied("that is not an operator's credential", "ADMIN_DENIED")
        return "token " + hashlib.sha256(self._token).hexdigest()[:8]


class AdminAudit:
    """The gateway's check of every admin call (the operator's credential) and its audit
    line and count (with the caller's address when it is refused)."""

    def __init__(self, auth: AdminAuth, trust: PeerTrust, metrics: Metrics) -> None:
        self._auth = auth
        self._trust = trust
        self._metrics = metrics

    def check(self, method: str, context: Context) -> str:
        return self._auth.who(method, context)

    def ended(self, method: str, request: Any, who: str, context: Context, code: str,
              error: ServiceError | None) -> None:
        what = _audited(request)
        if error is None and code == "OK":
            self._metrics.admin_actions.labels(method, "ok").inc()
            log.info("admin_call", method=method, who=who, outcome="ok", **what)
            return
        outcome = error.reason if error is not None else code
        self._metrics.admin_actions.labels(method, outcome).inc()
        log.warning("admin_call", method=method, who=who or "(refused)",
                    peer=self._trust.client_of(context.peer(), ()), outcome=outcome,
                    detail=error.message if error is not None else "", **what)


def _audited(request: Any) -> dict[str, Any]:
    """What an audit line says of the request: its table, seat and reason, when it has
    them."""
    fields = request.DESCRIPTOR.fields_by_name if request is not None else {}
    what: dict[str, Any] = {}
    if "table_id" in fields:
        what["table_id"] = request.table_id[:inputs.ID_MAX]
    if "seat" in fields:
        what["seat"] = request.seat
    if "reason" in fields:
        what["reason"] = request.reason[:REASON_MAX]
    return what


def read_admin_token(path: str) -> str:
    """The first line of ``--admin-token-file`` (at least 16 characters)."""
    if not path:
        return ""
    with open(path, encoding="utf-8") as file:
        token = file.readline().strip()
    if len(token) < 16:
        raise ValueError(f"{path}: the admin token must be at least 16 characters")
    return token


def admin_subjects(text: str) -> frozenset[str]:
    return frozenset(s.strip() for s in text.split(",") if s.strip())


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
    """A table as an operator sees it: its public summary and how it is doing."""
    summary = table.summary()
    now = table.now()
    return _from_summary(summary, created=table.created, now=now,
                         idle=now - table.last_event_at, owner=owner,
                         stuck=table.is_stuck(), connected=table.people_connected())


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
    position = paging.decode(token)
    return None if position is None else (-int(position[0]), position[1])


def _checked_table_id(table_id: str) -> str:
    inputs.check_length("table_id", table_id, inputs.ID_MAX)
    if not table_id:
        raise ServiceError.invalid("table_id is required", "MISSING_TABLE_ID")
    return table_id


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
        response.next_page_token = paging.encode((float(-created), table_id))
    return response


class AdminService(admin_pb2_grpc.AdminServiceServicer):
    """The operator's calls, once the gateway let them in and routed them here."""

    def __init__(self, trust: PeerTrust, registry: TableRegistry, quotas: Quotas,
                 config: Config, store_kind: str, store_healthy: Callable[[], bool],
                 cluster: Cluster) -> None:
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
