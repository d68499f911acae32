"""The admin service in a cluster (two nodes on a real PostgreSQL): each node answers for
both, a call about a table goes to its owner, and a drained node hands its tables to the other
at once while their players carry on."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import grpc
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import copas_pb2, copas_pb2_grpc

from clients.common import error_reason
from tests.helpers.calls import Watch, auth, join_all, new_table
from tests.helpers.servers import config_for_tests, fresh_database

TOKEN = "operator-0123456789-abcdefghij"
OPERATOR = auth(TOKEN)
T = TypeVar("T")


async def retried(make: Callable[[], Awaitable[T]], within: float = 10.0) -> T:
    """A call retried while it is refused with TABLE_MOVED, as a client does (a node may
    still remember the old owner once)."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        try:
            return await make()
        except grpc.aio.AioRpcError as error:
            if error_reason(error) != "TABLE_MOVED" \
                    or asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def node(dsn: str, node_id: str, token_file: Path) -> AsyncIterator[
        tuple[Any, copas_pb2_grpc.CopasServiceStub, admin_pb2_grpc.AdminServiceStub]]:
    from server.main import shutdown, start

    running = await start(config_for_tests(database=dsn, node_id=node_id, lease=2.0,
                                           admin_token_file=str(token_file),
                                           allow_seed=True))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            yield (running, copas_pb2_grpc.CopasServiceStub(channel),
                   admin_pb2_grpc.AdminServiceStub(channel))
    finally:
        await shutdown(running, 0)


async def test_each_node_answers_for_the_cluster_and_a_drain_hands_tables_over(
        postgres: Any, tmp_path: Path) -> None:
    token_file = tmp_path / "admin-token"
    token_file.write_text(TOKEN + "\n")
    dsn = fresh_database(postgres.dsn)
    async with node(dsn, "a", token_file) as (_, stub_a, admin_a), \
            node(dsn, "b", token_file) as (_, stub_b, admin_b):
        table = await new_table(stub_a, seed="11")
        joined = await join_all(stub_a, table.table_id, 4)
        mine = await new_table(stub_b, seed="12")
        # Both nodes list both tables, each with its owner.
        for admin in (admin_a, admin_b):
            listed = await admin.ListTables(admin_pb2.ListTablesRequest(), metadata=OPERATOR)
            owners = {t.table_id: t.owner_node for t in listed.tables}
            assert owners == {table.table_id: "a", mine.table_id: "b"}
        # A call about a table is answered by its owner, through either node.
        one = await admin_b.GetTable(admin_pb2.GetTableRequest(table_id=table.table_id),
                                     metadata=OPERATOR)
        assert one.table.owner_node == "a"
        assert [s.display_name for s in one.table.seats] == ["P0", "P1", "P2", "P3"]
        watch = Watch(stub_a, table.table_id, joined[0].player_token)
        await watch.opened()
        drained = await admin_a.Drain(admin_pb2.DrainRequest(), metadata=OPERATOR)
        assert drained.is_draining and drained.tables_handed_over == 1
        assert drained.games_running == 0
        await watch.task  # the stream on the drained node ends: the table moved
        assert watch.error is not None and error_reason(watch.error) == "TABLE_MOVED"
        # The other node takes it at once when asked, and the game carries on there.
        moved = await retried(lambda: admin_b.GetTable(admin_pb2.GetTableRequest(
            table_id=table.table_id), metadata=OPERATOR))
        assert moved.table.owner_node == "b"
        assert moved.table.phase == copas_pb2.PHASE_PASSING
        view = (await stub_b.GetView(copas_pb2.GetViewRequest(table_id=table.table_id),
                                     metadata=auth(joined[0].player_token))).view
        await stub_b.PassCards(copas_pb2.PassCardsRequest(
            table_id=table.table_id, cards=list(view.hand[:3])),
            metadata=auth(joined[0].player_token))
        # Through the drained node the player still reaches the table (relayed to b).
        again = (await retried(lambda: stub_a.GetView(copas_pb2.GetViewRequest(
            table_id=table.table_id), metadata=auth(joined[0].player_token)))).view
        assert len(again.pass_choice) == 3  # the pass made through b
        try:
            await stub_a.CreateTable(copas_pb2.CreateTableRequest(preset="online"))
            raise AssertionError("a draining node made a table")
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.UNAVAILABLE
            assert error_reason(error) == "NODE_DRAINING"
        status = await admin_a.ServerStatus(admin_pb2.ServerStatusRequest(), metadata=OPERATOR)
        assert status.is_draining and status.node_id == "a"
        assert status.tables["playing"] == 0 and status.lease_state == "held"
        # Closing it through the drained node ends it at its new owner.
        closed = await admin_a.CloseTable(admin_pb2.CloseTableRequest(
            table_id=table.table_id, reason="maintenance"), metadata=OPERATOR)
        assert closed.table.owner_node == "b" and closed.record_id == table.table_id
        record = (await stub_a.GetGameRecord(copas_pb2.GetGameRecordRequest(
            record_id=table.table_id))).record
        assert record.end_reason == copas_pb2.GAME_END_REASON_CLOSED
        await admin_a.Undrain(admin_pb2.UndrainRequest(), metadata=OPERATOR)
        made = await stub_a.CreateTable(copas_pb2.CreateTableRequest(preset="online"))
        assert made.table.table_id


async def test_a_listing_names_a_node_that_does_not_answer_and_the_key_alone_opens_nothing(
        postgres: Any, tmp_path: Path) -> None:
    import psycopg

    token_file = tmp_path / "admin-token"
    token_file.write_text(TOKEN + "\n")
    dsn = fresh_database(postgres.dsn)

    async def silent(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)  # takes the connection, never speaks HTTP/2
        writer.close()
    ghost = await asyncio.start_server(silent, "127.0.0.1", 0)
    ghost_port = ghost.sockets[0].getsockname()[1]
    async with node(dsn, "a", token_file) as (running, stub_a, admin_a):
        table = await new_table(stub_a, seed="13")
        with psycopg.connect(dsn, autocommit=True) as db:  # a node frozen with a live lease
            db.execute("INSERT INTO nodes (node_id, address, lease_until) VALUES "
                       "('ghost', %s, now() + interval '1 hour')", (f"127.0.0.1:{ghost_port}",))
            key = db.execute("SELECT value FROM copas WHERE key = 'cluster_key'").fetchone()[0]
        started = asyncio.get_running_loop().time()
        listed = await admin_a.ListTables(admin_pb2.ListTablesRequest(), metadata=OPERATOR)
        took = asyncio.get_running_loop().time() - started
        assert [t.table_id for t in listed.tables] == [table.table_id]
        assert list(listed.unreachable_nodes) == ["ghost"]
        assert took < 5  # the relay's deadline (half the 2 s lease), not the client's
        # The cluster key and a hop mark are no operator's credential, on either port.
        for port in (running.port, running.internal_port):
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                admin = admin_pb2_grpc.AdminServiceStub(channel)
                for method, request in ((admin.ServerStatus, admin_pb2.ServerStatusRequest()),
                                        (admin.ListTables, admin_pb2.ListTablesRequest())):
                    try:
                        await method(request, metadata=(
                            ("x-copas-cluster-key", key), ("x-copas-hops", "1"),
                            ("x-copas-admin-by", "intruder")))
                        raise AssertionError(f"the cluster key opened {port}")
                    except grpc.aio.AioRpcError as error:
                        assert error_reason(error) == "ADMIN_CREDENTIAL_REQUIRED", port
    ghost.close()
