"""The operators' AdminService on a real server: who may call it, and that each action does
what it says (a closed game ends every stream and keeps a replayable record; a removed
player's token is revoked and the seat is played for them; a drained node takes no new tables
while its games go on), with nothing hidden in any answer. These run on SQLite and, in the
suite's PostgreSQL pass, on PostgreSQL (``config_for_tests``); a two-node drain is in
tests/test_cluster_admin.py."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import structlog
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import cards_pb2, copas_pb2, copas_pb2_grpc
from google.protobuf.message import Message

from clients.common import error_reason
from engine import Game, replay
from tests.helpers.calls import PlayStream, Watch, auth, is_over, join_all, new_table
from tests.helpers.servers import ROOT, serving

TOKEN = "operator-0123456789-abcdefghij"
OPERATOR = auth(TOKEN)


@contextlib.asynccontextmanager
async def admin_server(tmp_path: Path, **options: Any) -> AsyncIterator[
        tuple[Any, copas_pb2_grpc.CopasServiceStub, admin_pb2_grpc.AdminServiceStub]]:
    token_file = tmp_path / "admin-token"
    token_file.write_text(TOKEN + "\n")
    options.setdefault("data_dir", str(tmp_path / "data"))
    async with serving(admin_token_file=str(token_file), allow_seed=True, **options) \
            as (running, stub), grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") \
            as channel:
        yield running, stub, admin_pb2_grpc.AdminServiceStub(channel)


async def refused(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


def cards_in(message: Message) -> list[tuple[int, int]]:
    """Every Card anywhere inside ``message`` (suit, rank)."""
    found: list[tuple[int, int]] = []
    if isinstance(message, cards_pb2.Card):
        return [(message.suit, message.rank)]
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        values = list(value) if hasattr(value, "__len__") and not isinstance(
            value, Message) else [value]
        for item in values:
            if isinstance(item, Message):
                found += cards_in(item)
    return found


async def started_game(stub: Any, seed: str = "7") -> tuple[str, list[Any]]:
    """A table of four people, its game started (passing), no time limits."""
    table = await new_table(stub, seed=seed)
    joined = await join_all(stub, table.table_id, 4)
    return table.table_id, joined


async def hands(stub: Any, table_id: str, joined: list[Any]) -> set[tuple[int, int]]:
    held: set[tuple[int, int]] = set()
    for j in joined:
        view = (await stub.GetView(copas_pb2.GetViewRequest(table_id=table_id),
                                   metadata=auth(j.player_token))).view
        held |= {(c.suit, c.rank) for c in view.hand}
    return held


async def test_admin_calls_need_the_operator_credential(tmp_path: Path) -> None:
    async with admin_server(tmp_path) as (_, stub, admin):
        table_id, joined = await started_game(stub)
        request = admin_pb2.ServerStatusRequest()
        error = await refused(admin.ServerStatus(request))
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED
        assert error_reason(error) == "ADMIN_CREDENTIAL_REQUIRED"
        # A player's token is never an operator's.
        error = await refused(admin.CloseTable(admin_pb2.CloseTableRequest(
            table_id=table_id, reason="mine"), metadata=auth(joined[0].player_token)))
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED
        assert error_reason(error) == "ADMIN_DENIED"
        # Wrong tokens: one character off, a prefix, the token with more after it.
        for wrong in (TOKEN[:-1] + "x", TOKEN[:8], TOKEN + "0", "x" * 4096):
            error = await refused(admin.ServerStatus(request, metadata=auth(wrong)))
            assert error.code() == grpc.StatusCode.PERMISSION_DENIED, wrong
            assert error_reason(error) == "ADMIN_DENIED"
            assert TOKEN not in (error.details() or "")
        # Malformed: no credential at all.
        for header in ("Basic " + TOKEN, "Bearer", "Bearer  ", TOKEN):
            error = await refused(admin.ServerStatus(
                request, metadata=(("authorization", header),)))
            assert error.code() == grpc.StatusCode.UNAUTHENTICATED, header
            assert error_reason(error) == "ADMIN_CREDENTIAL_REQUIRED"
        # A client's own hop mark and cluster key are no credential either.
        error = await refused(admin.ServerStatus(request, metadata=(
            ("x-copas-hops", "1"), ("x-copas-cluster-key", "guess"),
            ("x-copas-admin-by", "me"))))
        assert error_reason(error) == "ADMIN_CREDENTIAL_REQUIRED"
        # Nothing changed: the game goes on.
        summary = (await stub.GetTable(copas_pb2.GetTableRequest(table_id=table_id))).table
        assert summary.phase == copas_pb2.PHASE_PASSING
        status = await admin.ServerStatus(request, metadata=OPERATOR)
        assert status.tables["playing"] == 1


async def test_the_admin_service_is_off_without_a_credential() -> None:
    async with serving() as (running, _), \
            grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        error = await refused(admin.ListTables(admin_pb2.ListTablesRequest(),
                                               metadata=OPERATOR))
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED
        assert error_reason(error) == "ADMIN_DISABLED"
        assert "--admin-token-file" in (error.details() or "")


def test_a_short_or_missing_admin_token_file_stops_the_start(tmp_path: Path) -> None:
    short = tmp_path / "short"
    short.write_text("tiny\n")
    for path, says in ((short, "at least 16"), (tmp_path / "missing", "missing")):
        done = subprocess.run([sys.executable, "-m", "server.main", "--listen", "127.0.0.1:0",
                               "--metrics-port", "0", "--data-dir", "memory",
                               "--admin-token-file", str(path)], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr
        assert "--admin-token-file" in done.stderr and says in done.stderr, done.stderr


async def test_list_and_get_show_what_an_operator_needs_and_no_hidden_card(
        tmp_path: Path) -> None:
    async with admin_server(tmp_path) as (_, stub, admin):
        waiting = await new_table(stub, seed="3")
        await join_all(stub, waiting.table_id, 1)
        table_id, joined = await started_game(stub)
        watch = Watch(stub, table_id, joined[1].player_token)  # seat 1 connected
        await watch.opened()
        listed = await admin.ListTables(admin_pb2.ListTablesRequest(), metadata=OPERATOR)
        by_id = {t.table_id: t for t in listed.tables}
        assert [t.table_id for t in listed.tables] == [table_id, waiting.table_id]
        game = by_id[table_id]
        assert game.display_name == "test" and game.preset == "online"
        assert game.phase == copas_pb2.PHASE_PASSING and game.hand_number == 0
        assert [s.display_name for s in game.seats] == ["P0", "P1", "P2", "P3"]
        assert [s.is_connected for s in game.seats] == [False, True, False, False]
        assert game.people_connected == 1 and not game.is_stuck
        assert game.age_seconds >= 0 and game.idle_seconds >= 0
        assert game.rules.players == 4 and game.bot_policy
        assert by_id[waiting.table_id].phase == copas_pb2.PHASE_WAITING_FOR_PLAYERS
        assert [s.is_taken for s in by_id[waiting.table_id].seats] == [True, False, False,
                                                                        False]
        one = await admin.GetTable(admin_pb2.GetTableRequest(table_id=table_id),
                                   metadata=OPERATOR)
        assert one.table.table_id == table_id
        assert [e.WhichOneof("kind") for e in one.last_events][-2:] == [
            "game_started", "hand_started"]
        assert one.view.phase == copas_pb2.PHASE_PASSING and not one.view.hand
        held = await hands(stub, table_id, joined)
        assert len(held) == 52
        for answer in (listed, one):
            assert not set(cards_in(answer)) & held  # not one card of any hand
        # Paging: one table per page, newest first, then the last.
        first = await admin.ListTables(admin_pb2.ListTablesRequest(page_size=1),
                                       metadata=OPERATOR)
        assert [t.table_id for t in first.tables] == [table_id] and first.next_page_token
        rest = await admin.ListTables(admin_pb2.ListTablesRequest(
            page_size=1, page_token=first.next_page_token), metadata=OPERATOR)
        assert [t.table_id for t in rest.tables] == [waiting.table_id]
        assert not rest.next_page_token
        error = await refused(admin.GetTable(admin_pb2.GetTableRequest(table_id="t_nope"),
                                             metadata=OPERATOR))
        assert error.code() == grpc.StatusCode.NOT_FOUND
        await watch.close()


async def test_a_timed_game_shows_its_timer_and_a_stuck_table_is_listed(
        tmp_path: Path) -> None:
    async with admin_server(tmp_path) as (running, stub, admin):
        table = await new_table(stub, seed="5", pass_timeout_seconds=30.0)
        await join_all(stub, table.table_id, 4)
        one = await admin.GetTable(admin_pb2.GetTableRequest(table_id=table.table_id),
                                   metadata=OPERATOR)
        turns = [t for t in one.timers if t.kind == "turn"]
        assert len(turns) == 1 and sorted(turns[0].seats) == [0, 1, 2, 3]
        assert turns[0].at.seconds > 0
        # A deadline long past with nothing played: stuck (a timer that never fired).
        held = running.registry.get(table.table_id)
        held.deadline = held.now() - 60
        stuck = await admin.ListTables(admin_pb2.ListTablesRequest(only_stuck=True),
                                       metadata=OPERATOR)
        assert [t.table_id for t in stuck.tables] == [table.table_id]
        assert stuck.tables[0].is_stuck


async def test_close_table_ends_every_stream_and_keeps_a_replayable_record(
        tmp_path: Path) -> None:
    async with admin_server(tmp_path) as (_, stub, admin):
        table_id, joined = await started_game(stub)
        streams = [PlayStream(stub, table_id, j.player_token) for j in joined[:2]]
        watches = [Watch(stub, table_id, joined[2].player_token), Watch(stub, table_id)]
        for s in streams:
            await s.wait_for(lambda m: m.WhichOneof("kind") == "event")
        for w in watches:
            await w.opened()
        with structlog.testing.capture_logs() as logs:
            closed = await admin.CloseTable(admin_pb2.CloseTableRequest(
                table_id=table_id, reason="cheating reported"), metadata=OPERATOR)
        assert closed.record_id == table_id
        assert closed.table.phase == copas_pb2.PHASE_GAME_OVER
        for w in watches:
            over = await w.wait_for(lambda m: m.WhichOneof("kind") == "game_over")
            assert over.game_over.reason == copas_pb2.GAME_END_REASON_CLOSED
            assert over.view.end_reason == copas_pb2.GAME_END_REASON_CLOSED
        for s in streams:
            over = await s.wait_for(lambda m: m.WhichOneof("kind") == "event"
                                    and m.event.WhichOneof("kind") == "game_over")
            assert over.event.game_over.reason == copas_pb2.GAME_END_REASON_CLOSED
        record = (await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(
            record_id=table_id))).record
        assert record.end_reason == copas_pb2.GAME_END_REASON_CLOSED
        game = replay(record.record_json)  # raises unless it gives the recorded result
        assert isinstance(game, Game) and game.is_over and game.end_reason is not None
        assert game.end_reason.value == "CLOSED"
        audit = [line for line in logs if line.get("event") == "admin_call"]
        assert audit and audit[-1]["method"] == "CloseTable"
        assert audit[-1]["table_id"] == table_id and audit[-1]["outcome"] == "ok"
        assert audit[-1]["reason"] == "cheating reported"
        assert audit[-1]["who"].startswith("token ") and TOKEN not in str(logs)
        # Once over, it cannot be closed again; a waiting table goes, its streams told.
        error = await refused(admin.CloseTable(admin_pb2.CloseTableRequest(
            table_id=table_id, reason="again"), metadata=OPERATOR))
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error_reason(error) == "WRONG_PHASE"
        waiting = await new_table(stub, seed="2")
        seated = await join_all(stub, waiting.table_id, 1)
        wait_watch = Watch(stub, waiting.table_id, seated[0].player_token)
        await wait_watch.opened()
        error = await refused(admin.CloseTable(admin_pb2.CloseTableRequest(
            table_id=waiting.table_id), metadata=OPERATOR))
        assert error_reason(error) == "MISSING_REASON"
        closed = await admin.CloseTable(admin_pb2.CloseTableRequest(
            table_id=waiting.table_id, reason="spam"), metadata=OPERATOR)
        assert closed.record_id == ""
        await wait_watch.task
        assert wait_watch.error is not None
        assert wait_watch.error.code() == grpc.StatusCode.NOT_FOUND
        assert error_reason(wait_watch.error) == "TABLE_CLOSED"
        for s in streams:
            s.call.cancel()
        for w in watches:
            await w.close()


async def test_remove_player_revokes_the_token_and_the_seat_plays_on(tmp_path: Path) -> None:
    async with admin_server(tmp_path) as (_, stub, admin):
        table_id, joined = await started_game(stub)
        removed = PlayStream(stub, table_id, joined[0].player_token)
        other = Watch(stub, table_id, joined[1].player_token)
        await removed.wait_for(lambda m: m.WhichOneof("kind") == "event")
        await other.opened()
        answer = await admin.RemovePlayer(admin_pb2.RemovePlayerRequest(
            table_id=table_id, seat=0, reason="abusive chat"), metadata=OPERATOR)
        assert answer.table.seats[0].has_left and not answer.table.seats[0].is_connected
        await removed.task
        assert removed.error is not None
        assert removed.error.code() == grpc.StatusCode.UNAUTHENTICATED
        assert error_reason(removed.error) == "TOKEN_REVOKED"
        left = await other.wait_for(lambda m: m.WhichOneof("kind") == "player_left")
        assert left.player_left.seat == 0
        error = await refused(stub.GetView(copas_pb2.GetViewRequest(table_id=table_id),
                                           metadata=auth(joined[0].player_token)))
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED
        assert error_reason(error) == "TOKEN_REVOKED"
        assert "operator" in (error.details() or "")
        # The seat is played for them: its pass was chosen by the server at once.
        chosen = await other.wait_for(lambda m: m.WhichOneof("kind") == "pass_chosen"
                                      and m.pass_chosen.seat == 0)
        assert chosen.pass_chosen.is_automatic
        error = await refused(admin.RemovePlayer(admin_pb2.RemovePlayerRequest(
            table_id=table_id, seat=0, reason="again"), metadata=OPERATOR))
        assert error_reason(error) == "NOT_A_PERSON"
        error = await refused(admin.RemovePlayer(admin_pb2.RemovePlayerRequest(
            table_id=table_id, seat=9, reason="nobody"), metadata=OPERATOR))
        assert error_reason(error) == "INVALID_SEAT"
        await other.close()
    # After a restart on the same data the token stays revoked and the seat stays left.
    async with admin_server(tmp_path) as (_, stub, admin):
        error = await refused(stub.GetView(copas_pb2.GetViewRequest(table_id=table_id),
                                           metadata=auth(joined[0].player_token)))
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED, error
        view = (await stub.GetView(copas_pb2.GetViewRequest(table_id=table_id),
                                   metadata=auth(joined[1].player_token))).view
        assert view.players[0].has_left


async def test_remove_before_the_game_frees_the_seat(tmp_path: Path) -> None:
    async with admin_server(tmp_path) as (_, stub, admin):
        table = await new_table(stub, seed="4")
        seated = await join_all(stub, table.table_id, 2)
        answer = await admin.RemovePlayer(admin_pb2.RemovePlayerRequest(
            table_id=table.table_id, seat=1, reason="bad name"), metadata=OPERATOR)
        assert [s.is_taken for s in answer.table.seats] == [True, False, False, False]
        error = await refused(stub.GetView(copas_pb2.GetViewRequest(
            table_id=table.table_id), metadata=auth(seated[1].player_token)))
        assert error_reason(error) == "TOKEN_REVOKED"
        assert "an operator removed you" in (error.details() or "")
        again = await stub.JoinTable(copas_pb2.JoinTableRequest(table_id=table.table_id,
                                                                display_name="New"))
        assert again.seat == 1


async def test_drain_refuses_new_tables_while_games_finish(tmp_path: Path) -> None:
    async with admin_server(tmp_path) as (_, stub, admin):
        table_id, joined = await started_game(stub)
        waiting = await new_table(stub, seed="9")
        drained = await admin.Drain(admin_pb2.DrainRequest(), metadata=OPERATOR)
        assert drained.is_draining and drained.games_running == 1
        assert drained.tables_handed_over == 0  # nobody else to take them
        for call in (stub.CreateTable(copas_pb2.CreateTableRequest(preset="online")),
                     stub.JoinTable(copas_pb2.JoinTableRequest(table_id=waiting.table_id,
                                                               display_name="Late")),
                     stub.JoinTable(copas_pb2.JoinTableRequest(preset="online",
                                                               display_name="Quick"))):
            error = await refused(call)
            assert error.code() == grpc.StatusCode.UNAVAILABLE
            assert error_reason(error) == "NODE_DRAINING"
            assert "draining" in (error.details() or "")
        # The running game goes on to its end.
        watch = Watch(stub, table_id)
        await watch.opened()
        for j in joined:
            view = (await stub.GetView(copas_pb2.GetViewRequest(table_id=table_id),
                                       metadata=auth(j.player_token))).view
            await stub.PassCards(copas_pb2.PassCardsRequest(
                table_id=table_id, cards=list(view.hand[:3])), metadata=auth(j.player_token))
        await watch.wait_for(lambda m: m.WhichOneof("kind") == "cards_exchanged")
        closed = await admin.CloseTable(admin_pb2.CloseTableRequest(
            table_id=table_id, reason="deploy"), metadata=OPERATOR)
        assert closed.record_id
        await watch.wait_for(is_over)
        status = await admin.ServerStatus(admin_pb2.ServerStatusRequest(), metadata=OPERATOR)
        assert status.is_draining and status.tables["playing"] == 0
        undrained = await admin.Undrain(admin_pb2.UndrainRequest(), metadata=OPERATOR)
        assert not undrained.is_draining
        made = await stub.CreateTable(copas_pb2.CreateTableRequest(preset="online"))
        assert made.table.table_id
        await watch.close()


async def test_server_status_says_what_runs_with_secrets_redacted(tmp_path: Path) -> None:
    async with admin_server(tmp_path) as (running, stub, admin):
        await started_game(stub)
        status = await admin.ServerStatus(admin_pb2.ServerStatusRequest(), metadata=OPERATOR)
        assert status.version and status.uptime_seconds >= 0
        assert status.store in ("sqlite", "postgresql") and status.is_store_healthy
        assert status.tables == {"waiting": 0, "playing": 1, "finished": 0}
        assert status.players == 4 and status.players_connected == 0
        assert not status.is_draining and status.tables_stuck == 0
        assert status.settings["admin-token-file"].endswith("admin-token")
        assert status.settings["max-tables"] == str(running.registry.settings.max_tables)
        assert TOKEN not in str(status)
        if status.store == "postgresql":
            assert status.settings["database"] == "(redacted)"
            assert status.lease_state == "held" and status.node_id
        else:
            assert status.lease_state == "none"


def test_copas_admin_prints_tables_and_json(tmp_path: Path) -> None:
    """`copas admin` in a terminal against a server process: a table by default, JSON with
    --json, and the refusal's reason without the token."""
    from tests.helpers.servers import ServerProcess

    token_file = tmp_path / "admin-token"
    token_file.write_text(TOKEN + "\n")
    with ServerProcess("--data-dir", str(tmp_path / "data"), "--admin-token-file",
                       str(token_file), "--unlimited-quotas") as server:
        def admin(*words: str, token: bool = True) -> subprocess.CompletedProcess[str]:
            extra = ["--token-file", str(token_file)] if token else []
            return subprocess.run(
                [sys.executable, "-m", "tools.cli", "admin", "--server", server.address,
                 *extra, *words], cwd=ROOT, capture_output=True, text=True, timeout=60,
                env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
        made = subprocess.run(
            [sys.executable, "-c", "import asyncio, grpc\n"
             "from copas.v1 import copas_pb2, copas_pb2_grpc\n"
             "async def main():\n"
             f"    async with grpc.aio.insecure_channel('{server.address}') as c:\n"
             "        s = copas_pb2_grpc.CopasServiceStub(c)\n"
             "        t = await s.CreateTable(copas_pb2.CreateTableRequest(preset='online',"
             " display_name='Ops table'))\n"
             "        print(t.table.table_id)\n"
             "asyncio.run(main())\n"], cwd=ROOT, capture_output=True, text=True, timeout=60)
        table_id = made.stdout.strip()
        assert table_id.startswith("t_"), made.stderr
        listed = admin("tables")
        assert listed.returncode == 0, listed.stderr
        assert table_id in listed.stdout and "Ops table" in listed.stdout
        as_json = admin("--json", "tables")
        assert '"table_id": "' + table_id + '"' in as_json.stdout
        status = subprocess.run(  # the options after the command work as well
            [sys.executable, "-m", "tools.cli", "admin", "status", "--server", server.address,
             "--token-file", str(token_file)], cwd=ROOT, capture_output=True, text=True,
            timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
        assert "sqlite" in status.stdout and "--admin-token-file" in status.stdout, status
        closed = admin("close", table_id, "--reason", "test")
        assert closed.returncode == 0 and "closed" in closed.stdout, closed.stderr
        denied = admin("status", token=False)
        assert denied.returncode == 1
        assert "ADMIN_CREDENTIAL_REQUIRED" in denied.stderr and TOKEN not in denied.stderr
        assert TOKEN not in server.log()


async def test_an_operators_client_certificate_opens_the_admin_service(tmp_path: Path) -> None:
    """Mutual TLS: a certificate whose common name is in --admin-subjects is an operator;
    another certificate of the same CA (a player's) is not, and brings no credential."""
    import trustme

    from server.main import shutdown, start
    from tests.helpers.servers import config_for_tests

    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    cert.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    running = await start(config_for_tests(
        tls_cert=str(tmp_path / "cert.pem"), tls_key=str(tmp_path / "key.pem"),
        tls_client_ca=str(tmp_path / "ca.pem"), listen="localhost:0",
        admin_subjects="ops.example.org, oncall.example.org"))
    try:
        target = f"localhost:{running.port}"
        outcomes = []
        for name in ("ops.example.org", "player.example.org"):
            client = ca.issue_cert(name)
            async with grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(
                    ca.cert_pem.bytes(), client.private_key_pem.bytes(),
                    client.cert_chain_pems[0].bytes())) as channel:
                admin = admin_pb2_grpc.AdminServiceStub(channel)
                try:
                    status = await admin.ServerStatus(admin_pb2.ServerStatusRequest())
                    outcomes.append(("ok", status.settings["admin-subjects"]))
                except grpc.aio.AioRpcError as error:
                    outcomes.append((error_reason(error), ""))
        assert outcomes == [("ok", "ops.example.org, oncall.example.org"),
                            ("ADMIN_CREDENTIAL_REQUIRED", "")]
    finally:
        await shutdown(running, 0)


def test_admin_subjects_need_mutual_tls() -> None:
    done = subprocess.run([sys.executable, "-m", "server.main", "--listen", "127.0.0.1:0",
                           "--metrics-port", "0", "--data-dir", "memory",
                           "--admin-subjects", "ops"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "--tls-client-ca" in done.stderr, done.stderr
