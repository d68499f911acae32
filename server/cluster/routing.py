"""Which node serves a call, decided before the servicer runs, from a table of every method.

``ROUTES`` names, for each copas.v1 method, what finds its table: nothing (served by any
node from the database or by this one: ``HERE``), the request's ``table_id`` (``TABLE``), or
the ``table_id`` and the caller's token (``SEAT``: a call may leave the table out and let its
token name it). ``Router`` refuses to start while a method of the service is missing from the
table, so a new RPC cannot be served from the wrong node by forgetting it.

A call for a table another live node owns is relayed there (``server.cluster.forwarding``);
a table whose owner's lease ran out is claimed first. Owners and tokens' tables are read
from the database once per table however many calls ask, and remembered (bounded); a relay
that finds the owner unreachable forgets it.

Those reads are bounded: at most ``--cluster-lookups-per-second`` per node (a bucket as
deep), so a flood of unknown table ids or tokens costs the database a bounded load however
many clients send it; a lookup beyond the budget is refused at once (RESOURCE_EXHAUSTED,
RATE_LIMITED, with the delay to retry after) instead of queueing in front of the others.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections import OrderedDict
from dataclasses import dataclass

from copas.admin.v1 import admin_pb2
from copas.v1 import copas_pb2
from google.protobuf.descriptor import ServiceDescriptor

from server.cluster.destination import HERE, Destination
from server.cluster.ownership import Lease, Takeovers
from server.cluster.queries import ClusterQueries, Owner
from server.errors import ServiceError
from server.tables.registry import TableRegistry

OWNER_SECONDS = 30.0  # a live owner, as read, is believed this long (or until a relay fails)
OWNER_CACHE = 100_000  # owners and tokens' tables remembered
UNKNOWN_SECONDS = 1.0  # an id the database does not know is not read again this long


class Route(enum.Enum):
    HERE = "here"  # any node answers (from the database), or this node makes the table
    TABLE = "table"  # the request's table_id (empty: here)
    SEAT = "seat"  # the request's table_id, else the caller's token's table


ROUTES: dict[str, Route] = {
    "CreateTable": Route.HERE,
    "ListTables": Route.HERE,
    "WatchLobby": Route.HERE,
    "GetTable": Route.TABLE,
    "JoinTable": Route.TABLE,  # a quick match (no table_id) seats here
    "Rematch": Route.SEAT,  # the finished table's owner makes its rematch there
    "PassCards": Route.SEAT,
    "PlayCard": Route.SEAT,
    "ChooseMoon": Route.SEAT,
    "LeaveTable": Route.SEAT,
    "React": Route.SEAT,
    "WatchTable": Route.SEAT,
    "GetView": Route.SEAT,
    "GetGameRecord": Route.HERE,
    "ListGameRecords": Route.HERE,
    "Play": Route.SEAT,  # the table its first message opens
}
SERVICE = copas_pb2.DESCRIPTOR.services_by_name["CopasService"]
# The answers that seat a player or name a table: they tell the client the public address of
# the table's owner (x-copas-owner), for it to call that node directly from then on.
TELLS_OWNER = frozenset({"CreateTable", "JoinTable", "Rematch", "GetTable", "WatchTable",
                         "Play"})


ADMIN_ROUTES: dict[str, Route] = {
    "ListTables": Route.HERE,  # (the servicer asks every node)
    "GetTable": Route.TABLE,
    "CloseTable": Route.TABLE,
    "RemovePlayer": Route.TABLE,
    "Drain": Route.HERE,  # this node's: never relayed
    "Undrain": Route.HERE,
    "ServerStatus": Route.HERE,
    "FindAccount": Route.HERE,  # accounts: in the store every node reads
    "RenameAccount": Route.HERE,
    "RevokeSessions": Route.HERE,
    "BanAccount": Route.HERE,  # (this node's seats now; the others' sweeps find the rest)
    "DeleteAccount": Route.HERE,
    # championships: in the store every node reads (the answering node brings the tables it
    # holds in line at once, every other node its own at its driver's next pass: a cancel
    # closes them, a pause holds them, a disqualified player leaves)
    "CreateChampionship": Route.HERE,
    "StartChampionship": Route.HERE,
    "CancelChampionship": Route.HERE,
    "RemoveChampionshipPlayer": Route.HERE,
    "PauseChampionship": Route.HERE,
    "CorrectChampionshipResult": Route.HERE,
    "DisqualifyChampionshipPlayer": Route.HERE,
    "ReseatChampionshipRound": Route.HERE,
}
ADMIN_SERVICE = admin_pb2.DESCRIPTOR.services_by_name["AdminService"]


def missing_routes(service: ServiceDescriptor = SERVICE,
                   routes: dict[str, Route] = ROUTES) -> list[str]:
    """Methods of the service that its route table does not name."""
    return sorted(m.name for m in service.methods if m.name not in routes)


@dataclass
class _Known:
    owner: Owner | None  # None: no such table (a short negative entry)
    until: float


class Router:
    """Where each call goes, in a cluster."""

    def __init__(self, registry: TableRegistry, queries: ClusterQueries, lease: Lease,
                 takeovers: Takeovers, lookups_per_second: float = 200.0) -> None:
        missing = missing_routes()
        if missing:
            raise RuntimeError(f"no route for {', '.join(missing)} (server.cluster.routing)")
        self._registry = registry
        self._queries = queries
        self._lease = lease
        self._takeovers = takeovers
        self._me = queries.node.node_id
        self._here_told = Destination(None, queries.node.public_address)  # ours: call us
        self._owners: OrderedDict[str, _Known] = OrderedDict()  # table -> owner, as last read
        self._reading: dict[str, asyncio.Future[Owner | None]] = {}
        self._token_tables: OrderedDict[str, str] = OrderedDict()  # token hash -> table
        # Tokens the database did not know, and until when that is believed.
        self._unknown_tokens: OrderedDict[str, float] = OrderedDict()
        self._rate = lookups_per_second  # database reads of owners and tokens' tables
        self._budget = lookups_per_second
        self._budget_at = time.monotonic()
        self.lookups_read = 0  # database reads done
        self.lookups_shed = 0  # lookups refused for want of budget

    def spend_lookup(self) -> None:
        """One database read from the node's budget, or RATE_LIMITED at once."""
        if self._rate <= 0:  # no limit
            self.lookups_read += 1
            return
        now = time.monotonic()
        self._budget = min(self._rate, self._budget + (now - self._budget_at) * self._rate)
        self._budget_at = now
        if self._budget < 1:
            self.lookups_shed += 1
            raise ServiceError.over_quota(
                "this node is looking up too many tables right now: retry after the delay",
                "RATE_LIMITED", "table lookups on this node",
                (1 - self._budget) / self._rate)
        self._budget -= 1
        self.lookups_read += 1

    async def route(self, method: str, table_id: str, token_hash: str | None,
                    relayed: bool) -> Destination:
        """Where to serve the call: relayed to the table's owner, or here (where the table
        is held, or made, or nobody has it and the service answers NOT_FOUND); with the
        owner's public address to tell the client, for the methods that tell it.

        :raises ServiceError: TABLE_MOVED while the table moves between nodes (with the
            new owner's address when it is known).
        """
        route = ROUTES[method]
        if route is Route.HERE and not table_id:  # (a table: the one a retry or match found)
            return self._here_told if method in TELLS_OWNER else HERE
        found = await self._locate(table_id, token_hash if route is Route.SEAT else None,
                                   relayed)
        if method not in TELLS_OWNER:
            return HERE if found.relay_to is None else Destination(found.relay_to)
        if found is HERE and not table_id and method == "JoinTable":
            return self._here_told  # a quick match seats here
        return found

    async def _locate(self, table_id: str, token_hash: str | None,
                      relayed: bool) -> Destination:
        registry = self._registry
        if table_id and registry.holds(table_id):
            self._lease.check()
            return self._here_told
        if not table_id and token_hash is not None:
            if registry.is_valid_token(token_hash):
                self._lease.check()
                return self._here_told
            table_id = await self._table_of_token(token_hash)
            if registry.holds(table_id):
                self._lease.check()
                return self._here_told
        if not table_id:
            return HERE
        owner = await self._owner(table_id)
        if owner is None or owner.node_id == self._me:
            return HERE  # nobody's, or ours and not served: quarantined (the service says so)
        if not owner.is_alive:
            self._lease.check()
            if await self._takeovers.claim(table_id):  # its owner is gone: ours now
                self.forget_owner(table_id)
                return self._here_told
            self.forget_owner(table_id)  # another node claimed it first: ask again
            owner = await self._owner(table_id)
            if owner is None:
                return HERE
        if owner.is_alive and owner.node_id != self._me and not relayed:
            return Destination(owner.address, owner.public_address)
        self.forget_owner(table_id)
        raise ServiceError.table_moved(
            "the table is moving between nodes",
            owner.public_address if owner.is_alive and owner.node_id != self._me else "")

    async def _table_of_token(self, token_hash: str) -> str:
        table_id = self._token_tables.get(token_hash, "")
        if table_id:
            return table_id
        unknown_until = self._unknown_tokens.get(token_hash)
        if unknown_until is not None and unknown_until > time.monotonic():
            return ""  # read a moment ago and not found: not read again
        self.spend_lookup()
        found = await asyncio.to_thread(self._queries.table_of_token, token_hash)
        if found is None:
            self._unknown_tokens[token_hash] = time.monotonic() + UNKNOWN_SECONDS
            self._unknown_tokens.move_to_end(token_hash)
            while len(self._unknown_tokens) > OWNER_CACHE:
                self._unknown_tokens.popitem(last=False)
            return ""
        self._token_tables[token_hash] = found[0]  # a token never changes table
        while len(self._token_tables) > OWNER_CACHE:
            self._token_tables.popitem(last=False)
        return found[0]

    async def _owner(self, table_id: str) -> Owner | None:
        """The table's owner as last read (kept until a relay to it fails, or for at most
        OWNER_SECONDS); one database read at a time per table however many calls ask."""
        known = self._owners.get(table_id)
        if known is not None and known.until > time.monotonic():
            return known.owner
        pending = self._reading.get(table_id)
        if pending is not None:
            return await asyncio.shield(pending)
        self.spend_lookup()
        pending = asyncio.ensure_future(asyncio.to_thread(self._queries.owner_of, table_id))
        self._reading[table_id] = pending
        try:
            owner = await asyncio.shield(pending)
        finally:
            del self._reading[table_id]
        self._owners[table_id] = _Known(owner, time.monotonic() + (
            UNKNOWN_SECONDS if owner is None else OWNER_SECONDS if owner.is_alive else 0.2))
        self._owners.move_to_end(table_id)
        while len(self._owners) > OWNER_CACHE:
            self._owners.popitem(last=False)
        return owner

    def forget_owner(self, table_id: str) -> None:
        """What we knew of the table's owner is stale (a relay to it failed)."""
        self._owners.pop(table_id, None)

    def remembered(self) -> int:
        """Owners and tokens' tables held in memory (bounded by OWNER_CACHE each)."""
        return len(self._owners) + len(self._token_tables) + len(self._unknown_tokens)



class AdminRouter:
    """Where an operator's call goes: one about a table to the table's owner, by GetTable's
    rules (the owner is not told: an operator's tools call any node), the rest here."""

    def __init__(self, router: Router) -> None:
        missing = missing_routes(ADMIN_SERVICE, ADMIN_ROUTES)
        if missing:
            raise RuntimeError(f"no admin route for {', '.join(missing)} "
                               "(server.cluster.routing)")
        self._router = router

    async def route(self, method: str, table_id: str, token_hash: str | None,
                    relayed: bool) -> Destination:
        if ADMIN_ROUTES[method] is Route.HERE:
            return HERE
        found = await self._router.route("GetTable", table_id, None, relayed)
        return HERE if found.relay_to is None else Destination(found.relay_to)
