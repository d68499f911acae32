"""Routing, takeovers and the admin's cluster paths on a shared database in memory
(``tests.helpers.fake_cluster``): no PostgreSQL, no second process. The real-database tests
(tests/test_cluster*.py) check the same behaviour end to end."""

from __future__ import annotations

import time
from typing import Any

import grpc
import pytest
import structlog
import structlog.testing
from copas.v1 import copas_pb2, copas_pb2_grpc

from clients.common import error_reason
from engine import Rules
from server.accounts.build import build_accounts
from server.accounts.model import MemoryAccountStore
from server.cluster.admin import ClusterAdmin
from server.cluster.destination import HERE, Destination
from server.cluster.keys import ClusterKeys
from server.cluster.ownership import Lease, Takeovers
from server.cluster.routing import AdminRouter, Router
from server.observability import Metrics
from server.rpc.gateway import Gateway, service_handlers
from server.rpc.peers import PeerTrust
from server.rpc.quotas import Quotas
from server.rpc.service import CopasService
from server.store.base import StoreUnreachable, TableMeta
from server.store.postgres import Node
from server.tables.clock import ManualScheduler
from server.tables.log_entries import LOG_FORMAT
from server.tables.records import Records
from tests.helpers.fake_cluster import FakeClusterQueries, FakeDatabase
from tests.helpers.servers import config_for_tests, registry_for_tests

META = TableMeta(name="t", preset="online", rules=Rules(), seed=1, bot_seats=0, order=1)
LEASE = 10.0


class Node_:
    """One node on the fake database: its registry, lease, takeovers and router."""

    def __init__(self, db: FakeDatabase, node_id: str, log_format: int = LOG_FORMAT) -> None:
        self.queries = FakeClusterQueries(db, Node(node_id, f"{node_id}:1", LEASE,
                                                   f"{node_id}.public:443",
                                                   log_format=log_format))
        self.registry: Any = registry_for_tests(ManualScheduler())
        self.lease = Lease(self.queries)
        self.takeovers = Takeovers(self.registry, self.queries, self.lease)
        self.router = Router(self.registry, self.queries, self.lease, self.takeovers, 0)
        self.queries.heartbeat()
        self.lease.extend(time.monotonic() + 60)


async def test_a_call_for_another_live_nodes_table_is_relayed_to_its_owner() -> None:
    db = FakeDatabase()
    a, b = Node_(db, "a"), Node_(db, "b")
    db.add_table("t1", "b", META)
    found = await a.router.route("GetTable", "t1", None, False)
    assert found == Destination("b:1", "b.public:443")
    assert await a.router.route("PlayCard", "t1", None, False) == Destination("b:1")
    # Relayed once already: never again (the owner is moving), TABLE_MOVED naming it.
    with pytest.raises(Exception, match="moving") as refused:
        await a.router.route("GetTable", "t1", None, True)
    assert getattr(refused.value, "reason", "") == "TABLE_MOVED"
    assert not b.registry.holds("t1")  # b was only named: nothing claimed


async def test_an_operators_call_about_a_table_goes_to_its_owner_and_no_other_is_relayed(
        ) -> None:
    db = FakeDatabase()
    a, _ = Node_(db, "a"), Node_(db, "b")
    db.add_table("t1", "b", META)
    admin = AdminRouter(a.router)
    for method in ("GetTable", "CloseTable", "RemovePlayer"):  # the owner is not told
        assert await admin.route(method, "t1", None, False) == Destination("b:1"), method
    for method in ("ListTables", "Drain", "Undrain", "ServerStatus"):
        assert await admin.route(method, "t1", None, False) == HERE, method
    with pytest.raises(Exception, match="moving"):  # relayed once already: never again
        await admin.route("CloseTable", "t1", None, True)


async def test_a_table_whose_owners_lease_lapsed_is_claimed_and_served_here() -> None:
    db = FakeDatabase()
    a, b = Node_(db, "a"), Node_(db, "b")
    db.add_table("t1", "b", META)
    db.advance(LEASE + 1)  # b stopped renewing
    a.queries.heartbeat()
    found = await a.router.route("GetTable", "t1", None, False)
    assert found == Destination(None, "a.public:443")  # here now, and the client is told
    assert a.registry.holds("t1") and a.takeovers.taken_over == 1
    assert (db.tables["t1"].owner, db.tables["t1"].epoch) == ("a", 2)
    assert a.queries.held() == {"t1": 2}
    # Held here: routed here without asking the database again.
    reads = a.queries.reads
    assert await a.router.route("GetTable", "t1", None, False) == found
    assert a.queries.reads == reads
    assert b.queries.epochs_of(["t1"]) == {"t1": ("a", 2)}


async def test_a_drain_hands_every_table_over_and_takes_none() -> None:
    db = FakeDatabase()
    a, b = Node_(db, "a"), Node_(db, "b")
    db.add_table("t1", "b", META)
    db.add_table("t2", None, META, created=2.0)  # nobody's
    db.advance(LEASE + 1)
    a.queries.heartbeat()
    assert await a.takeovers.take_over_orphans() == 2  # b's lease lapsed: a sweeps both
    b.queries.heartbeat()  # b is back, to take them
    admin = ClusterAdmin(a.queries, a.lease, a.router, a.takeovers, ClusterKeys("key-1"),
                         answer_within=0.2)
    try:
        a.registry.set_draining(True)  # (as the admin service's Drain does, first)
        assert await admin.drain() == 2
    finally:
        await admin.close()
    assert not list(a.registry.live()) and a.queries.held() == {}
    assert all(row.owner is None for row in db.tables.values())
    assert await a.takeovers.claim("t1") is False  # a draining node claims nothing
    a.registry.set_draining(False)  # undrained: it may claim again
    assert await a.takeovers.claim("t1") is True


async def test_a_table_a_newer_node_wrote_is_left_to_it_and_the_operator_told_once() -> None:
    """Mid-roll: the tables of a dead node of a newer log format are not claimed (for a call
    the player is told to retry: TABLE_MOVED), and the operator is told, once per table,
    and once per node of another format (an older one only while it lives)."""
    db = FakeDatabase()
    older, a = Node_(db, "older", 1), Node_(db, "a")
    Node_(db, "newer", LOG_FORMAT + 1)  # (registered: its lease runs out below)
    db.add_table("t1", "newer", META).log_format = LOG_FORMAT + 1
    db.add_table("t2", "newer", META, created=2.0)  # nothing newer written to it yet
    db.advance(LEASE + 1)  # the newer node died; the older one renews
    older.queries.heartbeat()
    a.queries.heartbeat()
    with structlog.testing.capture_logs() as logs:
        await a.takeovers.compare_formats()
        for _ in range(2):  # a call, and again: TABLE_MOVED (retry)
            with pytest.raises(Exception, match="moving") as refused:
                await a.router.route("GetView", "t1", None, False)
            assert getattr(refused.value, "reason", "") == "TABLE_MOVED"
        assert await a.takeovers.take_over_orphans() == 1  # t2 only
        await a.takeovers.tell_unreadable()
        await a.takeovers.compare_formats()
    assert (db.tables["t1"].owner, db.tables["t1"].epoch) == ("newer", 1)
    assert db.tables["t2"].owner == "a" and not a.registry.holds("t1")
    told = [(e["event"], e.get("node_id", e.get("table_id"))) for e in logs
            if e["log_level"] == "warning"]
    assert told == [("node_runs_older_copas", "older"), ("node_runs_newer_copas", "newer"),
                    ("table_left_to_a_newer_node", "t1")], told
    db.advance(LEASE + 1)  # the older node stops too; a renews: nothing more to tell
    a.queries.heartbeat()
    with structlog.testing.capture_logs() as logs:
        await a.takeovers.compare_formats()
    assert logs == []


async def test_an_unreachable_database_refuses_the_call_with_storage_failed() -> None:
    db = FakeDatabase()
    a = Node_(db, "a")
    db.add_table("t1", "b", META)
    db.is_down = True
    with pytest.raises(StoreUnreachable):
        await a.router.route("GetTable", "t1", None, False)
    config = config_for_tests()
    quotas = Quotas(config)
    service = CopasService(a.registry, a.registry.lobby,
                           Records(a.registry.store, a.registry.scheduler, 0, 0.0), quotas,
                           build_accounts(config, MemoryAccountStore()))
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    Gateway(Metrics(), quotas, a.registry.is_valid_token, PeerTrust(None, ()),
            a.router).install(server, service_handlers(
                copas_pb2_grpc.add_CopasServiceServicer_to_server, service))
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.GetTable(copas_pb2.GetTableRequest(table_id="t1"))
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            assert error_reason(refused.value) == "STORAGE_FAILED"
            db.is_down = False  # back: b never held a lease, so the table is claimed here
            table = await stub.GetTable(copas_pb2.GetTableRequest(table_id="t1"))
            assert table.table.table_id == "t1" and a.registry.holds("t1")
    finally:
        await server.stop(None)
