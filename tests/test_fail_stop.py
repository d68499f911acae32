"""A node that fail-stops answers every call in flight with its reason: UNAVAILABLE
STORAGE_FAILED (a relayed call: TABLE_MOVED), never a bare CANCELLED or grpc's own
"Cancelling all calls" at the end of the stop's grace. That holds for a call waiting on a
database read on a thread that does not return, a unary call waiting on its commit, a Play
stream and a WatchTable stream. A call that comes after the failure is refused at once, and
one that comes during the stop when the stop has answered the others."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from copas.v1 import copas_pb2, copas_pb2_grpc

from clients.common import error_reason
from engine import Game
from server.accounts.build import build_accounts
from server.accounts.model import MemoryAccountStore
from server.cluster.destination import Destination
from server.errors import ServiceError
from server.main import FAIL_STOP_GRACE, start
from server.observability import Metrics
from server.rpc.gateway import CallsInFlight, Context, Gateway, service_handlers
from server.rpc.peers import PeerTrust
from server.rpc.quotas import Quotas
from server.rpc.service import CopasService
from server.tables.clock import ManualScheduler
from server.tables.records import Records
from tests.helpers.calls import PlayStream, Watch, auth, card_pb, join_all, new_table
from tests.helpers.games import rules_of
from tests.helpers.servers import config_for_tests, registry_for_tests


async def answered(call: Any) -> grpc.aio.AioRpcError:
    """The refusal a call ends with (it must end with one)."""
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await asyncio.wait_for(call, 30)
    return refused.value


def said(error: grpc.aio.AioRpcError | None) -> tuple[str, str]:
    assert error is not None
    return error.code().name, error_reason(error)


async def test_a_fail_stop_answers_every_call_in_flight_with_storage_failed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    running = await start(config_for_tests(allow_seed=True, data_dir=str(tmp_path)))
    release_read = threading.Event()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            table = await new_table(stub, seed="42")
            joins = await join_all(stub, table.table_id, 4)
            tokens = {j.seat: j.player_token for j in joins}
            watch = Watch(stub, table.table_id, tokens[1])
            play = PlayStream(stub, table.table_id, tokens[2])
            await watch.opened()
            await play.wait_event(lambda e: True)
            # A read of the records on a thread that does not return (a database away).
            reading = threading.Event()

            def stalled_page(size: int, token: str) -> Any:
                reading.set()
                release_read.wait(60)
                raise sqlite3.OperationalError("the read never came back")

            monkeypatch.setattr(running.records, "page", stalled_page)
            listing = asyncio.ensure_future(stub.ListGameRecords(
                copas_pb2.ListGameRecordsRequest()))
            await asyncio.to_thread(reading.wait, 10)
            # Fault injection: the store's commit waits, then meets a full disk.
            committing, fail_commit = threading.Event(), threading.Event()

            def disk_full(batch: Any) -> None:
                committing.set()
                fail_commit.wait(10)
                raise sqlite3.OperationalError("database or disk is full")

            running.store._commit = disk_full  # type: ignore[method-assign]
            seat = joins[0].seat
            cards = Game(rules_of(table), "42").auto_action(seat).cards  # type: ignore[union-attr]
            passing = asyncio.ensure_future(stub.PassCards(copas_pb2.PassCardsRequest(
                table_id=table.table_id, cards=[card_pb(c) for c in cards]),
                metadata=auth(tokens[seat])))
            await asyncio.to_thread(committing.wait, 10)
            fail_commit.set()
            await asyncio.wait_for(running.failed.wait(), 10)
            # After the failure a new call is refused at once, a read like the stalled one too.
            assert said(await answered(stub.ListGameRecords(
                copas_pb2.ListGameRecordsRequest()))) == ("UNAVAILABLE", "STORAGE_FAILED")
            stopping = asyncio.ensure_future(running.stop_failed(FAIL_STOP_GRACE))
            while not running.calls.is_holding:  # the stop waits for the stalled read
                await asyncio.sleep(0.01)
            during = asyncio.ensure_future(stub.GetView(
                copas_pb2.GetViewRequest(table_id=table.table_id), metadata=auth(tokens[3])))
            await asyncio.wait_for(stopping, 30)
            assert said(await answered(during)) == ("UNAVAILABLE", "STORAGE_FAILED")
            assert said(await answered(passing)) == ("UNAVAILABLE", "STORAGE_FAILED")
            assert said(await answered(listing)) == ("UNAVAILABLE", "STORAGE_FAILED")
            await asyncio.wait_for(asyncio.gather(watch.task, play.task), 10)
            assert said(watch.error) == ("UNAVAILABLE", "STORAGE_FAILED")
            assert said(play.error) == ("UNAVAILABLE", "STORAGE_FAILED")
    finally:
        release_read.set()
        await running.stop(0)


class StalledRouter:
    """A router whose every owner lookup waits on a thread that does not return, but for
    the table it knows is another node's."""

    def __init__(self, release: threading.Event, elsewhere: str, expected: int) -> None:
        self.release, self.elsewhere, self.expected = release, elsewhere, expected
        self.lookups = 0
        self.looking = asyncio.Event()  # the expected lookups are all waiting

    async def route(self, method: str, table_id: str, token_hash: str | None,
                    relayed: bool) -> Destination:
        if table_id == self.elsewhere:
            return Destination("b:1")
        self.lookups += 1
        if self.lookups == self.expected:
            self.looking.set()
        await asyncio.to_thread(self.release.wait, 60)
        raise RuntimeError("the lookup never came back")


class StalledForwarder:
    """An owner that takes every relayed call and never answers it."""

    def __init__(self) -> None:
        self.relaying = asyncio.Event()

    async def _never(self) -> None:
        self.relaying.set()
        await asyncio.Event().wait()

    async def unary(self, address: str, table_id: str, path: str, raw: bytes,
                    context: Context, client: str) -> bytes:
        await self._never()
        return b""

    async def stream(self, address: str, table_id: str, path: str, raw: bytes,
                     context: Context, client: str) -> int:
        await self._never()
        return 0

    async def bidi(self, address: str, table_id: str, path: str, first: bytes,
                   rest: AsyncIterator[bytes], context: Context, client: str) -> int:
        await self._never()
        return 0


async def test_a_fail_stop_answers_a_stalled_lookup_and_a_relayed_call_with_their_reasons(
        ) -> None:
    """The gateway of a cluster node: a call whose owner lookup waits on a database thread
    gets STORAGE_FAILED, a call relayed to an owner that does not answer TABLE_MOVED; the
    stop of the server after them has no call left to cancel."""
    registry: Any = registry_for_tests(ManualScheduler())
    config = config_for_tests()
    quotas = Quotas(config)
    service = CopasService(registry, registry.lobby,
                           Records(registry.store, registry.scheduler, 0, 0.0), quotas,
                           build_accounts(config, MemoryAccountStore()))
    release = threading.Event()
    router, forwarder, calls = StalledRouter(release, "t-b", 2), StalledForwarder(), CallsInFlight()
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    Gateway(Metrics(), quotas, registry.is_valid_token, PeerTrust(None, ()), router,
            forwarder, calls=calls).install(server, service_handlers(
                copas_pb2_grpc.add_CopasServiceServicer_to_server, service))
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            looking = asyncio.ensure_future(stub.GetTable(
                copas_pb2.GetTableRequest(table_id="t-a")))
            relayed = asyncio.ensure_future(stub.GetTable(
                copas_pb2.GetTableRequest(table_id="t-b")))
            watching = stub.WatchTable(copas_pb2.WatchTableRequest(table_id="t-a"))
            await asyncio.wait_for(asyncio.gather(router.looking.wait(),
                                                  forwarder.relaying.wait()), 10)
            assert calls.count() == 3
            calls.refuse(ServiceError.storage_failed())
            assert await calls.end_all(0.0, 0.0) == 3
            assert said(await answered(looking)) == ("UNAVAILABLE", "STORAGE_FAILED")
            assert said(await answered(relayed)) == ("UNAVAILABLE", "TABLE_MOVED")
            assert said(await answered(watching.read())) == ("UNAVAILABLE", "STORAGE_FAILED")
            assert said(await answered(stub.GetTable(copas_pb2.GetTableRequest(
                table_id="t-b")))) == ("UNAVAILABLE", "STORAGE_FAILED")  # refused at once
            assert calls.count() == 0
    finally:
        release.set()
        await server.stop(None)
