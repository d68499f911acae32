"""One policy for names people see, at every door (docs/RULES.md, "Names"): control, format and
bidi characters, mixed scripts, reserved names and a look-alike of another account's name are
refused wherever a name enters (sign-in, an OIDC claim, a profile, a join, a table, a
championship, an operator's rename), with INVALID_NAME, NAME_RESERVED or NAME_TAKEN, and the
refused call makes nothing."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import grpc
import pytest
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import (
    accounts_pb2,
    accounts_pb2_grpc,
    championships_pb2,
    championships_pb2_grpc,
    copas_pb2,
)

from clients.common import error_reason
from server import names
from server.accounts.attempts import SignInAttempts
from server.accounts.credentials import PasswordParameters, Passwords
from server.accounts.model import MemoryAccountStore
from server.accounts.oidc import OidcIssuer, OidcVerifier
from server.accounts.service import Accounts
from server.errors import ServiceError
from tests.helpers.accounts import AUDIENCE, ISSUER, Keys, ManualClock
from tests.helpers.calls import auth
from tests.helpers.servers import serving

OPERATOR = "operator-0123456789-abcdefghij"
HOSTILE = ["Ana\u202egnirts", "A\u200bna", "Ana\nBia", "Ana\t", "\u2066Ana", "x" * 10_000,
           "Ana\x00", "\u3164", "Ana\u2028", "Pa\u0301\u0301\u0301\u0301\u0301ul"]


@pytest.mark.parametrize("name", HOSTILE)
def test_a_name_with_hidden_or_line_breaking_characters_is_refused(name: str) -> None:
    with pytest.raises(ServiceError) as caught:
        names.person(name)
    assert caught.value.reason == "INVALID_NAME"


@pytest.mark.parametrize(("name", "clean"), [
    ("  Ana   Bia ", "Ana Bia"), ("Jose\u0301", "José"), ("Пётр", "Пётр"), ("王小明", "王小明"),
    ("Ana 🙂", "Ana 🙂"), ("João_99", "João_99"), ("山田 Taro", "山田 Taro")])
def test_names_of_any_one_script_are_kept_as_written(name: str, clean: str) -> None:
    assert names.person(name) == clean


@pytest.mark.parametrize("name", ["Bot 2", "bot7", "B0T 3", "Admin", "A d m i n", "(deleted)",
                                  "operator", "COPAS", "\u0421\u043e\u0440\u0430\u0455"])
def test_the_servers_own_names_are_reserved(name: str) -> None:
    with pytest.raises(ServiceError) as caught:
        names.person(name)
    assert caught.value.reason == "NAME_RESERVED"


def test_look_alikes_share_one_key_and_different_names_do_not() -> None:
    same = ["Ana", "ANA", "ana", "A n a", "A.na", "Ana_", "Ａｎａ"]  # the last: fullwidth
    assert {names.name_key(n) for n in same} == {"ana"}
    assert names.name_key("Сеса") == names.name_key("Ceca")  # all Cyrillic against all Latin
    assert names.name_key("Pau1") == names.name_key("Paul")
    assert len({names.name_key(n) for n in ("Ana", "Ada", "Anna", "Bia", "João")}) == 5
    with pytest.raises(ServiceError) as caught:  # a Cyrillic А in a Latin name
        names.person("Аna")
    assert caught.value.reason == "INVALID_NAME"


def _accounts(keys: Keys) -> Accounts:
    clock = ManualClock(1_000_000.0)
    return Accounts(MemoryAccountStore(), clock,
                    passwords=Passwords(PasswordParameters(time_cost=1, memory_kib=8)),
                    verifier=OidcVerifier([OidcIssuer(ISSUER, AUDIENCE, str(keys.path))]),
                    attempts=SignInAttempts(clock))


@pytest.mark.parametrize("claim", [*HOSTILE, "Bot 2", "Аna"])
async def test_an_oidc_claim_that_is_no_name_gives_a_default_one(keys: Keys, claim: str
                                                                 ) -> None:
    accounts = _accounts(keys)
    signed = await accounts.sign_in_oidc(keys.token(sub="claims", name=claim), "")
    assert signed.account.display_name.startswith("Player ")
    names.person(signed.account.display_name)  # a name the policy allows


async def test_an_oidc_claim_copying_another_accounts_name_gives_a_default_one(keys: Keys
                                                                              ) -> None:
    accounts = _accounts(keys)
    await accounts.sign_in_device(secrets.token_urlsafe(24), "Ana")
    signed = await accounts.sign_in_oidc(keys.token(sub="copy", name="ANA"), "")
    assert signed.account.display_name.startswith("Player ")
    kept = await accounts.sign_in_oidc(keys.token(sub="own", name="Bia Maria"), "")
    assert kept.account.display_name == "Bia Maria"


async def _reason(call: Any) -> str:
    try:
        await call
    except grpc.aio.AioRpcError as error:
        return error_reason(error)
    return "OK"


async def test_every_door_applies_the_policy_and_makes_nothing_when_it_refuses(
        tmp_path: Path) -> None:
    token_file = tmp_path / "admin-token"
    token_file.write_text(OPERATOR + "\n")
    async with serving(admin_token_file=str(token_file)) as (running, stub), \
            grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        accounts = accounts_pb2_grpc.AccountServiceStub(channel)
        champs = championships_pb2_grpc.ChampionshipServiceStub(channel)
        admin = admin_pb2_grpc.AdminServiceStub(channel)
        ana = (await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
            device_secret=secrets.token_urlsafe(24), display_name="Ana"))).session
        for name, reason in (("Bot 2", "NAME_RESERVED"), ("ANA", "NAME_TAKEN"),
                             ("Сеса", "OK"), ("Ceca", "NAME_TAKEN"), ("A\u200bna", "INVALID_NAME"),
                             ("Ana\u202e", "INVALID_NAME"), ("Аna", "INVALID_NAME")):
            secret = secrets.token_urlsafe(24)
            assert await _reason(accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
                device_secret=secret, display_name=name))) == reason, name
            if reason != "OK":  # nothing was made: the device signs in fresh, named anew
                again = (await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
                    device_secret=secret))).session
                assert again.is_new_account and again.account.display_name.startswith("Player")
        assert await _reason(accounts.SignUpPassword(accounts_pb2.SignUpPasswordRequest(
            username="ana.again", password="long enough password", display_name="A n a"))) \
            == "NAME_TAKEN"
        bia = (await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
            device_secret=secrets.token_urlsafe(24), display_name="Bia"))).session
        for name, reason in (("Ana", "NAME_TAKEN"), ("Bot 9", "NAME_RESERVED"),
                             ("Bia\n", "INVALID_NAME")):
            assert await _reason(accounts.UpdateProfile(accounts_pb2.UpdateProfileRequest(
                display_name=name), metadata=auth(bia.access_token))) == reason
            assert await _reason(admin.RenameAccount(admin_pb2.RenameAccountRequest(
                account_id=bia.account.account_id, display_name=name, reason="a test"),
                metadata=auth(OPERATOR))) == reason
        profile = await accounts.GetProfile(accounts_pb2.GetProfileRequest(),
                                            metadata=auth(bia.access_token))
        assert profile.account.display_name == "Bia"  # every refusal left it as it was
        assert [m for m in profile.account.methods] == [accounts_pb2.SIGN_IN_METHOD_DEVICE]
        # A table's, a seat's and a championship's names: the same policy.
        before = (await stub.ListTables(copas_pb2.ListTablesRequest())).tables
        for request in (copas_pb2.CreateTableRequest(display_name="Line\nbreak"),
                        copas_pb2.CreateTableRequest(display_name="\u202eevil"),
                        copas_pb2.CreateTableRequest(display_name="Mixed Аna")):
            assert await _reason(stub.CreateTable(request)) == "INVALID_NAME"
        assert list((await stub.ListTables(copas_pb2.ListTablesRequest())).tables) \
            == list(before)
        table = (await stub.CreateTable(copas_pb2.CreateTableRequest(bot_seats=2))).table
        for name, reason in (("Bot 1", "NAME_RESERVED"), ("A\u200bna", "INVALID_NAME")):
            assert await _reason(stub.JoinTable(copas_pb2.JoinTableRequest(
                table_id=table.table_id, display_name=name))) == reason
        for name in ("Final\nround", "Cup \u202e", "\u200bCup"):
            assert await _reason(champs.CreateChampionship(
                championships_pb2.CreateChampionshipRequest(
                    settings=championships_pb2.ChampionshipSettings(display_name=name)),
                metadata=auth(ana.access_token))) == "INVALID_NAME", name


async def test_a_seat_is_its_accounts_and_names_at_a_table_look_different() -> None:
    """The review's finding: three signed-in seats joined as another account's name. A
    signed-in seat takes its own account's name; two people at one table never share a name
    that looks the same (the bots' names aside)."""
    async with serving() as (running, stub), \
            grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        accounts = accounts_pb2_grpc.AccountServiceStub(channel)
        zed, bia = [(await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
            device_secret=secrets.token_urlsafe(24), display_name=name))).session
            for name in ("Racer Zed", "Bia")]
        table = (await stub.CreateTable(copas_pb2.CreateTableRequest(bot_seats=1))).table
        assert await _reason(stub.JoinTable(copas_pb2.JoinTableRequest(
            table_id=table.table_id, display_name="Racer Zed"),
            metadata=auth(bia.access_token))) == "INVALID_NAME"  # not Bia's name
        joined = await stub.JoinTable(copas_pb2.JoinTableRequest(table_id=table.table_id),
                                      metadata=auth(zed.access_token))
        for name in ("racer zed", "Racer  Zed", "Rаcer Zed"[:1] + "acer Zed"):
            assert await _reason(stub.JoinTable(copas_pb2.JoinTableRequest(
                table_id=table.table_id, display_name=name))) == "NAME_TAKEN", name
        await stub.JoinTable(copas_pb2.JoinTableRequest(table_id=table.table_id,
                                                        display_name="Ada"))  # a bot's name:
        seated = (await stub.GetTable(copas_pb2.GetTableRequest(  # a person may take it
            table_id=table.table_id))).table
        assert seated.seats[joined.seat].display_name == "Racer Zed"


@pytest.mark.parametrize("name", ["Cup \u034f", "\u034fAna", "Ana\ufe0f", "\U0001D159",
                                  "Ana\U000E0100", "\u0301Ana", "A\u0640B", "שלום Ana"])
def test_what_shows_nothing_an_opening_accent_and_two_directions_are_refused(name: str
                                                                            ) -> None:
    """The review's gaps: default-ignorable marks, a blank symbol, a leading accent, and
    right-to-left letters in a left-to-right name."""
    with pytest.raises(ServiceError) as caught:
        names.clean(name, 64)
    assert caught.value.reason == "INVALID_NAME"


@pytest.mark.parametrize(("one", "other"), [("カナ", "力ナ"), ("ロン", "口ン"), ("ー郎", "一郎"),
                                            ("Pau1", "Paul")])
def test_look_alikes_of_any_script_fold_together(one: str, other: str) -> None:
    assert names.name_key(one) == names.name_key(other)
    assert names.person(one) and names.person(other)  # each a name, but not two accounts'
