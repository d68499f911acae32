"""AccountService on a real server on loopback: a guest signs in and comes back, a password is
linked, sessions refresh and end, bad input is refused with its reason and changes nothing, no
secret reaches a log line, and accounts survive a restart."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import structlog
from copas.v1 import accounts_pb2, accounts_pb2_grpc, copas_pb2, copas_pb2_grpc

from clients.common import error_reason
from server.accounts.ratings import Rating, rate
from server.main import shutdown, start
from tests.helpers.calls import auth, play_out
from tests.helpers.servers import config_for_tests


@pytest.fixture
async def accounts(tmp_path: Path) -> AsyncIterator[tuple[Any, Any]]:
    running = await start(config_for_tests(data_dir=str(tmp_path / "data")))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    yield running, accounts_pb2_grpc.AccountServiceStub(channel)
    await channel.close()
    await shutdown(running, 0)


async def refused(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await call
    return error.value.code(), error_reason(error.value)


async def test_a_guest_signs_in_comes_back_and_links_a_password(accounts: Any) -> None:
    _, stub = accounts
    device = secrets.token_urlsafe(24)
    first = (await stub.SignInDevice(accounts_pb2.SignInDeviceRequest(
        device_secret=device, display_name="Ana"))).session
    assert first.is_new_account and first.account.display_name == "Ana"
    assert first.account.account_id.startswith("a_")
    assert first.access_expire_time.seconds > 0 and first.refresh_token
    again = (await stub.SignInDevice(accounts_pb2.SignInDeviceRequest(
        device_secret=device, display_name="Other"))).session
    assert not again.is_new_account and again.account.account_id == first.account.account_id
    profile = await stub.GetProfile(accounts_pb2.GetProfileRequest(),
                                    metadata=auth(again.access_token))
    assert profile.account.display_name == "Ana"
    assert list(profile.account.methods) == [accounts_pb2.SIGN_IN_METHOD_DEVICE]
    assert profile.games == 0 and not profile.ratings
    linked = await stub.LinkPassword(accounts_pb2.LinkPasswordRequest(
        username="ana", password="correct horse battery"), metadata=auth(again.access_token))
    assert linked.account.username == "ana"
    assert set(linked.account.methods) == {accounts_pb2.SIGN_IN_METHOD_DEVICE,
                                           accounts_pb2.SIGN_IN_METHOD_PASSWORD}
    by_password = (await stub.SignInPassword(accounts_pb2.SignInPasswordRequest(
        username="ANA", password="correct horse battery"))).session
    assert by_password.account.account_id == first.account.account_id
    renamed = await stub.UpdateProfile(accounts_pb2.UpdateProfileRequest(display_name="Ana S"),
                                       metadata=auth(by_password.access_token))
    assert renamed.account.display_name == "Ana S"


async def test_refresh_rotates_and_sign_out_ends_both_tokens(accounts: Any) -> None:
    _, stub = accounts
    first = (await stub.SignInDevice(accounts_pb2.SignInDeviceRequest(
        device_secret=secrets.token_urlsafe(24)))).session
    second = (await stub.RefreshSession(accounts_pb2.RefreshSessionRequest(
        refresh_token=first.refresh_token))).session
    assert await refused(stub.GetProfile(accounts_pb2.GetProfileRequest(),
                                         metadata=auth(first.access_token))) == (
        grpc.StatusCode.UNAUTHENTICATED, "SESSION_REVOKED")
    await stub.GetProfile(accounts_pb2.GetProfileRequest(), metadata=auth(second.access_token))
    # The same refresh token again at once (a second tab, a retry): the same new tokens.
    again = (await stub.RefreshSession(accounts_pb2.RefreshSessionRequest(
        refresh_token=first.refresh_token))).session
    assert (again.access_token, again.refresh_token) == (second.access_token,
                                                         second.refresh_token)
    assert [m for m in again.account.methods] == [accounts_pb2.SIGN_IN_METHOD_DEVICE]
    third = (await stub.RefreshSession(accounts_pb2.RefreshSessionRequest(
        refresh_token=second.refresh_token))).session
    assert await refused(stub.RefreshSession(accounts_pb2.RefreshSessionRequest(
        refresh_token=first.refresh_token))) == (grpc.StatusCode.UNAUTHENTICATED,
                                                  "SESSION_REVOKED")
    # the reuse ended the family: the newest pair is gone too
    assert (await refused(stub.GetProfile(accounts_pb2.GetProfileRequest(),
                                          metadata=auth(third.access_token))))[1] \
        == "SESSION_REVOKED"
    third = (await stub.SignInDevice(accounts_pb2.SignInDeviceRequest(
        device_secret=secrets.token_urlsafe(24)))).session
    await stub.SignOut(accounts_pb2.SignOutRequest(), metadata=auth(third.access_token))
    for call in (stub.GetProfile(accounts_pb2.GetProfileRequest(),
                                 metadata=auth(third.access_token)),
                 stub.RefreshSession(accounts_pb2.RefreshSessionRequest(
                     refresh_token=third.refresh_token))):
        assert (await refused(call))[1] == "SESSION_REVOKED"


async def test_sign_out_everywhere_ends_every_session_of_the_account_only(accounts: Any) -> None:
    _, stub = accounts
    secret = secrets.token_urlsafe(24)
    phone, laptop, tablet = [(await stub.SignInDevice(accounts_pb2.SignInDeviceRequest(
        device_secret=secret))).session for _ in range(3)]
    other = (await stub.SignInDevice(accounts_pb2.SignInDeviceRequest(
        device_secret=secrets.token_urlsafe(24)))).session
    # Without a token, or with one already ended, "everywhere" ends nothing and says why.
    assert await refused(stub.SignOut(accounts_pb2.SignOutRequest(everywhere=True))) == (
        grpc.StatusCode.UNAUTHENTICATED, "SIGN_IN_REQUIRED")
    ended = await stub.SignOut(accounts_pb2.SignOutRequest(), metadata=auth(tablet.access_token))
    assert ended.sessions_ended == 1
    assert await refused(stub.SignOut(accounts_pb2.SignOutRequest(everywhere=True),
                                      metadata=auth(tablet.access_token))) == (
        grpc.StatusCode.UNAUTHENTICATED, "SESSION_REVOKED")
    await stub.GetProfile(accounts_pb2.GetProfileRequest(), metadata=auth(laptop.access_token))
    ended = await stub.SignOut(accounts_pb2.SignOutRequest(everywhere=True),
                               metadata=auth(phone.access_token))
    assert ended.sessions_ended == 2  # the phone's and the laptop's
    for session in (phone, laptop):
        for call in (stub.GetProfile(accounts_pb2.GetProfileRequest(),
                                     metadata=auth(session.access_token)),
                     stub.RefreshSession(accounts_pb2.RefreshSessionRequest(
                         refresh_token=session.refresh_token))):
            assert (await refused(call))[1] == "SESSION_REVOKED"
    # Another account's session is untouched; the account itself still signs in.
    await stub.GetProfile(accounts_pb2.GetProfileRequest(), metadata=auth(other.access_token))
    again = (await stub.SignInDevice(accounts_pb2.SignInDeviceRequest(
        device_secret=secret))).session
    assert again.account.account_id == phone.account.account_id


@pytest.mark.parametrize(("method", "request_", "expected"), [
    ("SignInDevice", accounts_pb2.SignInDeviceRequest(device_secret="short"),
     (grpc.StatusCode.INVALID_ARGUMENT, "WEAK_DEVICE_SECRET")),
    ("SignInDevice", accounts_pb2.SignInDeviceRequest(device_secret="x" * 10_000),
     (grpc.StatusCode.INVALID_ARGUMENT, "FIELD_TOO_LONG")),
    ("SignInDevice", accounts_pb2.SignInDeviceRequest(
        device_secret="d" * 30, display_name="<b>" + "x" * 10_000),
     (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_NAME")),
    ("SignUpPassword", accounts_pb2.SignUpPasswordRequest(username="<script>",
                                                          password="long enough pw"),
     (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_USERNAME")),
    ("SignUpPassword", accounts_pb2.SignUpPasswordRequest(username="ana", password="short"),
     (grpc.StatusCode.INVALID_ARGUMENT, "WEAK_PASSWORD")),
    ("SignInPassword", accounts_pb2.SignInPasswordRequest(username="nobody",
                                                          password="whatever it is"),
     (grpc.StatusCode.UNAUTHENTICATED, "INVALID_CREDENTIALS")),
    ("SignInOidc", accounts_pb2.SignInOidcRequest(id_token="not.a.jwt"),
     (grpc.StatusCode.UNAUTHENTICATED, "INVALID_ID_TOKEN")),
    ("RefreshSession", accounts_pb2.RefreshSessionRequest(refresh_token="cr_nothing"),
     (grpc.StatusCode.UNAUTHENTICATED, "SESSION_REVOKED")),
    ("GetProfile", accounts_pb2.GetProfileRequest(),
     (grpc.StatusCode.UNAUTHENTICATED, "SIGN_IN_REQUIRED")),
    ("GetLeaderboard", accounts_pb2.GetLeaderboardRequest(players=7),
     (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_RULES")),
])
async def test_bad_input_is_refused_with_its_reason_and_makes_nothing(
        accounts: Any, method: str, request_: Any, expected: tuple[Any, str]) -> None:
    _, stub = accounts
    with structlog.testing.capture_logs() as lines:
        assert await refused(getattr(stub, method)(request_)) == expected
    logged = repr(lines)
    for field in ("device_secret", "password", "refresh_token", "id_token"):
        value = getattr(request_, field, "")
        assert not value or value[:12] not in logged
    board = await stub.GetLeaderboard(accounts_pb2.GetLeaderboardRequest())
    assert list(board.entries) == []


async def test_accounts_and_sessions_survive_a_restart(tmp_path: Path) -> None:
    config = config_for_tests(data_dir=str(tmp_path / "data"))
    device = secrets.token_urlsafe(24)
    running = await start(config)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        stub = accounts_pb2_grpc.AccountServiceStub(channel)
        first = (await stub.SignInDevice(accounts_pb2.SignInDeviceRequest(
            device_secret=device, display_name="Ana"))).session
    await shutdown(running, 0)
    running = await start(config)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = accounts_pb2_grpc.AccountServiceStub(channel)
            profile = await stub.GetProfile(accounts_pb2.GetProfileRequest(),
                                            metadata=auth(first.access_token))
            assert profile.account.account_id == first.account.account_id
            again = (await stub.SignInDevice(accounts_pb2.SignInDeviceRequest(
                device_secret=device))).session
            assert again.account.account_id == first.account.account_id
    finally:
        await shutdown(running, 0)


async def _guest(stub: Any, name: str) -> Any:
    return (await stub.SignInDevice(accounts_pb2.SignInDeviceRequest(
        device_secret=secrets.token_urlsafe(24), display_name=name))).session


async def _played(game: Any, sessions: list[Any], leave_order: list[int]) -> str:
    """A table of the sessions' accounts (no bots), played by everyone's own hand to its end
    (one hand); then the seats in ``leave_order`` leave (nobody, once it is over); returns
    the table id."""
    table = (await game.CreateTable(copas_pb2.CreateTableRequest(
        preset="quick", display_name="rated", rules=copas_pb2.RulesOverrides(
            players=len(sessions), pass_timeout_seconds=0, play_timeout_seconds=0,
            moon_timeout_seconds=0, trick_pause_seconds=0, hand_pause_seconds=0)))).table
    tokens = []
    for n, session in enumerate(sessions):
        joined = await game.JoinTable(copas_pb2.JoinTableRequest(table_id=table.table_id),
                                      metadata=auth(session.access_token))
        assert joined.seat == n
        tokens.append(joined.player_token)
    if not leave_order:
        await play_out(game, table.table_id, dict(enumerate(tokens)))
    for seat in leave_order:
        await game.LeaveTable(copas_pb2.LeaveTableRequest(table_id=table.table_id),
                              metadata=auth(tokens[seat]))
    return str(table.table_id)


async def _until_recorded(stub: Any, session: Any, games: int) -> Any:
    """The profile once it counts ``games`` games (the intake takes them within a second)."""
    for _ in range(200):
        profile = await stub.GetProfile(accounts_pb2.GetProfileRequest(),
                                        metadata=auth(session.access_token))
        if profile.games >= games:
            return profile
        await asyncio.sleep(0.05)
    raise AssertionError(f"the profile never counted {games} games: {profile}")


async def test_signed_in_people_play_a_rated_game_and_see_it_everywhere(accounts: Any) -> None:
    running, stub = accounts
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        game = copas_pb2_grpc.CopasServiceStub(channel)
        people = [await _guest(stub, name) for name in ("Ana", "Bia", "Cai", "Davi")]
        table_id = await _played(game, people, [])
        summary = (await game.GetTable(copas_pb2.GetTableRequest(table_id=table_id))).table
        assert [s.display_name for s in summary.seats] == ["Ana", "Bia", "Cai", "Davi"]
        record = await game.GetGameRecord(copas_pb2.GetGameRecordRequest(record_id=table_id))
        places = [s.place for s in sorted(record.record.standings, key=lambda s: s.seat)]
        with pytest.raises(grpc.aio.AioRpcError) as error:  # one seat per person
            table = (await game.CreateTable(copas_pb2.CreateTableRequest(preset="quick"))).table
            for _ in range(2):
                await game.JoinTable(copas_pb2.JoinTableRequest(table_id=table.table_id),
                                     metadata=auth(people[0].access_token))
        assert error_reason(error.value) == "ACCOUNT_ALREADY_SEATED"
    profiles = [await _until_recorded(stub, person, 1) for person in people]
    expected = rate([Rating()] * 4, places)
    for profile, rating in zip(profiles, expected, strict=True):
        assert profile.games == 1 and len(profile.ratings) == 1
        assert profile.ratings[0].players == 4
        assert profile.ratings[0].mu == pytest.approx(rating.mu)
        assert profile.ratings[0].rating == rating.shown
        assert profile.ratings[0].is_provisional and profile.ratings[0].place == 0
    assert [p.wins for p in profiles] == [int(p == 1) for p in places]
    board = await stub.GetLeaderboard(accounts_pb2.GetLeaderboardRequest(players=4),
                                      metadata=auth(people[2].access_token))
    assert list(board.entries) == []  # provisional ratings are on no leaderboard
    mine = await stub.ListMyGames(accounts_pb2.ListMyGamesRequest(),
                                  metadata=auth(people[1].access_token))
    assert [(g.record_id, g.place, g.is_rated, g.table_name) for g in mine.games] == [
        (table_id, places[1], True, "rated")]
    assert mine.games[0].rating_change == expected[1].shown
    # The record names every seat by a pseudonym of this game, and shows each update.
    record = (await game_record(running, table_id)).record
    assert len({s.player_id for s in record.seats}) == 4
    assert all(s.player_id.startswith("p_") for s in record.seats)
    assert not any(p.account.account_id in record.SerializeToString().decode("latin-1")
                   for p in people)
    assert [(r.seat, r.rating_after, sorted(r.opponents)) for r in record.ratings] == [
        (n, expected[n].shown, sorted(set(range(4)) - {n})) for n in range(4)]


async def test_a_game_with_an_anonymous_seat_is_in_the_history_but_not_rated(
        accounts: Any) -> None:
    running, stub = accounts
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        game = copas_pb2_grpc.CopasServiceStub(channel)
        ana, bia = await _guest(stub, "Ana"), await _guest(stub, "Bia")
        table = (await game.CreateTable(copas_pb2.CreateTableRequest(
            preset="quick", rules=copas_pb2.RulesOverrides(  # a clock of its own: not a
                players=3, play_timeout_seconds=0)))).table  # quick match's, with reservations
        tokens = [(await game.JoinTable(copas_pb2.JoinTableRequest(table_id=table.table_id),
                                        metadata=auth(s.access_token))).player_token
                  for s in (ana, bia)]
        anonymous = await game.JoinTable(copas_pb2.JoinTableRequest(
            table_id=table.table_id, display_name="Guest"))
        for token in (anonymous.player_token, tokens[1]):
            await game.LeaveTable(copas_pb2.LeaveTableRequest(table_id=table.table_id),
                                  metadata=auth(token))
    profile = await _until_recorded(stub, ana, 1)
    assert profile.wins == 1 and not profile.ratings
    mine = await stub.ListMyGames(accounts_pb2.ListMyGamesRequest(),
                                  metadata=auth(ana.access_token))
    assert [(g.place, g.is_rated, g.rating_change) for g in mine.games] == [(1, False, 0)]


async def game_record(running: Any, record_id: str) -> Any:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        return await copas_pb2_grpc.CopasServiceStub(channel).GetGameRecord(
            copas_pb2.GetGameRecordRequest(record_id=record_id))
