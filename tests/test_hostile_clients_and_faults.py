"""Hostile and unlucky clients, each finding of the security review as a test (real server
on loopback). Each of these failed on the server before the review's fixes."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from copas.v1 import cards_pb2, copas_pb2, copas_pb2_grpc
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from engine import Game
from server.main import SetupError, shutdown, start
from server.store import PgStore
from tests.helpers.calls import Watch, auth, card_pb, is_over, join_all, new_table
from tests.helpers.games import rules_of
from tests.helpers.servers import (
    ServerProcess,
    config_for_tests,
    delete_rows,
    free_port,
    run_server,
    serving,
    store_rows,
)

ROOT = Path(__file__).resolve().parent.parent


def details(error: grpc.aio.AioRpcError) -> dict[str, Any]:
    """The status details by kind: ErrorInfo reason, QuotaFailure, RetryInfo."""
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None, "no rich status"
    found: dict[str, Any] = {}
    for detail in status.details:
        for kind in (error_details_pb2.ErrorInfo, error_details_pb2.QuotaFailure,
                     error_details_pb2.RetryInfo):
            message = kind()
            if detail.Unpack(message):
                found[kind.__name__] = message
    return found


async def refused(call: Awaitable[Any], code: grpc.StatusCode, reason: str | None = None
                  ) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    assert err.value.code() == code, (err.value.code(), err.value.details())
    if reason is not None:
        assert details(err.value)["ErrorInfo"].reason == reason
    return err.value


async def eventually(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait for a server-side timer's effect (it may run late on a busy machine)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.02)


async def health_answers_quickly(port: int, rounds: int = 20) -> float:
    """The slowest of ``rounds`` health checks, all answered while a game is being played (a
    loop held by a whole game answered none until the game was over). The slowest is a
    figure of this machine, printed, not a check: a busy machine is no failure of the code."""
    slowest = 0.0
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for _ in range(rounds):
            began = time.perf_counter()
            answer = await health.Check(health_pb2.HealthCheckRequest(), timeout=10)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
            slowest = max(slowest, time.perf_counter() - began)
            await asyncio.sleep(0.01)
    return slowest


# ---------------------------------------------------------------- 1. streams and tokens


async def test_a_vacated_seats_stream_ends_and_never_carries_the_next_occupants_cards() -> None:
    async with serving(allow_seed=True) as (_, stub):
        table = await new_table(stub, seed="1")
        first = (await join_all(stub, table.table_id, 1))[0]
        stale = Watch(stub, table.table_id, first.player_token)
        await stale.wait_for(lambda m: m.WhichOneof("kind") == "snapshot")
        await stub.LeaveTable(copas_pb2.LeaveTableRequest(table_id=table.table_id),
                              metadata=auth(first.player_token))
        await asyncio.wait_for(stale.task, 5)  # the stream of the given-up seat ends...
        assert stale.error is not None and stale.error.code() == grpc.StatusCode.UNAUTHENTICATED
        assert details(stale.error)["ErrorInfo"].reason == "TOKEN_REVOKED"
        # ...before anyone else can sit there; the new occupant's data never reaches it.
        others = await join_all(stub, table.table_id, 4)
        assert others[0].seat == first.seat
        mine = Watch(stub, table.table_id, others[0].player_token)
        started = await mine.wait_for(lambda m: len(m.view.hand) == 13)
        assert all(not m.view.hand for m in stale.messages)
        assert started.view.players[first.seat].is_connected
        summary = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=table.table_id))).table
        assert summary.seats[first.seat].is_connected
        await refused(stub.WatchTable(copas_pb2.WatchTableRequest(table_id=table.table_id),
                                      metadata=auth(first.player_token)).read(),
                      grpc.StatusCode.UNAUTHENTICATED)
        await mine.close()


# ---------------------------------------------------------------- 2. the event loop


async def test_no_call_plays_a_game_inside_the_event_loop() -> None:
    async with serving(allow_seed=True, bot_table_pace=0.0) as (running, stub):
        # Endless rules are refused...
        await refused(stub.CreateTable(copas_pb2.CreateTableRequest(
            bot_seats=4, rules=copas_pb2.RulesOverrides(
                max_hands=0, point_limit=1_000_000_000, trick_pause_seconds=0,
                hand_pause_seconds=0))), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_RULES")
        # ...and the longest allowed bot game runs in steps: the server keeps answering.
        table = await new_table(stub, seed="7", bots=4, max_hands=0, point_limit=1000)
        assert table.phase != copas_pb2.PHASE_GAME_OVER  # CreateTable did not play it
        slowest = await health_answers_quickly(running.port)
        print(f"slowest health check during a bot game: {slowest * 1000:.0f} ms")
        live = running.registry.get(table.table_id)
        assert live.game is not None and live.game.hand_number >= 1  # it is being played
        # The last person leaving a table of bots ends the game at once.
        other = await new_table(stub, seed="8", bots=3)
        join = (await join_all(stub, other.table_id, 1))[0]
        await stub.LeaveTable(copas_pb2.LeaveTableRequest(table_id=other.table_id),
                              metadata=auth(join.player_token))
        over = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=other.table_id))).table
        assert over.phase == copas_pb2.PHASE_GAME_OVER


def test_sigterm_stops_a_server_while_bot_tables_play(tmp_path: Path) -> None:
    with ServerProcess("--data-dir", str(tmp_path), "--bot-table-pace", "0",
                       "--trick-pause", "0", "--hand-pause", "0", "--grace", "1") as server:
        with grpc.insecure_channel(server.address) as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            for _ in range(5):
                stub.CreateTable(copas_pb2.CreateTableRequest(
                    bot_seats=4, rules=copas_pb2.RulesOverrides(max_hands=0, point_limit=1000)))
        assert server.stop() == 0


# ---------------------------------------------------------------- 3. storage failures


async def test_a_failed_commit_is_never_acknowledged_and_the_server_stops(tmp_path: Path) -> None:
    data = str(tmp_path)
    running = await start(config_for_tests(allow_seed=True, data_dir=data))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            table = await new_table(stub, seed="42")
            joins = await join_all(stub, table.table_id, 4)
            game = Game(rules_of(table), "42")
            seat = joins[0].seat
            cards = game.auto_action(seat).cards  # type: ignore[union-attr]
            store = running.store

            def disk_full(batch: Any) -> None:
                raise sqlite3.OperationalError("database or disk is full")

            # Fault injection: the store's commit meets a full disk.
            store._commit = disk_full  # type: ignore[method-assign]
            error = await refused(stub.PassCards(copas_pb2.PassCardsRequest(
                table_id=table.table_id, cards=[card_pb(c) for c in cards]),
                metadata=auth(joins[0].player_token)), grpc.StatusCode.UNAVAILABLE,
                "STORAGE_FAILED")
            assert "cannot rollback" not in (error.details() or "")
            await asyncio.wait_for(running.failed.wait(), 5)
            health = health_pb2_grpc.HealthStub(channel)
            assert (await health.Check(health_pb2.HealthCheckRequest())).status == \
                health_pb2.HealthCheckResponse.NOT_SERVING
            await refused(stub.GetTable(copas_pb2.GetTableRequest(table_id=table.table_id)),
                          grpc.StatusCode.UNAVAILABLE, "STORAGE_FAILED")
    finally:
        await shutdown(running, 0)
    # A restart recovers from the log: the pass was never made, so it can be made now.
    running = await start(config_for_tests(allow_seed=True, data_dir=data))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            watch = Watch(stub, table.table_id, joins[0].player_token)
            head = await watch.wait_for(lambda m: True)
            assert not head.view.players[seat].has_passed and len(head.view.hand) == 13
            await stub.PassCards(copas_pb2.PassCardsRequest(
                table_id=table.table_id, cards=[card_pb(c) for c in cards]),
                metadata=auth(joins[0].player_token))
            await watch.close()
    finally:
        await shutdown(running, 0)


def refused_start(data_dir: Path, *extra: str, read_only: bool = False
                  ) -> subprocess.CompletedProcess[str]:
    """Start the server on a data directory and expect it to refuse to start. With
    ``read_only`` the directory is read-only to it: a read-only bind mount in a mount
    namespace of its own when running as root (root writes through permissions), else
    permissions."""
    wrapper: tuple[str, ...] = ()
    if read_only and os.geteuid() == 0:
        wrapper = ("unshare", "--mount", "sh", "-c",
                   f'mount --bind -o ro "{data_dir}" "{data_dir}" && exec "$@"', "sh")
    return run_server("--data-dir", str(data_dir), *extra, wrapper=wrapper)


def crashed_data_dir(tmp_path: Path) -> Path:
    """A data directory as a crash leaves it: the database and its write-ahead log."""
    data = tmp_path / "crashed"
    server = ServerProcess("--data-dir", str(data))
    with grpc.insecure_channel(server.address) as channel:
        stub = copas_pb2_grpc.CopasServiceStub(channel)
        table = stub.CreateTable(copas_pb2.CreateTableRequest()).table
        stub.JoinTable(copas_pb2.JoinTableRequest(table_id=table.table_id, display_name="A"))
    server.kill9()
    assert (data / "copas.db-wal").exists()
    return data


def test_a_data_directory_that_cannot_be_written_stops_the_start(tmp_path: Path) -> None:
    data = crashed_data_dir(tmp_path)
    for path in (data, *data.iterdir()):
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        done = refused_start(data, read_only=True)
    finally:
        for path in (data, *data.iterdir()):
            path.chmod(0o755 if path.is_dir() else 0o644)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("copas-server: ")
    assert "Traceback" not in done.stderr and "listening" not in done.stdout


def test_a_damaged_store_stops_the_start_with_a_reason(tmp_path: Path) -> None:
    # The database emptied beside its write-ahead log.
    data = crashed_data_dir(tmp_path)
    (data / "copas.db").write_bytes(b"")
    done = refused_start(data)
    assert done.returncode == 2 and "write-ahead log" in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    # The write-ahead log of a crashed run deleted.
    data = crashed_data_dir(tmp_path / "b")
    (data / "copas.db-wal").unlink()
    done = refused_start(data)
    assert done.returncode == 2 and "did not stop cleanly" in done.stderr, done.stderr
    # Not a database at all.
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "copas.db").write_bytes(os.urandom(8192))
    done = refused_start(junk)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.sqlite_only
async def test_a_foreign_or_newer_database_is_refused(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    db = sqlite3.connect(foreign / "copas.db")
    db.execute("CREATE TABLE accounts (id INTEGER)")
    db.commit()
    db.close()
    with pytest.raises(SetupError, match="not a Copas database"):
        await start(config_for_tests(data_dir=str(foreign)))
    newer = tmp_path / "newer"
    running = await start(config_for_tests(data_dir=str(newer)))
    await shutdown(running, 0)
    db = sqlite3.connect(newer / "copas.db")
    db.execute("PRAGMA user_version = 99")
    db.commit()
    db.close()
    with pytest.raises(SetupError, match="schema version 99"):
        await start(config_for_tests(data_dir=str(newer)))
    # A second server on the same data directory is refused too.
    running = await start(config_for_tests(data_dir=str(tmp_path / "shared")))
    try:
        with pytest.raises(SetupError, match="another server"):
            await start(config_for_tests(data_dir=str(tmp_path / "shared")))
    finally:
        await shutdown(running, 0)


# ---------------------------------------------------------------- 4. pauses and leaves


async def test_leaving_during_a_trick_pause_does_not_freeze_the_table() -> None:
    async with serving(allow_seed=True) as (running, stub):
        table = await new_table(stub, seed="4", bots=2, trick_pause_seconds=0.3)
        joins = await join_all(stub, table.table_id, 2)
        tokens = {j.seat: j.player_token for j in joins}
        watch = Watch(stub, table.table_id, tokens[0])
        live = running.registry.get(table.table_id)
        while live.paused_until is None:  # play until the first trick's pause
            await asyncio.sleep(0.005)
            seat = next((s for s in tokens if live.game and s in live.game.to_act()), None)
            if seat is not None and live.paused_until is None:
                await act_automatically(stub, table.table_id, tokens[seat],
                                        live.game.auto_action(seat))  # type: ignore[union-attr]
        await stub.LeaveTable(copas_pb2.LeaveTableRequest(table_id=table.table_id),
                              metadata=auth(tokens[1]))
        await watch.wait_for(lambda m: m.WhichOneof("kind") == "pause_ended")
        # Play goes on: seat 0 is asked to act again and may.
        asked = await watch.wait_for(lambda m: 0 in m.view.to_act
                                     and not m.view.HasField("paused_until")
                                     and m.view.trick_number >= 1, timeout=10)
        assert asked.view.legal_cards
        await stub.PlayCard(copas_pb2.PlayCardRequest(
            table_id=table.table_id, card=asked.view.legal_cards[0]), metadata=auth(tokens[0]))
        await watch.close()


async def act_automatically(stub: Any, table_id: str, token: str, action: Any) -> None:
    """Send the engine's automatic choice for a seat as that player's request."""
    if hasattr(action, "cards"):
        await stub.PassCards(copas_pb2.PassCardsRequest(
            table_id=table_id, cards=[card_pb(c) for c in action.cards]), metadata=auth(token))
    else:
        await stub.PlayCard(copas_pb2.PlayCardRequest(table_id=table_id,
                                                      card=card_pb(action.card)),
                            metadata=auth(token))


# ---------------------------------------------------------------- 5. capacity


async def test_capacity_comes_back(tmp_path: Path) -> None:
    options = {"allow_seed": True, "max_tables": 2, "max_players": 2, "waiting_table_ttl": 0.3,
               "abandon_after": 0.5}
    async with serving(**options) as (running, stub):
        a = await new_table(stub)
        await new_table(stub)
        await refused(stub.CreateTable(copas_pb2.CreateTableRequest()),
                      grpc.StatusCode.RESOURCE_EXHAUSTED, "SERVER_FULL")
        # Seats: a given-up seat frees its player slot.
        first = (await join_all(stub, a.table_id, 2))
        await refused(stub.JoinTable(copas_pb2.JoinTableRequest(
            table_id=a.table_id, display_name="third")), grpc.StatusCode.RESOURCE_EXHAUSTED,
            "SERVER_FULL")
        await stub.LeaveTable(copas_pb2.LeaveTableRequest(table_id=a.table_id),
                              metadata=auth(first[1].player_token))
        await stub.JoinTable(copas_pb2.JoinTableRequest(table_id=a.table_id, display_name="C"))
        # Waiting tables nobody is at expire, and take their seats with them.
        await eventually(lambda: running.registry.open_tables == 0)
        await refused(stub.GetTable(copas_pb2.GetTableRequest(table_id=a.table_id)),
                      grpc.StatusCode.NOT_FOUND)
        assert running.registry.seated == 0
        # Finished tables do not count against --max-tables.
        done = await new_table(stub, seed="3", bots=4)
        watch = Watch(stub, done.table_id)
        await watch.wait_for(lambda m: m.view.phase == copas_pb2.PHASE_GAME_OVER)
        await watch.close()
        await new_table(stub)
        # A game whose people are silent with no time limits ends by the idle rule.
        silent = await new_table(stub, seed="5", bots=2, max_hands=0, point_limit=1000)
        await join_all(stub, silent.table_id, 2)
        live = running.registry.get(silent.table_id)
        await eventually(lambda: live.is_finished)
        over = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=silent.table_id))).table
        assert over.phase == copas_pb2.PHASE_GAME_OVER


async def test_waiting_tables_expire_after_a_restart_too(tmp_path: Path) -> None:
    running = await start(config_for_tests(data_dir=str(tmp_path)))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        stub = copas_pb2_grpc.CopasServiceStub(channel)
        table = (await stub.CreateTable(copas_pb2.CreateTableRequest())).table
    await shutdown(running, 0)
    running = await start(config_for_tests(data_dir=str(tmp_path), waiting_table_ttl=0.2))
    try:
        assert running.registry.holds(table.table_id)
        await eventually(lambda: not running.registry.holds(table.table_id))
    finally:
        await shutdown(running, 0)
    running = await start(config_for_tests(data_dir=str(tmp_path)))
    try:
        assert not running.registry.holds(table.table_id)  # its rows are gone too
    finally:
        await shutdown(running, 0)


# ---------------------------------------------------------------- 6. spectators


async def test_spectators_cannot_lock_players_out() -> None:
    async with serving(allow_seed=True, max_watchers_per_table=3) as (_, stub):
        table = await new_table(stub)
        join = (await join_all(stub, table.table_id, 1))[0]
        spectators = [Watch(stub, table.table_id) for _ in range(3)]
        for s in spectators:
            await s.wait_for(lambda m: True)
        await refused(stub.WatchTable(copas_pb2.WatchTableRequest(
            table_id=table.table_id)).read(), grpc.StatusCode.RESOURCE_EXHAUSTED,
            "TOO_MANY_WATCHERS")
        mine = Watch(stub, table.table_id, join.player_token)
        head = await mine.wait_for(lambda m: True)
        assert head.view.seat == join.seat
        for s in (*spectators, mine):
            await s.close()


# ---------------------------------------------------------------- 7. per-client quotas


async def test_quotas_per_token_and_per_peer_say_when_to_retry() -> None:
    async with serving(allow_seed=True, token_calls_per_second=5, token_calls_burst=5,
                       tables_per_minute=60, tables_burst=3, max_streams_per_peer=3,
                       quota_penalty=0.2) as (_, stub):
        table = await new_table(stub, seed="1")
        joins = await join_all(stub, table.table_id, 4)
        bad = copas_pb2.PlayCardRequest(table_id=table.table_id, card=card_pb("2C"))
        codes = []
        for _ in range(6):
            began = time.perf_counter()
            try:
                await stub.PlayCard(bad, metadata=auth(joins[0].player_token))
            except grpc.aio.AioRpcError as error:
                codes.append(error.code())
                last = error
        assert codes == [grpc.StatusCode.FAILED_PRECONDITION] * 5 + [
            grpc.StatusCode.RESOURCE_EXHAUSTED]
        assert time.perf_counter() - began >= 0.1  # over a quota, slowed (0.5..1.5 x penalty)
        found = details(last)
        assert found["ErrorInfo"].reason == "RATE_LIMITED"
        assert found["QuotaFailure"].violations[0].subject == "player token"
        assert found["RetryInfo"].retry_delay.ToTimedelta().total_seconds() > 0
        # Another player of the same table is not slowed by the first one's quota.
        await refused(stub.PlayCard(bad, metadata=auth(joins[1].player_token)),
                      grpc.StatusCode.FAILED_PRECONDITION)
        # Table creations per address (one was made above).
        await new_table(stub)
        await new_table(stub)
        await refused(stub.CreateTable(copas_pb2.CreateTableRequest()),
                      grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_TABLES")
        # Open streams per address.
        streams = [Watch(stub, table.table_id) for _ in range(3)]
        for s in streams:
            await s.wait_for(lambda m: True)
        await refused(stub.WatchTable(copas_pb2.WatchTableRequest(
            table_id=table.table_id)).read(), grpc.StatusCode.RESOURCE_EXHAUSTED,
            "TOO_MANY_STREAMS")
        await streams[0].close()
        again = Watch(stub, table.table_id)  # a closed stream gives its slot back
        await again.wait_for(lambda m: True)
        for s in (*streams[1:], again):
            await s.close()


def test_a_watcher_queue_is_bounded_in_bytes() -> None:
    from server.tables.fanout import Watcher

    watcher = Watcher(None, None, max_messages=1000, max_bytes=4096)
    assert watcher.push(1, b"x" * 3000)
    fell_behind = not watcher.push(2, b"y" * 3000)
    assert fell_behind and watcher.needs_snapshot
    assert watcher.queued_bytes == 0 and not watcher.queue


# ---------------------------------------------------------------- 9. bounded logs


async def test_connection_and_seat_churn_does_not_grow_the_log(tmp_path: Path) -> None:
    running = await start(config_for_tests(allow_seed=True, data_dir=str(tmp_path)))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            table = await new_table(stub)
            join = (await join_all(stub, table.table_id, 1))[0]
            for _ in range(100):  # a player's stream opens and closes
                call = stub.WatchTable(copas_pb2.WatchTableRequest(table_id=table.table_id),
                                       metadata=auth(join.player_token))
                await call.read()
                call.cancel()
            for i in range(100):  # strangers take a seat and give it up
                other = await stub.JoinTable(copas_pb2.JoinTableRequest(
                    table_id=table.table_id, display_name=f"S{i}"))
                await stub.LeaveTable(copas_pb2.LeaveTableRequest(table_id=table.table_id),
                                      metadata=auth(other.player_token))
            await running.store.sync()
            assert store_rows(running.store, "log", table.table_id) == 1  # the seated join
            if isinstance(running.store, PgStore):  # a cluster's token rows go back too
                assert store_rows(running.store, "tokens", table.table_id) == 1
    finally:
        await shutdown(running, 0)


# ---------------------------------------------------------------- 10. request ids


async def test_a_reused_request_id_is_refused_and_retries_get_the_first_answer() -> None:
    async with serving(allow_seed=True) as (running, stub):
        create = copas_pb2.CreateTableRequest(request_id="create-1", rules=copas_pb2.RulesOverrides(
            pass_timeout_seconds=0, play_timeout_seconds=0), seed="42")
        first = (await stub.CreateTable(create)).table
        again = (await stub.CreateTable(create)).table
        assert first.table_id == again.table_id and len(list(running.registry.live())) == 1
        other = copas_pb2.CreateTableRequest(request_id="create-1", bot_seats=3)
        await refused(stub.CreateTable(other), grpc.StatusCode.INVALID_ARGUMENT,
                      "REQUEST_ID_REUSED")
        # A retried JoinTable gets the same seat and token, and takes no second seat.
        join = copas_pb2.JoinTableRequest(table_id=first.table_id, display_name="Ana",
                                          request_id="0f8fad5b-d9cb-469f-a165-70867728950e")
        a = await stub.JoinTable(join)
        b = await stub.JoinTable(join)
        assert (a.seat, a.player_token) == (b.seat, b.player_token)
        assert sum(s.is_taken for s in b.table.seats) == 1
        await refused(stub.JoinTable(copas_pb2.JoinTableRequest(
            table_id=first.table_id, display_name="Eve", request_id=join.request_id)),
            grpc.StatusCode.INVALID_ARGUMENT, "REQUEST_ID_REUSED")
        await refused(stub.JoinTable(copas_pb2.JoinTableRequest(
            table_id=first.table_id, display_name="Eve", request_id="short")),
            grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST_ID")
        rest = await join_all(stub, first.table_id, 3)
        tokens = {a.seat: a.player_token} | {j.seat: j.player_token for j in rest}
        game = Game(rules_of(first), "42")
        hand = game.hand(0)
        pass_x = copas_pb2.PassCardsRequest(table_id=first.table_id, request_id="x",
                                            cards=[card_pb(c) for c in hand[:3]])
        answer = await stub.PassCards(pass_x, metadata=auth(tokens[0]))
        assert (await stub.PassCards(pass_x, metadata=auth(tokens[0]))).sequence == \
            answer.sequence
        await refused(stub.PassCards(copas_pb2.PassCardsRequest(
            table_id=first.table_id, request_id="x", cards=[card_pb(c) for c in hand[3:6]]),
            metadata=auth(tokens[0])), grpc.StatusCode.INVALID_ARGUMENT, "REQUEST_ID_REUSED")
        await refused(stub.PlayCard(copas_pb2.PlayCardRequest(
            table_id=first.table_id, request_id="x", card=card_pb("2C")),
            metadata=auth(tokens[0])), grpc.StatusCode.INVALID_ARGUMENT, "REQUEST_ID_REUSED")
        # The same id on another seat is another request.
        answer1 = await stub.PassCards(copas_pb2.PassCardsRequest(
            table_id=first.table_id, request_id="x",
            cards=[card_pb(c) for c in game.hand(1)[:3]]), metadata=auth(tokens[1]))
        assert answer1.sequence > answer.sequence


async def test_refusals_are_not_remembered() -> None:
    async with serving(allow_seed=True) as (running, stub):
        table = await new_table(stub, seed="4", bots=3, trick_pause_seconds=0.3)
        join = (await join_all(stub, table.table_id, 1))[0]
        watch = Watch(stub, table.table_id, join.player_token)
        live = running.registry.get(table.table_id)
        game = live.game
        assert game is not None
        while live.paused_until is None:
            await asyncio.sleep(0.005)
            if 0 in game.to_act() and live.paused_until is None:
                await act_automatically(stub, table.table_id, join.player_token,
                                        game.auto_action(0))
        await watch.wait_for(lambda m: m.view.HasField("paused_until"))
        # Wait for our turn after the pause, asking once during it with a request id.
        asked = None
        request = None
        while True:
            if 0 in game.to_act():
                card = game.auto_action(0).card  # type: ignore[union-attr]
                request = copas_pb2.PlayCardRequest(table_id=table.table_id,
                                                    card=card_pb(card), request_id="p-1")
                if live.paused_until is not None:
                    await refused(stub.PlayCard(request, metadata=auth(join.player_token)),
                                  grpc.StatusCode.FAILED_PRECONDITION, "TABLE_PAUSED")
                    asked = True
                    break
            await asyncio.sleep(0.001)
            if live.paused_until is None:
                break
        if asked:
            await watch.wait_for(lambda m: m.WhichOneof("kind") == "pause_ended")
            assert request is not None
            answer = await stub.PlayCard(request, metadata=auth(join.player_token))
            assert answer.sequence > 0
        await watch.close()


# ---------------------------------------------------------------- 11. after a restart


async def test_after_a_restart_finished_games_and_first_answers_are_kept(tmp_path: Path) -> None:
    from structlog.testing import capture_logs

    data = str(tmp_path)
    running = await start(config_for_tests(allow_seed=True, data_dir=data))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        stub = copas_pb2_grpc.CopasServiceStub(channel)
        table = await new_table(stub, seed="2", players=3)
        joins = await join_all(stub, table.table_id, 3)
        await stub.LeaveTable(copas_pb2.LeaveTableRequest(table_id=table.table_id),
                              metadata=auth(joins[1].player_token))
        last = copas_pb2.LeaveTableRequest(table_id=table.table_id, request_id="bye")
        first_answer = await stub.LeaveTable(last, metadata=auth(joins[2].player_token))
        summary = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=table.table_id))).table
        assert summary.phase == copas_pb2.PHASE_GAME_OVER
    await shutdown(running, 0)
    with capture_logs() as logs:
        running = await start(config_for_tests(allow_seed=True, data_dir=data))
    try:
        assert [e["event"] for e in logs] == ["tables_recovered"]
        body = running.metrics.registry.get_sample_value
        assert body("copas_leavers_total") == 0.0
        assert body("copas_games_finished_total", {"reason": "last_player"}) is None
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            again = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=table.table_id)))
            assert again.table.phase == copas_pb2.PHASE_GAME_OVER
            retried = await stub.LeaveTable(last, metadata=auth(joins[2].player_token))
            assert retried.sequence == first_answer.sequence
            watch = Watch(stub, table.table_id, joins[0].player_token)
            head = await watch.wait_for(lambda m: True)
            assert head.view.phase == copas_pb2.PHASE_GAME_OVER
            await watch.close()
    finally:
        await shutdown(running, 0)


# ---------------------------------------------------------------- 12. the server's own moves


def test_bots_moves_are_durable_without_any_request(tmp_path: Path) -> None:
    port = free_port()
    flags = ("--data-dir", str(tmp_path), "--bot-table-pace", "0", "--bot-policy", "auto",
             "--trick-pause", "0", "--hand-pause", "0")
    server = ServerProcess(*flags, port=port)
    try:
        with grpc.insecure_channel(server.address) as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            table = stub.CreateTable(copas_pb2.CreateTableRequest(
                bot_seats=4, rules=copas_pb2.RulesOverrides(trick_pause_seconds=0.001,
                                                            hand_pause_seconds=0.001))).table
            deadline = time.monotonic() + 30
            while stub.GetTable(copas_pb2.GetTableRequest(
                    table_id=table.table_id)).table.phase != copas_pb2.PHASE_GAME_OVER:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            # No watcher, no other call: the record is there as soon as the game is over.
            stub.GetGameRecord(copas_pb2.GetGameRecordRequest(record_id=table.table_id))
        server.kill9()
        server = ServerProcess(*flags, port=port)
        with grpc.insecure_channel(server.address) as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            record = stub.GetGameRecord(copas_pb2.GetGameRecordRequest(
                record_id=table.table_id)).record
            assert record.action_count > 50
    finally:
        server.kill9()


# ---------------------------------------------------------------- 13. inputs


async def test_oversized_malformed_and_unprintable_inputs_are_refused_briefly() -> None:
    from structlog.testing import capture_logs

    async with serving() as (running, stub):
        with capture_logs() as logs:
            error = await refused(stub.GetTable(copas_pb2.GetTableRequest(
                table_id="x" * 60_000)), grpc.StatusCode.INVALID_ARGUMENT)
            assert len(error.details() or "") < 200
            await refused(stub.GetTable(copas_pb2.GetTableRequest(table_id="x" * 3_000_000)),
                          grpc.StatusCode.RESOURCE_EXHAUSTED)
            await refused(stub.GetTable(copas_pb2.GetTableRequest(table_id="t_" + "y" * 40)),
                          grpc.StatusCode.NOT_FOUND, "TABLE_NOT_FOUND")
        assert all(len(repr(e)) < 1000 for e in logs)
        # Bytes that are not the method's message.
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            raw = channel.unary_unary("/copas.v1.CopasService/GetTable",
                                      request_serializer=None, response_deserializer=None)
            await refused(raw(b"\xff\xff\xff\xff"), grpc.StatusCode.INVALID_ARGUMENT,
                          "MALFORMED_REQUEST")
        table = await new_table(stub, seed=None)
        for name in ("Ana\x1b[31m", "A\x00B", "\u202eevil", "zero\u200bwidth", " ", "x" * 33):
            await refused(stub.JoinTable(copas_pb2.JoinTableRequest(
                table_id=table.table_id, display_name=name)), grpc.StatusCode.INVALID_ARGUMENT,
                "INVALID_NAME")
        ok = await stub.JoinTable(copas_pb2.JoinTableRequest(table_id=table.table_id,
                                                             display_name="  José  "))
        assert ok.table.seats[ok.seat].display_name == "José"
        await refused(stub.PlayCard(copas_pb2.PlayCardRequest(
            table_id=table.table_id, card=cards_pb2.Card(text="Q" * 5000)),
            metadata=auth(ok.player_token)), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_CARD")


# ---------------------------------------------------------------- 14. TLS


async def test_tls_and_mutual_tls(tmp_path: Path) -> None:
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    cert.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    ca_bytes = (tmp_path / "ca.pem").read_bytes()
    running = await start(config_for_tests(tls_cert=str(tmp_path / "cert.pem"),
                                           tls_key=str(tmp_path / "key.pem"),
                                           listen="localhost:0"))
    try:
        target = f"localhost:{running.port}"
        secure = grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(ca_bytes))
        table = (await copas_pb2_grpc.CopasServiceStub(secure).CreateTable(
            copas_pb2.CreateTableRequest())).table
        assert table.table_id
        await secure.close()
        plain = grpc.aio.insecure_channel(target)
        with pytest.raises(grpc.aio.AioRpcError):
            await copas_pb2_grpc.CopasServiceStub(plain).ListTables(
                copas_pb2.ListTablesRequest(), timeout=3)
        await plain.close()
    finally:
        await shutdown(running, 0)
    # Mutual TLS: a client without a certificate signed by the client CA is turned away.
    client = ca.issue_cert("player@example.org")
    running = await start(config_for_tests(tls_cert=str(tmp_path / "cert.pem"),
                                           tls_key=str(tmp_path / "key.pem"),
                                           tls_client_ca=str(tmp_path / "ca.pem"),
                                           listen="localhost:0"))
    try:
        target = f"localhost:{running.port}"
        anonymous = grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(ca_bytes))
        with pytest.raises(grpc.aio.AioRpcError):
            await copas_pb2_grpc.CopasServiceStub(anonymous).ListTables(
                copas_pb2.ListTablesRequest(), timeout=3)
        await anonymous.close()
        known = grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(
            ca_bytes, client.private_key_pem.bytes(), client.cert_chain_pems[0].bytes()))
        await copas_pb2_grpc.CopasServiceStub(known).ListTables(copas_pb2.ListTablesRequest())
        await known.close()
    finally:
        await shutdown(running, 0)


# ---------------------------------------------------------------- the second review


async def test_a_stream_revoked_while_it_opens_never_shows_the_next_occupants_hand() -> None:
    async with serving(allow_seed=True) as (_, stub):
        for attempt in range(5):
            table = await new_table(stub, seed=str(attempt), bots=1)
            await stub.JoinTable(copas_pb2.JoinTableRequest(table_id=table.table_id,
                                                            display_name="filler", seat=1))
            attacker = await stub.JoinTable(copas_pb2.JoinTableRequest(
                table_id=table.table_id, display_name="attacker", seat=0))
            # Back to back: watch, give the seat up, someone takes it, the game starts.
            stale = Watch(stub, table.table_id, attacker.player_token)
            leave = asyncio.ensure_future(stub.LeaveTable(copas_pb2.LeaveTableRequest(
                table_id=table.table_id), metadata=auth(attacker.player_token)))
            victim = asyncio.ensure_future(stub.JoinTable(copas_pb2.JoinTableRequest(
                table_id=table.table_id, display_name="victim", seat=0)))
            last = asyncio.ensure_future(stub.JoinTable(copas_pb2.JoinTableRequest(
                table_id=table.table_id, display_name="last", seat=2)))
            await asyncio.gather(leave, victim, last, return_exceptions=True)
            await asyncio.wait_for(stale.task, 5)
            assert all(not m.view.hand for m in stale.messages), "a stale stream saw a hand"


async def test_secrets_and_request_context_stay_out_of_logs() -> None:
    from structlog.testing import capture_logs

    async with serving(allow_seed=True) as (_, stub):
        with capture_logs(processors=[structlog_merge()]) as logs:
            table = await new_table(stub, seed="3", bots=3, pass_timeout_seconds=0.05)
            rid = "0f8fad5b-d9cb-469f-a165-secret-id-1"
            watch = Watch(stub, table.table_id)  # open before the join starts the game
            await watch.opened()
            await stub.JoinTable(copas_pb2.JoinTableRequest(
                table_id=table.table_id, display_name="Ana", request_id=rid))
            await watch.wait_for(lambda m: m.WhichOneof("kind") == "turn_timed_out")
            await watch.close()
        assert rid not in repr(logs), "a JoinTable request_id (it unlocks the token) was logged"
        timed = [e for e in logs if e["event"] == "turn_timed_out"]
        assert timed and all("rpc" not in e and "request_id" not in e for e in timed)


def structlog_merge() -> Any:
    import structlog

    return structlog.contextvars.merge_contextvars


async def test_a_player_token_does_not_lift_the_table_and_join_quotas() -> None:
    async with serving(allow_seed=True, tables_per_minute=60, tables_burst=3,
                       quota_penalty=0.01) as (_, stub):
        table = await new_table(stub)
        token = (await join_all(stub, table.table_id, 1))[0].player_token
        await new_table(stub)
        await new_table(stub)
        await refused(stub.CreateTable(copas_pb2.CreateTableRequest(), metadata=auth(token)),
                      grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_TABLES")


async def test_finished_games_are_not_kept_in_memory(tmp_path: Path) -> None:
    running = await start(config_for_tests(allow_seed=True, data_dir=str(tmp_path)))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            for seed in ("1", "2"):
                table = await new_table(stub, seed=seed, bots=4)
                watch = Watch(stub, table.table_id)
                await watch.wait_for(is_over)
                await watch.close()
                record = await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(
                    record_id=table.table_id))
                assert record.record.record_json and record.record.standings
            # Served from the store, not from memory: gone from the database, gone.
            await asyncio.to_thread(delete_rows, running.store, "records", table.table_id)
            await refused(stub.GetGameRecord(copas_pb2.GetGameRecordRequest(
                record_id=table.table_id)), grpc.StatusCode.NOT_FOUND, "RECORD_NOT_FOUND")
    finally:
        await shutdown(running, 0)


async def test_turn_limits_have_a_floor() -> None:
    async with serving(allow_seed=True, min_timeout=1.0) as (_, stub):
        for field in ("play_timeout_seconds", "pass_timeout_seconds", "moon_timeout_seconds"):
            await refused(stub.CreateTable(copas_pb2.CreateTableRequest(
                bot_seats=3, rules=copas_pb2.RulesOverrides(**{field: 1e-9}))),
                grpc.StatusCode.INVALID_ARGUMENT, "INVALID_RULES")
        await stub.CreateTable(copas_pb2.CreateTableRequest(
            bot_seats=3, rules=copas_pb2.RulesOverrides(play_timeout_seconds=0)))


async def test_a_malformed_authorization_header_still_counts_and_health_has_quotas() -> None:
    async with serving(peer_calls_per_second=5, peer_calls_burst=5, quota_penalty=0.01
                       ) as (_, stub):
        codes = []
        for _ in range(8):
            try:
                await stub.ListTables(copas_pb2.ListTablesRequest(),
                                      metadata=(("authorization", "Basic x"),))
            except grpc.aio.AioRpcError as error:
                codes.append(error.code())
        assert grpc.StatusCode.RESOURCE_EXHAUSTED in codes
    async with serving(max_streams_per_peer=2) as (running, stub), \
            grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        health = health_pb2_grpc.HealthStub(channel)
        streams = [health.Watch(health_pb2.HealthCheckRequest()) for _ in range(2)]
        for s in streams:
            await s.read()
        third = health.Watch(health_pb2.HealthCheckRequest())
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await third.read()
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        for s in streams:
            s.cancel()


async def test_a_broken_log_sink_breaks_no_request() -> None:
    import structlog

    from server.observability import configure_logging

    broken = open(os.devnull, "w")  # noqa: SIM115 (closed at once: every write fails)
    broken.close()
    configure_logging("json", "info", file=broken, cache=False)
    try:
        async with serving(allow_seed=True) as (_, stub):
            table = await new_table(stub, seed="1", bots=3)
            join = (await join_all(stub, table.table_id, 1))[0]
            view = await stub.GetView(copas_pb2.GetViewRequest(table_id=table.table_id),
                                      metadata=auth(join.player_token))
            assert view.view.phase == copas_pb2.PHASE_PASSING  # the game started
    finally:
        structlog.reset_defaults()


async def test_retries_after_giving_a_seat_up_and_spelling_a_card_otherwise() -> None:
    async with serving(allow_seed=True) as (_, stub):
        table = await new_table(stub, seed="42")
        rid = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
        join = copas_pb2.JoinTableRequest(table_id=table.table_id, display_name="Ana",
                                          request_id=rid)
        first = await stub.JoinTable(join)
        leave = copas_pb2.LeaveTableRequest(table_id=table.table_id, request_id="bye")
        answer = await stub.LeaveTable(leave, metadata=auth(first.player_token))
        again = await stub.LeaveTable(leave, metadata=auth(first.player_token))
        assert again.sequence == answer.sequence  # the first answer, token revoked or not
        await refused(stub.JoinTable(join), grpc.StatusCode.FAILED_PRECONDITION,
                      "JOIN_GIVEN_UP")
        await refused(stub.GetView(copas_pb2.GetViewRequest(table_id=table.table_id),
                                   metadata=auth(first.player_token)),
                      grpc.StatusCode.UNAUTHENTICATED, "TOKEN_REVOKED")
        joins = await join_all(stub, table.table_id, 4)
        seat0 = next(j for j in joins if j.seat == 0)
        hand = Game(rules_of(table), "42").hand(0)
        as_text = copas_pb2.PassCardsRequest(table_id=table.table_id, request_id="p",
                                             cards=[card_pb(c) for c in hand[:3]])
        as_enums = copas_pb2.PassCardsRequest(request_id="p", cards=[
            cards_pb2.Card(suit=c.suit + 1, rank=c.rank + 2) for c in hand[:3]])  # type: ignore[arg-type]
        one = await stub.PassCards(as_text, metadata=auth(seat0.player_token))
        two = await stub.PassCards(as_enums, metadata=auth(seat0.player_token))
        assert one.sequence == two.sequence  # the same request, spelled otherwise


async def test_bad_tls_files_and_invisible_names_are_refused(tmp_path: Path) -> None:
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("localhost")
    other = ca.issue_cert("elsewhere")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    other.private_key_pem.write_to_path(str(tmp_path / "other.key"))
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    for key in ("other.key", "junk.pem"):
        with pytest.raises(SetupError, match="tls"):
            await start(config_for_tests(tls_cert=str(tmp_path / "cert.pem"),
                                         tls_key=str(tmp_path / key)))
    async with serving() as (_, stub):
        table = await new_table(stub, seed=None)
        for name, reason in (("\u3164", "INVALID_NAME"), ("Bot 4", "NAME_RESERVED"),
                             ("bot2", "NAME_RESERVED"), ("a" + "\u0301" * 6, "INVALID_NAME")):
            await refused(stub.JoinTable(copas_pb2.JoinTableRequest(
                table_id=table.table_id, display_name=name)), grpc.StatusCode.INVALID_ARGUMENT,
                reason)


def test_a_client_is_its_address_and_an_ipv6_client_its_network() -> None:
    from server.rpc.peers import peer_address

    assert peer_address("ipv4:203.0.113.7:5678") == "203.0.113.7"
    assert peer_address("ipv6:[2001:db8:1:2:aaaa::1]:5678") == \
        peer_address("ipv6:[2001:db8:1:2:bbbb::9]:1") == "2001:db8:1:2::/64"
    assert peer_address("ipv6:[::ffff:203.0.113.7]:5") == "203.0.113.7"
