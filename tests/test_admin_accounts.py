"""The operators' account calls on a real server: find (by id or username), rename, revoke,
ban (no sign-in, no seat, running seats played as leavers') and unban, delete; each refused
without the operator's token, none answering a secret."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import accounts_pb2, accounts_pb2_grpc, copas_pb2
from openskill.models import PlackettLuce

from clients.common import error_reason
from tests.helpers.calls import auth, new_table, play_out
from tests.helpers.servers import serving

TOKEN = "operator-0123456789-abcdefghij"
OPERATOR = auth(TOKEN)


@contextlib.asynccontextmanager
async def servers(tmp_path: Path) -> AsyncIterator[tuple[Any, Any, Any]]:
    token_file = tmp_path / "admin-token"
    token_file.write_text(TOKEN + "\n")
    async with serving(admin_token_file=str(token_file), data_dir=str(tmp_path / "data"),
                       allow_seed=True) \
            as (running, game), grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as ch:
        yield game, accounts_pb2_grpc.AccountServiceStub(ch), admin_pb2_grpc.AdminServiceStub(ch)


async def reason_of(call: Any) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return error_reason(caught.value)


async def test_operators_find_rename_revoke_ban_and_delete_accounts(tmp_path: Path) -> None:
    async with servers(tmp_path) as (game, accounts, admin):
        device = secrets.token_urlsafe(24)
        ana = (await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
            device_secret=device, display_name="Ana"))).session
        await accounts.LinkPassword(accounts_pb2.LinkPasswordRequest(
            username="ana", password="correct horse battery"), metadata=auth(ana.access_token))
        account_id = ana.account.account_id
        by_id = (await admin.FindAccount(admin_pb2.FindAccountRequest(query=account_id),
                                         metadata=OPERATOR)).account
        by_name = (await admin.FindAccount(admin_pb2.FindAccountRequest(query="ANA"),
                                           metadata=OPERATOR)).account
        assert by_id == by_name and by_id.account.display_name == "Ana"
        assert by_id.account.username == "ana" and not by_id.is_banned
        answered = repr(by_id)
        assert device not in answered and ana.access_token not in answered
        assert "argon2" not in answered
        renamed = await admin.RenameAccount(admin_pb2.RenameAccountRequest(
            account_id=account_id, display_name="Ana S", reason="asked by mail"),
            metadata=OPERATOR)
        assert renamed.account.account.display_name == "Ana S"

        # A seat at a running game, then a ban: no sign-in, no seat, the seat a leaver's.
        table = await new_table(game)
        seat = await game.JoinTable(copas_pb2.JoinTableRequest(table_id=table.table_id),
                                    metadata=auth(ana.access_token))
        for n in range(3):
            await game.JoinTable(copas_pb2.JoinTableRequest(table_id=table.table_id,
                                                            display_name=f"P{n}"))
        banned = await admin.BanAccount(admin_pb2.BanAccountRequest(
            account_id=account_id, is_banned=True, reason="cheating"), metadata=OPERATOR)
        assert banned.account.is_banned and banned.seats_removed == 1
        view = (await game.GetTable(copas_pb2.GetTableRequest(table_id=table.table_id))).table
        assert view.seats[seat.seat].has_left
        assert await reason_of(accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
            device_secret=device))) == "ACCOUNT_BANNED"
        assert await reason_of(accounts.GetProfile(
            accounts_pb2.GetProfileRequest(), metadata=auth(ana.access_token))) \
            == "SESSION_REVOKED"
        await admin.BanAccount(admin_pb2.BanAccountRequest(
            account_id=account_id, is_banned=False, reason="appeal"), metadata=OPERATOR)
        again = (await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
            device_secret=device))).session
        assert again.account.account_id == account_id

        ended = await admin.RevokeSessions(admin_pb2.RevokeSessionsRequest(
            account_id=account_id, reason="lost phone"), metadata=OPERATOR)
        assert ended.sessions_ended == 1
        assert await reason_of(accounts.GetProfile(
            accounts_pb2.GetProfileRequest(), metadata=auth(again.access_token))) \
            == "SESSION_REVOKED"

        await admin.DeleteAccount(admin_pb2.DeleteAccountRequest(
            account_id=account_id, reason="asked to be forgotten"), metadata=OPERATOR)
        assert await reason_of(admin.FindAccount(admin_pb2.FindAccountRequest(
            query=account_id), metadata=OPERATOR)) == "ACCOUNT_NOT_FOUND"
        assert await reason_of(accounts.SignInPassword(accounts_pb2.SignInPasswordRequest(
            username="ana", password="correct horse battery"))) == "INVALID_CREDENTIALS"


@pytest.mark.parametrize("call", [
    ("FindAccount", admin_pb2.FindAccountRequest(query="a_x")),
    ("RenameAccount", admin_pb2.RenameAccountRequest(account_id="a_x", display_name="x",
                                                     reason="r")),
    ("RevokeSessions", admin_pb2.RevokeSessionsRequest(account_id="a_x", reason="r")),
    ("BanAccount", admin_pb2.BanAccountRequest(account_id="a_x", is_banned=True, reason="r")),
    ("DeleteAccount", admin_pb2.DeleteAccountRequest(account_id="a_x", reason="r")),
])
async def test_account_calls_need_the_operators_token_and_a_known_account(
        tmp_path: Path, call: tuple[str, Any]) -> None:
    method, request = call
    async with servers(tmp_path) as (_, _, admin):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await getattr(admin, method)(request)
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert await reason_of(getattr(admin, method)(request, metadata=OPERATOR)) \
            == "ACCOUNT_NOT_FOUND"


async def test_a_deleted_accounts_games_stay_in_the_records_naming_nobody(
        tmp_path: Path) -> None:
    async with servers(tmp_path) as (game, accounts, admin):
        people = [(await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
            device_secret=secrets.token_urlsafe(24), display_name=name))).session
            for name in ("Ana", "Bia", "Cai")]
        table = (await game.CreateTable(copas_pb2.CreateTableRequest(
            preset="quick", rules=copas_pb2.RulesOverrides(  # a clock of its own: not a
                players=3, play_timeout_seconds=0)))).table  # quick match's, with reservations
        tokens = [(await game.JoinTable(copas_pb2.JoinTableRequest(table_id=table.table_id),
                                        metadata=auth(p.access_token))).player_token
                  for p in people]
        await play_out(game, table.table_id, dict(enumerate(tokens)))  # a rated game
        ana = people[0].account.account_id
        for _ in range(200):  # the intake takes the game within about a second
            listed = await game.ListGameRecords(copas_pb2.ListGameRecordsRequest(
                account_id=ana), metadata=auth(people[0].access_token))
            if listed.records:
                break
            await asyncio.sleep(0.05)
        assert [r.record_id for r in listed.records] == [table.table_id]
        before = (await game.GetGameRecord(copas_pb2.GetGameRecordRequest(
            record_id=table.table_id))).record
        assert len(before.ratings) == 3
        deleted = await admin.DeleteAccount(admin_pb2.DeleteAccountRequest(
            account_id=ana, reason="asked to be forgotten"), metadata=OPERATOR)
        assert deleted.records_rewritten == 1
        record = (await game.GetGameRecord(copas_pb2.GetGameRecordRequest(
            record_id=table.table_id))).record
        assert [s.display_name for s in record.seats] == ["(deleted)", "Bia", "Cai"]
        assert ana not in record.record_json and "Ana" not in record.record_json
        assert len(record.standings) == 3  # the game itself is kept
        # ... and everyone's rating updates with it: the others' can still be redone.
        assert list(record.ratings) == list(before.ratings)
        assert [s.player_id for s in record.seats] == [s.player_id for s in before.seats]
        model = PlackettLuce()
        places = {s.seat: s.place for s in record.standings}
        by_seat = {r.seat: r for r in record.ratings}
        for update in record.ratings:
            group = sorted([update.seat, *update.opponents])
            teams = [[model.create_rating([by_seat[s].mu_before, by_seat[s].sigma_before])]
                     for s in group]
            redone = model.rate(teams, ranks=[float(places[s]) for s in group])
            assert redone[group.index(update.seat)][0].mu == pytest.approx(update.mu_after)
        bia = await game.ListGameRecords(copas_pb2.ListGameRecordsRequest(
            account_id=people[1].account.account_id), metadata=auth(people[1].access_token))
        assert [r.record_id for r in bia.records] == [table.table_id]
        # Nobody lists another person's games, deleted or not.
        for who in (ana, people[1].account.account_id):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await game.ListGameRecords(copas_pb2.ListGameRecordsRequest(account_id=who),
                                           metadata=auth(people[2].access_token))
            assert caught.value.code() is grpc.StatusCode.PERMISSION_DENIED
            assert error_reason(caught.value) == "NOT_YOUR_ACCOUNT"


async def test_an_account_deleted_mid_game_does_not_come_back_when_the_game_ends(
        tmp_path: Path) -> None:
    """The review's finding: deleted while seated, the account's seat plays on as a leaver's;
    when the game ends, its record names "(deleted)", nothing of the account is written (no
    history, no rating), and its name is free for another."""
    async with servers(tmp_path) as (game, accounts, admin):
        people = [(await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
            device_secret=secrets.token_urlsafe(24), display_name=name))).session
            for name in ("Vera Victim", "Bia", "Cai")]
        table = (await game.CreateTable(copas_pb2.CreateTableRequest(
            preset="quick", rules=copas_pb2.RulesOverrides(
                players=3, play_timeout_seconds=0, pass_timeout_seconds=0,
                moon_timeout_seconds=0, trick_pause_seconds=0, hand_pause_seconds=0)))).table
        tokens = {n: (await game.JoinTable(copas_pb2.JoinTableRequest(
            table_id=table.table_id), metadata=auth(p.access_token))).player_token
            for n, p in enumerate(people)}
        vera = people[0].account.account_id
        await admin.DeleteAccount(admin_pb2.DeleteAccountRequest(
            account_id=vera, reason="asked to be forgotten"), metadata=OPERATOR)
        await play_out(game, table.table_id, {1: tokens[1], 2: tokens[2]})
        for _ in range(200):  # the intake takes the game within about a second
            mine = await accounts.ListMyGames(accounts_pb2.ListMyGamesRequest(),
                                              metadata=auth(people[1].access_token))
            if mine.games:
                break
            await asyncio.sleep(0.05)
        assert [g.record_id for g in mine.games] == [table.table_id]
        for _ in range(200):  # and rewrites its record once it sees the deletion
            record = (await game.GetGameRecord(copas_pb2.GetGameRecordRequest(
                record_id=table.table_id))).record
            if record.seats[0].display_name == "(deleted)":
                break
            await asyncio.sleep(0.05)
        assert [s.display_name for s in record.seats] == ["(deleted)", "Bia", "Cai"]
        assert "Vera" not in record.record_json and vera not in record.record_json
        assert await reason_of(admin.FindAccount(admin_pb2.FindAccountRequest(query=vera),
                                                 metadata=OPERATOR)) == "ACCOUNT_NOT_FOUND"
        again = (await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
            device_secret=secrets.token_urlsafe(24), display_name="Vera Victim"))).session
        assert again.account.display_name == "Vera Victim"  # the name is free again
        history = await accounts.ListMyGames(accounts_pb2.ListMyGamesRequest(),
                                             metadata=auth(again.access_token))
        assert list(history.games) == []  # the old record is not the newcomer's
