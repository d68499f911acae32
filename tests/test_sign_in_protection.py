"""Players you can trust (issue 37): sign-in throttles the attacker and never the owner, the
argon2 work is shared in turn among the addresses that ask, and one address cannot make
accounts without end. Hostile clients against a server on loopback (each address named by
``x-forwarded-for`` through the trusted loopback proxy), and the parts on their own with a
fake clock and a hasher the test lets finish; every map is bounded."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest
from copas.v1 import accounts_pb2, accounts_pb2_grpc

from server.accounts.attempts import AccountCreations, AttemptRule, SignInAttempts
from server.accounts.credentials import PasswordParameters, Passwords
from server.accounts.hashing import PasswordWork
from server.accounts.model import MemoryAccountStore
from server.accounts.oidc import OidcIssuer, OidcVerifier
from server.accounts.service import Accounts
from server.errors import ServiceError
from server.main import shutdown, start
from server.rpc.peers import client_key
from tests.helpers.accounts import AUDIENCE, ISSUER, Keys, ManualClock
from tests.helpers.calls import quota_details
from tests.helpers.servers import config_for_tests

PASSWORD = "correct horse battery"
ATTACKER, OWNER, OTHER = "198.51.100.66", "203.0.113.7", "192.0.2.10"
FAST = PasswordParameters(time_cost=1, memory_kib=8, parallelism=1)
DEADLINE = 30.0  # seconds any one thing awaited here may take before the test fails



def secret_of(word: str) -> str:
    """A device secret of its own for ``word`` (the same word, the same device)."""
    return f"{word}-device-Secret_0123456789"


def at(address: str) -> tuple[tuple[str, str], ...]:
    return (("x-forwarded-for", address),)


@contextlib.asynccontextmanager
async def accounts_server(**options: Any) -> AsyncIterator[tuple[Any, Any]]:
    """A server behind the trusted loopback proxy, and an AccountService stub to it."""
    running = await start(config_for_tests(trusted_proxies="127.0.0.1", **options))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            yield running, accounts_pb2_grpc.AccountServiceStub(channel)
    finally:
        await shutdown(running, 0)


async def refusal(call: Any) -> tuple[grpc.StatusCode, str, float]:
    """The status, reason and retry delay of a call that must be refused."""
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call
    reason, _, retry = quota_details(refused.value)
    return refused.value.code(), reason, retry


def sign_in(username: str, password: str = PASSWORD) -> accounts_pb2.SignInPasswordRequest:
    return accounts_pb2.SignInPasswordRequest(username=username, password=password)


def device() -> accounts_pb2.SignInDeviceRequest:
    return accounts_pb2.SignInDeviceRequest(device_secret=secrets.token_urlsafe(24))


# ---------------------------------------------------------------- against a server

async def test_wrong_passwords_from_one_address_do_not_lock_the_owner_out() -> None:
    """Finding 1: ten wrong passwords for a username from one address refused its owner's
    right one from everywhere. Now the guessing address is refused, and only it."""
    async with accounts_server() as (_, stub):
        made = await stub.SignUpPassword(accounts_pb2.SignUpPasswordRequest(
            username="ana", password=PASSWORD), metadata=at(OTHER))
        ana = made.session.account.account_id
        for n in range(10):
            code, reason, _ = await refusal(stub.SignInPassword(
                sign_in("ana", f"guess number {n}"), metadata=at(ATTACKER)))
            assert (code, reason) == (grpc.StatusCode.UNAUTHENTICATED, "INVALID_CREDENTIALS")
        signed = await stub.SignInPassword(sign_in("ANA"), metadata=at(OWNER))
        assert signed.session.account.account_id == ana
        for password in ("guess number 11", PASSWORD):  # the attacker's address, right or not
            code, reason, retry = await refusal(stub.SignInPassword(
                sign_in("ana", password), metadata=at(ATTACKER)))
            assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_SIGN_INS")
            assert retry > 0
        again = await stub.SignInPassword(sign_in("ana"), metadata=at(OWNER))
        assert again.session.account.account_id == ana


async def test_forty_sign_ins_from_one_address_do_not_hold_another_addresses() -> None:
    """Finding 2: forty correct sign-ins at once from one address filled the shared argon2
    queue (2 hashing, 32 waiting) and another address's sign-in was refused, or waited
    behind all of them. Now that address waits with at most 4 (the others refused at once)
    and the other address's sign-in is served in turn, before the flood's last ones."""
    async with accounts_server(password_time_cost=3, password_memory_kib=65536,
                               password_checks_per_address=4) as (running, stub):
        bia = ""
        for username, address in (("flood", ATTACKER), ("bia", OWNER)):
            made = await stub.SignUpPassword(accounts_pb2.SignUpPasswordRequest(
                username=username, password=PASSWORD), metadata=at(address))
            bia = made.session.account.account_id
        flood = [asyncio.ensure_future(stub.SignInPassword(sign_in("flood"),
                                                           metadata=at(ATTACKER)))
                 for _ in range(40)]
        # The queue has formed once the flood's first refusal is back.
        done, _ = await asyncio.wait(flood, timeout=DEADLINE,
                                     return_when=asyncio.FIRST_EXCEPTION)
        assert any(call.exception() is not None for call in done), "no flood call refused"
        honest = await asyncio.wait_for(
            stub.SignInPassword(sign_in("bia"), metadata=at(OWNER)), DEADLINE)
        assert honest.session.account.account_id == bia
        assert not all(call.done() for call in flood), "the honest one waited for the flood"
        results = await asyncio.wait_for(asyncio.gather(*flood, return_exceptions=True),
                                         DEADLINE)
        refused = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
        assert len(results) - len(refused) >= 2  # the flood is served too, in its turn
        for error in refused:
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            reason, _, retry = quota_details(error)
            assert reason == "TOO_MANY_SIGN_INS" and retry > 0
        sample = running.metrics.registry.get_sample_value
        assert sample("copas_password_checks_waiting") == 0
        assert sample("copas_password_checks_running") == 0


async def test_one_address_cannot_make_accounts_without_end() -> None:
    """Finding 3: one address made 40-50 guest accounts a second. Now it makes its burst,
    then is refused TOO_MANY_ACCOUNTS (a guest's and a password's alike), while another
    address still makes one, and signing in to an existing account is never refused."""
    async with accounts_server(accounts_burst=5, accounts_per_address_per_hour=60) as (_, stub):
        ana = await stub.SignUpPassword(accounts_pb2.SignUpPasswordRequest(
            username="ana", password=PASSWORD), metadata=at(OWNER))
        mine = device()
        first = await stub.SignInDevice(mine, metadata=at(ATTACKER))
        assert first.session.is_new_account
        made, refusals = 1, []
        for _ in range(30):
            try:
                await stub.SignInDevice(device(), metadata=at(ATTACKER))
                made += 1
            except grpc.aio.AioRpcError as error:
                refusals.append((error.code(), *quota_details(error)[::2]))
        assert made == 5
        assert len(refusals) == 26
        for code, reason, retry in refusals:
            assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_ACCOUNTS")
            assert 0 < retry <= 60
        code, reason, _ = await refusal(stub.SignUpPassword(accounts_pb2.SignUpPasswordRequest(
            username="flooder", password=PASSWORD), metadata=at(ATTACKER)))
        assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_ACCOUNTS")
        again = await stub.SignInDevice(mine, metadata=at(ATTACKER))  # an existing account
        assert not again.session.is_new_account
        assert again.session.account.account_id == first.session.account.account_id
        signed = await stub.SignInPassword(sign_in("ana"), metadata=at(ATTACKER))
        assert signed.session.account.account_id == ana.session.account.account_id
        other = await stub.SignInDevice(device(), metadata=at(OTHER))
        assert other.session.is_new_account


# ---------------------------------------------------------------- the parts, on a fake clock

class Sleeps:
    """A ``sleep`` that returns at once and remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)


def make(clock: ManualClock | None = None, keys: Keys | None = None,
         creations: tuple[float, float] = (0.0, 1.0), work: PasswordWork | None = None,
         passwords: Any = None) -> tuple[Accounts, ManualClock, Sleeps]:
    clock = clock or ManualClock(1_000_000.0)
    sleeps = Sleeps()
    verifier = OidcVerifier([OidcIssuer(ISSUER, AUDIENCE, str(keys.path))] if keys else [])
    accounts = Accounts(MemoryAccountStore(), clock, passwords=passwords or Passwords(FAST),
                        verifier=verifier, attempts=SignInAttempts(clock, sleep=sleeps),
                        password_work=work, creations=AccountCreations(clock, *creations))
    return accounts, clock, sleeps


async def reason_of(call: Any) -> str:
    with pytest.raises(ServiceError) as error:
        await call
    return error.value.reason


async def test_the_owner_signs_in_from_anywhere_while_many_addresses_guess() -> None:
    accounts, clock, sleeps = make()
    await accounts.sign_up_password("ana", PASSWORD, "Ana", "home")
    for guesser in range(3):  # 30 failures from 3 addresses, 10 each
        for n in range(10):
            assert await reason_of(accounts.sign_in_password(
                "ana", f"guess {n}", f"10.0.0.{guesser}")) == "INVALID_CREDENTIALS"
        assert await reason_of(accounts.sign_in_password(
            "ana", PASSWORD, f"10.0.0.{guesser}")) == "TOO_MANY_SIGN_INS"
    sleeps.asked.clear()  # (the third guesser's own tries were held: 20 failures before)
    assert (await accounts.sign_in_password("ana", PASSWORD, "home")).account
    assert sleeps.asked == []  # the address that made it: never held
    assert (await accounts.sign_in_password("ana", PASSWORD, "cafe")).account
    assert sleeps.asked == [8.0]  # a new address: held at most 8 s, then signed in
    assert (await accounts.sign_in_password("ana", PASSWORD, "cafe")).account
    assert sleeps.asked == [8.0]  # and familiar from now on
    assert await reason_of(accounts.sign_in_password(  # a guesser: refused, and only it
        "ana", PASSWORD, "10.0.0.1")) == "TOO_MANY_SIGN_INS"
    clock.advance(30.0)  # each guesser may try once more, held as any new address
    assert (await accounts.sign_in_password("ana", PASSWORD, "10.0.0.1")).account
    assert sleeps.asked == [8.0, 8.0]
    clock.advance(7 * 30.0)  # eight failures forgiven: 10 left, nobody held
    assert (await accounts.sign_in_password("ana", PASSWORD, "train")).account
    assert sleeps.asked == [8.0, 8.0]


async def test_a_usernames_failures_hold_unfamiliar_addresses_1_s_doubling_to_8() -> None:
    clock, sleeps = ManualClock(0.0), Sleeps()
    attempts = SignInAttempts(clock, sleep=sleeps)
    held = []
    for n in range(25):  # one failure from each of 25 addresses
        async with attempts.attempt("ana", f"10.1.0.{n}") as attempt:
            attempt.failed()
        held.append(attempts.hold("ana", "elsewhere"))
    assert held[:10] == [0.0] * 10  # one address's 10 alone hold nobody
    assert held[10:15] == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert set(held[15:]) == {8.0}
    assert sleeps.asked == held[10:24]  # each failing address was held too, as it came
    attempts.signed_in("ana", "home")
    assert attempts.hold("ana", "home") == 0.0 and attempts.hold("bia", "elsewhere") == 0.0
    clock.advance(4 * 30.0)  # the count stopped at 18: 4 forgiven, still the most
    assert attempts.hold("ana", "elsewhere") == 8.0
    waits = []
    for _ in range(4):
        clock.advance(30.0)
        waits.append(attempts.hold("ana", "elsewhere"))
    assert waits == [4.0, 2.0, 1.0, 0.0]  # gone 4 minutes after the last failure


async def test_guesses_sent_at_once_count_as_they_start_and_a_right_one_costs_nothing() -> None:
    clock = ManualClock(0.0)
    attempts = SignInAttempts(clock, per_pair=AttemptRule(3, 1 / 30),
                              per_address=AttemptRule(5, 1 / 5))
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(3):  # three checks under way at once: the pair's allowance
            await stack.enter_async_context(attempts.attempt("ana", "a"))
        with pytest.raises(ServiceError) as refused:
            await stack.enter_async_context(attempts.attempt("ana", "a"))
        assert refused.value.reason == "TOO_MANY_SIGN_INS"
        await stack.enter_async_context(attempts.attempt("bia", "a"))  # another username
    for _ in range(3):  # those ended without a wrong password: all given back
        async with attempts.attempt("ana", "a") as attempt:
            attempt.failed()
    assert attempts.wait("ana", "a") > 0 and attempts.wait("ana", "b") == 0
    attempts.signed_in("ana", "a")  # a right password forgets the pair's failures
    assert attempts.wait("ana", "a") == 0
    for username in ("bia", "cai"):  # the address's own allowance (5) runs out across names
        async with attempts.attempt(username, "a") as attempt:
            attempt.failed()
    with pytest.raises(ServiceError):
        async with attempts.attempt("dora", "a"):
            pass


async def test_a_right_password_gives_back_its_try_and_forgets_the_failures() -> None:
    accounts, _, _ = make()
    await accounts.sign_up_password("ana", PASSWORD, "Ana", "home")
    for _ in range(3):
        for n in range(9):  # the owner mistypes 9 times, then gets it right: never refused
            assert await reason_of(accounts.sign_in_password(
                "ana", f"typo {n}", "laptop")) == "INVALID_CREDENTIALS"
        assert (await accounts.sign_in_password("ana", PASSWORD, "laptop")).account


async def test_new_accounts_are_limited_per_address_and_sign_ins_never_are(
        keys: Keys) -> None:
    accounts, clock, _ = make(keys=keys, creations=(60.0, 3.0))
    mine = await accounts.sign_in_device(secret_of("d"), "Ana", "a")
    await accounts.sign_up_password("ana", PASSWORD, "Ana P", "a")
    await accounts.sign_in_oidc(keys.token(sub="person-a"), "", "a")
    for call in (accounts.sign_in_device(secret_of("e"), "Bia", "a"),
                 accounts.sign_up_password("bia", PASSWORD, "Bia", "a"),
                 accounts.sign_in_oidc(keys.token(sub="person-b"), "", "a")):
        assert await reason_of(call) == "TOO_MANY_ACCOUNTS"
    # signing in to the accounts it has: never counted, never refused
    assert (await accounts.sign_in_device(secret_of("d"), "", "a")).account == mine.account
    assert (await accounts.sign_in_password("ana", PASSWORD, "a")).account
    assert not (await accounts.sign_in_oidc(keys.token(sub="person-a"), "", "a")).is_new
    assert (await accounts.sign_in_device(secret_of("e"), "Bia", "b")).is_new  # another address
    assert await reason_of(accounts.sign_up_password("ana", PASSWORD, "", "b")) \
        == "IDENTITY_TAKEN"  # a taken username is given back: b has two left
    await accounts.sign_in_device(secret_of("f"), "Cai", "b")
    await accounts.sign_in_device(secret_of("g"), "Dora", "b")
    assert await reason_of(accounts.sign_in_device(secret_of("h"), "Eva", "b")) \
        == "TOO_MANY_ACCOUNTS"
    clock.advance(60.0)  # one a minute
    assert (await accounts.sign_in_device(secret_of("h"), "Eva", "a")).is_new
    assert await reason_of(accounts.sign_in_device(secret_of("i"), "Fay", "a")) \
        == "TOO_MANY_ACCOUNTS"


async def test_without_a_limit_an_address_makes_accounts_freely() -> None:
    accounts, _, _ = make(creations=(0.0, 1.0))
    for n in range(30):
        assert (await accounts.sign_in_device(secret_of(f"{n:02d}"), "", "a")).is_new


# ---------------------------------------------------------------- argon2's turns

class Hashes:
    """Work for ``PasswordWork`` that holds its thread until the test lets it finish, and the
    order the works started in."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.started: list[str] = []
        self._changed = asyncio.Event()
        self._go: dict[str, threading.Event] = {}

    def submit(self, work: PasswordWork, address: str, name: str, *, is_familiar: bool = False
               ) -> asyncio.Future[str]:
        self._go[name] = threading.Event()
        if is_familiar:
            return asyncio.ensure_future(work.run(address, self.work, name, is_familiar=True))
        return asyncio.ensure_future(work.run(address, self.work, name))

    def work(self, name: str) -> str:
        self.loop.call_soon_threadsafe(self._start, name)
        assert self._go[name].wait(DEADLINE), f"{name} was never let finish"
        return name

    def _start(self, name: str) -> None:
        self.started.append(name)
        self._changed.set()

    def finish(self, name: str) -> None:
        self._go[name].set()

    async def until(self, condition: Callable[[], bool]) -> None:
        async def wait() -> None:
            while not condition():
                self._changed.clear()
                await self._changed.wait()
        await asyncio.wait_for(wait(), DEADLINE)

    async def until_started(self, count: int) -> None:
        await self.until(lambda: len(self.started) >= count)


async def settle() -> None:
    """Every call submitted has reached its queue (or been refused)."""
    for _ in range(5):
        await asyncio.sleep(0)


async def test_argon2_slots_go_to_the_waiting_addresses_in_turn() -> None:
    work, hashes = PasswordWork(at_once=2, per_address=4, waiting=32), Hashes()
    flood = [hashes.submit(work, "a", f"a{n}") for n in range(1, 7)]
    await settle()
    honest = hashes.submit(work, "b", "b1")
    await settle()
    assert (work.running, work.waiting, work.waiting_of("a")) == (2, 5, 4)
    for name in ("a1", "a2", "a3", "b1", "a4", "a5", "a6"):
        await hashes.until(lambda name=name: name in hashes.started)  # type: ignore[misc]
        hashes.finish(name)
    assert await asyncio.wait_for(honest, DEADLINE) == "b1"
    assert await asyncio.wait_for(asyncio.gather(*flood), DEADLINE) == \
        [f"a{n}" for n in range(1, 7)]
    assert hashes.started == ["a1", "a2", "a3", "b1", "a4", "a5", "a6"]
    assert (work.running, work.waiting, work.addresses_waiting) == (0, 0, 0)


async def test_an_address_waits_with_a_few_and_its_next_are_refused_at_once() -> None:
    work, hashes = PasswordWork(at_once=2, per_address=4, waiting=32), Hashes()
    admitted = [hashes.submit(work, "a", f"a{n}") for n in range(6)]
    await settle()
    with pytest.raises(ServiceError) as refused:
        await work.run("a", hashes.work, "never")
    assert refused.value.reason == "TOO_MANY_SIGN_INS" and refused.value.is_quota
    other = hashes.submit(work, "b", "b0")  # another address is not refused
    await settle()
    assert work.waiting_of("b") == 1
    for name in [f"a{n}" for n in range(6)] + ["b0"]:
        hashes.finish(name)
    await asyncio.wait_for(asyncio.gather(*admitted, other), DEADLINE)
    assert "never" not in hashes.started


async def test_when_all_wait_a_newcomer_takes_the_place_of_the_longest_queues_newest() -> None:
    work, hashes = PasswordWork(at_once=1, per_address=0, waiting=4), Hashes()
    running = hashes.submit(work, "a", "a0")
    await hashes.until_started(1)
    queued = [hashes.submit(work, "a", f"a{n}") for n in range(1, 5)]
    await settle()
    assert work.waiting == 4
    b = hashes.submit(work, "b", "b1")
    await settle()
    with pytest.raises(ServiceError) as evicted:  # a's newest made room
        await asyncio.wait_for(queued[-1], DEADLINE)
    assert evicted.value.reason == "TOO_MANY_SIGN_INS"
    c = hashes.submit(work, "c", "c1")
    await settle()
    with pytest.raises(ServiceError):
        await asyncio.wait_for(queued[-2], DEADLINE)
    assert (work.waiting_of("a"), work.waiting_of("b"), work.waiting_of("c")) == (2, 1, 1)
    with pytest.raises(ServiceError):  # b would then have as many as the most: refused
        await work.run("b", hashes.work, "never")
    d = hashes.submit(work, "d", "d1")  # a has 2, d none: a gives its newest again
    await settle()
    assert (work.waiting_of("a"), work.waiting_of("d"), work.waiting) == (1, 1, 4)
    with pytest.raises(ServiceError):  # everyone waits with one: a newcomer is refused
        await work.run("e", hashes.work, "never")
    for name in ("a0", "a1", "b1", "c1", "d1"):
        hashes.finish(name)
    await asyncio.wait_for(asyncio.gather(running, queued[0], b, c, d), DEADLINE)
    assert hashes.started == ["a0", "a1", "b1", "c1", "d1"]


async def test_a_newcomer_that_takes_its_own_addresses_place_keeps_the_count_right() -> None:
    """An address whose heavy calls wait, then sends a light one when every place is taken:
    the light call takes the place of the address's own newest heavy call. Its waiting count
    must then be right (before: the eviction's decrement was overwritten, the count stayed one
    too high for good, and the next newcomer's choice failed with ValueError: INTERNAL to
    every password call, as bench/hostile.py's 16 addresses found)."""
    clock = ManualClock(1000.0)
    work, hashes = PasswordWork(at_once=1, per_address=0, waiting=2, clock=clock), Hashes()
    running = hashes.submit(work, "b", "b0")
    await hashes.until_started(1)
    for _ in range(3):
        work.take("a")  # a's earlier calls: its next ones are heavy
    heavy = [hashes.submit(work, "a", f"a{n}") for n in (1, 2)]
    await settle()
    assert (work.waiting, work.waiting_of("a")) == (2, 2)
    clock.advance(60.0)  # its calls given back by time: its next one is light
    light = hashes.submit(work, "a", "a3", is_familiar=True)
    await settle()
    with pytest.raises(ServiceError):  # a's own newest heavy call made room
        await asyncio.wait_for(heavy[-1], DEADLINE)
    assert (work.waiting, work.waiting_of("a")) == (2, 2)
    c = hashes.submit(work, "c", "c1")  # every place taken: a's heavy call makes room
    await settle()
    with pytest.raises(ServiceError):
        await asyncio.wait_for(heavy[0], DEADLINE)
    assert (work.waiting, work.waiting_of("a"), work.waiting_of("c")) == (2, 1, 1)
    d = hashes.submit(work, "d", "d1")  # everyone waits with one: refused, no error
    with pytest.raises(ServiceError) as refused:
        await asyncio.wait_for(d, DEADLINE)
    assert refused.value.reason == "TOO_MANY_SIGN_INS"
    for name in ("b0", "a3", "c1"):
        hashes.finish(name)
    await asyncio.wait_for(asyncio.gather(running, light, c), DEADLINE)
    assert hashes.started == ["b0", "a3", "c1"]
    assert (work.running, work.waiting, work.addresses_waiting) == (0, 0, 0)


async def test_a_caller_gone_holds_its_slot_until_its_hash_ends() -> None:
    """A client that cancels once its hash started cannot start more hashes than the slots:
    the thread still computes, and its slot is given back when it ends."""
    work, hashes = PasswordWork(at_once=1, per_address=4, waiting=32), Hashes()
    first = hashes.submit(work, "a", "a1")
    await hashes.until_started(1)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    second = hashes.submit(work, "b", "b1")
    await settle()
    assert (work.running, work.waiting, hashes.started) == (1, 1, ["a1"])
    waiting = hashes.submit(work, "c", "c1")
    await settle()
    waiting.cancel()  # one gone while waiting: its place goes at once
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert (work.waiting, work.waiting_of("c")) == (1, 0)
    hashes.finish("a1")
    await hashes.until_started(2)
    hashes.finish("b1")
    assert await asyncio.wait_for(second, DEADLINE) == "b1"
    assert (work.running, work.waiting, hashes.started) == (0, 0, ["a1", "b1"])


async def test_sign_ins_sign_ups_and_links_hash_in_their_addresses_turn() -> None:
    """Accounts hands each hash to its PasswordWork with the caller's address."""
    seen: list[str] = []

    class Recording(PasswordWork):
        async def run(self, address: str, work: Any, *args: object, **options: Any) -> Any:
            seen.append(address)
            return await super().run(address, work, *args, **options)

    accounts, _, _ = make(work=Recording())
    guest = await accounts.sign_in_device(secret_of("d"), "Ana")
    await accounts.sign_up_password("bia", PASSWORD, "Bia", "q")
    await accounts.link_password(guest.account, "ana", PASSWORD, "r")
    await accounts.sign_in_password("ana", PASSWORD, "s")
    assert seen == ["q", "r", "s"]


# ---------------------------------------------------------------- bounded

async def test_every_map_is_bounded() -> None:
    clock = ManualClock(0.0)
    attempts = SignInAttempts(clock, max_keys=100)
    for n in range(1_000):
        async with attempts.attempt(f"user{n}", f"addr{n}") as attempt:
            attempt.failed()
        attempts.signed_in(f"user{n}", f"home{n}")
    assert attempts.keys_held == 400  # addresses, pairs, usernames, familiar pairs: 100 each
    creations = AccountCreations(clock, 60.0, 5.0, max_keys=100)
    for n in range(1_000):
        with creations.one(f"addr{n}"):
            pass
    assert creations.keys_held == 100
    work, hashes = PasswordWork(at_once=1, per_address=2, waiting=32), Hashes()
    calls = [hashes.submit(work, f"addr{n}", f"h{n}") for n in range(1_000)]
    await settle()
    assert (work.running, work.waiting, work.addresses_waiting) == (1, 32, 32)
    for n in range(1_000):
        hashes.finish(f"h{n}")
    results = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), DEADLINE)
    assert sum(isinstance(r, str) for r in results) == 33
    assert (work.running, work.waiting, work.addresses_waiting) == (0, 0, 0)



# ---------------------------------------------------------------- polite floods (the second review)

class Gate:
    """The hasher of an ``Accounts`` (its ``hash`` and ``verify``) whose hashes, once ``close``d,
    each hold their thread until the test lets the running one finish; ``started`` names each
    hash by its password, in the order they started (exact with one hash at once)."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.is_closed = False
        self._permits = threading.Semaphore(0)

    def hash(self, password: str) -> str:
        self._hold(password)
        return "fake:" + password

    def verify(self, stored: str | None, password: str) -> bool:
        self._hold(password)
        return stored == "fake:" + password

    def _hold(self, password: str) -> None:
        self.started.append(password)
        if self.is_closed:
            assert self._permits.acquire(timeout=DEADLINE), "a hash was never let finish"

    def close(self) -> None:
        self.is_closed = True

    def open(self) -> None:
        self.is_closed = False
        for _ in range(1_000):
            self._permits.release()

    def release(self) -> None:
        """The running hash may finish."""
        self._permits.release()

    async def step(self) -> None:
        """The running hash finishes, and the next one has started."""
        count = len(self.started)
        self.release()
        await eventually(lambda: len(self.started) > count)

    async def next_start(self) -> None:
        count = len(self.started)
        await eventually(lambda: len(self.started) > count)

    def count(self, password: str) -> int:
        return self.started.count(password)


async def eventually(condition: Callable[[], bool]) -> None:
    async def wait() -> None:
        while not condition():
            await asyncio.sleep(0.001)
    await asyncio.wait_for(wait(), DEADLINE)


class Flood:
    """Addresses that each keep calls in flight, ``async with``: at its end they stop, and
    every hash held by the gate may finish."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.is_over = False
        self._tasks: list[asyncio.Future[None]] = []

    def keep_calling(self, call: Callable[[], Any], answers: list[str],
                     after_refusal: Callable[[], Any], until: Callable[[], bool] = lambda: False
                     ) -> None:
        """One call in flight, again and again: the next goes as soon as one is answered
        (after a refusal, once ``after_refusal()`` returns), until ``until()``."""
        async def calling() -> None:
            while not self.is_over and not until():
                try:
                    await call()
                    answers.append("ok")
                except ServiceError as error:
                    answers.append(error.reason)
                    await after_refusal()
        self._tasks.append(asyncio.ensure_future(calling()))

    async def __aenter__(self) -> Flood:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.is_over = True  # (a cancellation that wait_for swallows ends the loop too)
        for task in self._tasks:
            task.cancel()
        self.gate.open()
        await asyncio.wait_for(asyncio.gather(*self._tasks, return_exceptions=True), DEADLINE)

    async def done(self) -> None:
        await asyncio.wait_for(asyncio.gather(*self._tasks), DEADLINE)


FLOOD = [f"10.33.0.{n}" for n in range(33)]


async def test_a_flood_of_taken_usernames_is_answered_without_a_hash_beside_the_owner() -> None:
    """Second review, finding A: 33 addresses each keeping one SignUpPassword of a taken
    username in flight held all 32 waiting places (each cost a full argon2 hash, and counted
    against nothing), and the owner's sign-in was refused, from anywhere. Now a taken
    username is answered before any hash, each such answer counts against the address's
    password checks (30 at once), and the owner's hash is the first one the server makes."""
    clock, gate = ManualClock(1_000_000.0), Gate()
    work = PasswordWork(at_once=1, per_address=4, waiting=32, clock=clock)
    accounts, _, _ = make(clock, work=work, passwords=gate)
    await accounts.sign_up_password("takenname", PASSWORD, "Owner", "home")
    gate.close()
    answers: dict[str, list[str]] = {address: [] for address in FLOOD}
    is_done = False

    async def pause() -> None:  # (the answer is at once: the next call a moment later)
        await asyncio.sleep(0.001)
    async with Flood(gate) as flood:
        for address in FLOOD:  # (each at least 31 times)
            flood.keep_calling(lambda a=address: accounts.sign_up_password(  # type: ignore[misc]
                "takenname", f"flood password {a}", "", a), answers[address], pause,
                lambda a=address: is_done and len(answers[a]) > 30)  # type: ignore[misc]
        # every address has sent its first (answered, or before: waiting for its hash)
        await eventually(lambda: all(answers.values()) or work.waiting >= 32)
        for where in ("home", "cafe"):  # the address that made it, and a new one
            mark = len(gate.started)
            owner = asyncio.ensure_future(accounts.sign_in_password("takenname", PASSWORD,
                                                                    where))
            await eventually(lambda: owner.done() or len(gate.started) > mark)
            assert gate.started[mark:] == [PASSWORD]  # the first hash since it came
            gate.release()
            assert (await asyncio.wait_for(owner, DEADLINE)).account
        is_done = True
        await flood.done()
    assert not [p for p in gate.started if p.startswith("flood")]  # the flood: no hash at all
    for address in FLOOD:
        refused = answers[address][30:]
        assert answers[address][:30] == ["IDENTITY_TAKEN"] * 30
        assert refused and set(refused) == {"TOO_MANY_SIGN_INS"}


async def test_33_addresses_signing_up_a_taken_username_do_not_shut_the_owner_out() -> None:
    """The review's repro against a server, argon2 at its default cost and one hash at once:
    33 addresses each keep a SignUpPassword of the owner's username in flight. Before, the
    owner was refused 8 of 8 times, from the address that made the account or another."""
    async with accounts_server(password_time_cost=3, password_memory_kib=65536,
                               password_hashes_at_once=1,
                               password_checks_per_address=4) as (running, stub):
        made = await stub.SignUpPassword(accounts_pb2.SignUpPasswordRequest(
            username="takenname", password=PASSWORD), metadata=at(OWNER))
        answers: list[str] = []
        is_done = False

        async def flood(address: str) -> None:
            while not is_done:
                try:
                    await stub.SignUpPassword(accounts_pb2.SignUpPasswordRequest(
                        username="takenname", password=f"flood {address}"),
                        metadata=at(address))
                    answers.append("ok")
                except grpc.aio.AioRpcError as error:
                    answers.append(quota_details(error)[0])
                await asyncio.sleep(0.1)
        tasks = [asyncio.ensure_future(flood(f"198.18.0.{n}")) for n in range(33)]
        sample = running.metrics.registry.get_sample_value
        try:
            await eventually(lambda: len(answers) >= 33
                             or (sample("copas_password_checks_waiting") or 0) >= 32)
            for address in [OWNER] * 4 + [OTHER] * 4:
                signed = await stub.SignInPassword(sign_in("takenname"), metadata=at(address))
                assert signed.session.account.account_id == made.session.account.account_id
        finally:
            is_done = True
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), DEADLINE)
        assert "IDENTITY_TAKEN" in answers
        assert set(answers) <= {"IDENTITY_TAKEN", "TOO_MANY_SIGN_INS"}


@pytest.mark.parametrize(("addresses", "each"), [(33, 1), (20, 2)])
async def test_polite_addresses_that_keep_hashing_go_after_the_owner(addresses: int,
                                                                     each: int) -> None:
    """Addresses that each keep one or two calls that do cost a hash in flight (sign-ins to
    their own accounts, right passwords: no failure limit stops them), more than the 32
    waiting places. Before, the owner was refused (33 x 1: nobody held two more than the
    owner's none) or waited behind every address (20 x 2). Now an address that made 3 password
    calls not yet forgiven waits behind those that did not, and gives them its place: the
    owner's is the first hash after its arrival, from the address that made the account or a
    new one, and the flood is still served in its turn."""
    clock, gate = ManualClock(1_000_000.0), Gate()
    work = PasswordWork(at_once=1, per_address=4, waiting=32, clock=clock)
    accounts, _, _ = make(clock, work=work, passwords=gate)
    await accounts.sign_up_password("owner", PASSWORD, "Owner", "home")
    flood = FLOOD[:addresses]
    for n, address in enumerate(flood):
        await accounts.sign_up_password(f"flood{n}", f"flood password {n}", "", address)
    gate.close()
    async with Flood(gate) as flooding:
        for n, address in enumerate(flood):
            for _ in range(each):
                flooding.keep_calling(
                    lambda n=n, a=address: accounts.sign_in_password(  # type: ignore[misc]
                        f"flood{n}", f"flood password {n}", a), [], gate.next_start)
        await eventually(lambda: work.waiting >= 32)  # the places are taken
        while min(gate.count(f"flood password {n}") for n in range(addresses)) < 5:
            await gate.step()  # a while of flooding
        for where in ("home", "cafe"):
            mark = len(gate.started)
            owner = asyncio.ensure_future(accounts.sign_in_password("owner", PASSWORD, where))
            await eventually(lambda: owner.done() or work.waiting_of(where) == 1)
            if owner.done():
                owner.result()  # (its refusal, raised)
            await gate.step()  # the flood's running hash ends: the owner's is next
            assert gate.started[mark] == PASSWORD
            await gate.step()
            assert (await asyncio.wait_for(owner, DEADLINE)).account
        served = [gate.count(f"flood password {n}") for n in range(addresses)]
        for _ in range(2 * addresses):  # and the flood goes on being served in turn
            await gate.step()
        assert all(gate.count(f"flood password {n}") > served[n] for n in range(addresses))


async def test_an_addresss_password_calls_right_or_wrong_are_hashed_30_at_once_then_1_per_5_s(
        ) -> None:
    """A flood of distinct wrong usernames from one address stopped only at the failure
    limit (30), and right passwords, sign-ups and links stopped at nothing: each cost a hash.
    Now every password call of an address takes one from its allowance of password checks
    (30 at once, then one per 5 s), and beyond, the call is refused before its hash."""
    clock, gate = ManualClock(1_000_000.0), Gate()
    accounts, _, _ = make(clock, work=PasswordWork(clock=clock), passwords=gate)
    await accounts.sign_up_password("mallory", "mallory's password", "", "10.7.0.1")
    for _ in range(9):  # right passwords: no failure
        assert (await accounts.sign_in_password("mallory", "mallory's password",
                                                "10.7.0.1")).account
    for n in range(20):  # distinct usernames, wrong: 20 failures of the address's 30
        assert await reason_of(accounts.sign_in_password(
            f"user{n}", "a wrong password", "10.7.0.1")) == "INVALID_CREDENTIALS"
    assert len(gate.started) == 30
    for call in (accounts.sign_in_password("user99", "a wrong password", "10.7.0.1"),
                 accounts.sign_in_password("mallory", "mallory's password", "10.7.0.1"),
                 accounts.sign_up_password("mallory", "another password", "", "10.7.0.1"),
                 accounts.sign_up_password("newname", "another password", "", "10.7.0.1")):
        with pytest.raises(ServiceError) as refused:
            await call
        assert refused.value.reason == "TOO_MANY_SIGN_INS" and refused.value.is_quota
    assert len(gate.started) == 30  # refused before any hash
    assert await reason_of(accounts.sign_in_password(  # another address: hashed
        "user99", "a wrong password", "10.7.0.2")) == "INVALID_CREDENTIALS"
    assert len(gate.started) == 31
    clock.advance(5.0)  # one more
    assert (await accounts.sign_in_password("mallory", "mallory's password", "10.7.0.1")).account
    assert await reason_of(accounts.sign_in_password(
        "mallory", "mallory's password", "10.7.0.1")) == "TOO_MANY_SIGN_INS"
    assert len(gate.started) == 32


async def test_a_taken_username_is_answered_before_any_hash_for_a_sign_up_and_a_link() -> None:
    gate = Gate()
    accounts, _, _ = make(passwords=gate)
    ana = await accounts.sign_up_password("ana", PASSWORD, "Ana", "home")
    guest = await accounts.sign_in_device(secret_of("g"), "Guest", "elsewhere")
    gate.close()  # a hash now would wait for the test: none may start
    assert await reason_of(accounts.sign_up_password("ANA", "another password", "", "x")) \
        == "IDENTITY_TAKEN"
    assert await reason_of(accounts.link_password(guest.account, "ana", "another password",
                                                  "x")) == "IDENTITY_TAKEN"
    assert gate.started == [PASSWORD]  # ana's sign-up's only
    gate.open()
    await accounts.link_password(ana.account, "ana", "a new password!", "home")  # its own
    assert (await accounts.sign_in_password("ana", "a new password!", "home")).account


async def test_a_familiar_sign_in_takes_the_place_of_an_unfamiliar_one_and_they_alternate(
        ) -> None:
    """When every waiting place is taken, a sign-in from an address that signed that username
    in before takes the place of the newest call from an address that did not (a guesser from
    anywhere cannot keep the owner at home out); a slot that frees goes to a familiar call and
    an unfamiliar one in turn, so neither kind waits for all of the other."""
    work, hashes = PasswordWork(at_once=1, per_address=0, waiting=4), Hashes()
    running = hashes.submit(work, "a", "a0")
    await hashes.until_started(1)
    guesses = [hashes.submit(work, address, f"{address}1") for address in "bcde"]
    await settle()
    with pytest.raises(ServiceError):  # an unfamiliar newcomer: refused, as before
        await work.run("f", hashes.work, "never")
    home = hashes.submit(work, "home", "home1", is_familiar=True)
    await settle()
    with pytest.raises(ServiceError) as evicted:  # the newest unfamiliar one gave its place
        await asyncio.wait_for(guesses[-1], DEADLINE)
    assert evicted.value.reason == "TOO_MANY_SIGN_INS"
    office = hashes.submit(work, "office", "office1", is_familiar=True)
    await settle()
    with pytest.raises(ServiceError):
        await asyncio.wait_for(guesses[-2], DEADLINE)
    assert (work.waiting, work.waiting_of("home"), work.waiting_of("d")) == (4, 1, 0)
    for name in ("a0", "home1", "b1", "office1", "c1"):
        await hashes.until(lambda name=name: name in hashes.started)  # type: ignore[misc]
        hashes.finish(name)
    await asyncio.wait_for(asyncio.gather(running, home, office, *guesses[:2]), DEADLINE)
    assert hashes.started == ["a0", "home1", "b1", "office1", "c1"]


async def test_an_address_that_hashed_a_lot_goes_after_one_that_did_not() -> None:
    """An address (or its /56, its /48) with 3 password calls not yet forgiven is heavy:
    its next calls wait behind every light one, and a light newcomer takes the place of a
    heavy call when all the places are taken."""
    clock = ManualClock(0.0)
    work, hashes = PasswordWork(at_once=1, per_address=0, waiting=3, clock=clock), Hashes()
    for _ in range(3):
        work.take("heavy")  # three calls not yet forgiven (taken usernames, say)
    for n in range(16):  # 48 from 16 /64s of one /48 (in /56s of their own)
        for _ in range(3):
            work.take(client_key(f"2001:db8:a:{n:02x}00::1"))
    running = hashes.submit(work, "x", "x0")
    await hashes.until_started(1)
    heavy = hashes.submit(work, "heavy", "heavy1")
    fresh64 = hashes.submit(work, client_key("2001:db8:a:ff00::1"), "v6")  # its /48 is heavy
    light = hashes.submit(work, "light", "light1")
    await settle()
    newcomer = hashes.submit(work, "newcomer", "newcomer1")  # the places are taken
    await settle()
    with pytest.raises(ServiceError):  # a heavy one gave its place
        await asyncio.wait_for(fresh64, DEADLINE)
    for name in ("x0", "light1", "newcomer1", "heavy1"):
        await hashes.until(lambda name=name: name in hashes.started)  # type: ignore[misc]
        hashes.finish(name)
    await asyncio.wait_for(asyncio.gather(running, heavy, light, newcomer), DEADLINE)
    assert hashes.started == ["x0", "light1", "newcomer1", "heavy1"]
    clock.advance(3 * 5.0)  # forgiven: light again
    assert work.load("heavy") < 3


async def test_an_address_whose_calls_are_refused_is_heavy_though_it_hashed_little() -> None:
    """Refused calls give their count back (they cost no hash), but an address that keeps
    being refused is flooding: its refusals make it heavy as hashes do, so its next call
    waits behind a light one's (else refusals keep a flood light for ever)."""
    clock = ManualClock(0.0)
    work, hashes = PasswordWork(at_once=1, per_address=1, waiting=32, clock=clock), Hashes()
    running = hashes.submit(work, "x", "x0")
    await hashes.until_started(1)
    flood = [hashes.submit(work, "flood", "f1")]
    await settle()
    for _ in range(3):
        with pytest.raises(ServiceError):  # its one waiting place is taken
            await work.run("flood", hashes.work, "never")
    hashes.finish("x0")
    await hashes.until(lambda: "f1" in hashes.started)
    flood.append(hashes.submit(work, "flood", "f2"))
    light = hashes.submit(work, "light", "l1")
    await settle()
    for name in ("f1", "l1", "f2"):
        await hashes.until(lambda name=name: name in hashes.started)  # type: ignore[misc]
        hashes.finish(name)
    await asyncio.wait_for(asyncio.gather(running, light, *flood), DEADLINE)
    assert hashes.started == ["x0", "f1", "l1", "f2"]


# ---------------------------------------------------------------- IPv6 networks (finding B)

def v6(prefix: str, n: int) -> str:
    """The quota key (a /64) of a host in the ``n``th /64 of ``prefix``."""
    return client_key(prefix.format(n=n))


async def test_many_64s_of_one_48_stop_making_accounts_at_the_48s_allowance() -> None:
    """Second review, finding B: new accounts were bounded per /64 only, and a /48 holds
    65,536 of them. Now an IPv6 /64's new accounts count against its /56 (4 times a /64's
    allowance) and its /48 (16 times) too; another /48, and IPv4, are not held."""
    clock = ManualClock(0.0)
    creations = AccountCreations(clock, 60.0, 2.0)  # a /64: 2 at once; /56: 8; /48: 32
    made, refusals = 0, []
    for n in range(40):  # 40 /64s, each in a /56 of its own, of one /48
        for _ in range(2):
            try:
                with creations.one(v6("2001:db8:a:{n:02x}00::1", n)):
                    made += 1
            except ServiceError as error:
                refusals.append((error.reason, error.is_quota))
    assert made == 32
    assert set(refusals) == {("TOO_MANY_ACCOUNTS", True)} and len(refusals) == 48
    with creations.one(v6("2001:db8:b:0:{n}::1", 1)):  # another /48
        pass
    for n in range(40):  # IPv4: each address its own 2, as before
        for _ in range(2):
            with creations.one(f"192.0.2.{n}"):
                pass
    made56 = 0
    for n in range(10):  # /64s of one /56: its 8
        for _ in range(2):
            with contextlib.suppress(ServiceError), creations.one(v6("2001:db8:c:{n}::1", n)):
                made56 += 1
    assert made56 == 8
    clock.advance(3600 / 60 / 16)  # the /48 makes 16 an hour per /64's one: one more
    with creations.one(v6("2001:db8:a:{n:02x}00::1", 39)):
        pass
    with pytest.raises(ServiceError), creations.one(v6("2001:db8:a:{n:02x}00::1", 38)):
        pass


async def test_forty_64s_of_one_48_do_not_make_400_accounts() -> None:
    """The review's count against a server: 40 /64s of one /48 (x-forwarded-for through the
    trusted proxy), 10 new guests each. Before, 400 were made."""
    async with accounts_server(accounts_burst=10, accounts_per_address_per_hour=60,
                               ipv6_56_factor=4, ipv6_48_factor=16) as (_, stub):
        made, began = 0, time.monotonic()
        for n in range(40):
            for _ in range(10):
                try:
                    await stub.SignInDevice(device(), metadata=at(f"2001:db8:7:{n:x}00::9"))
                    made += 1
                except grpc.aio.AioRpcError as error:
                    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                    assert quota_details(error)[0] == "TOO_MANY_ACCOUNTS"
        # the /48's burst (16 x 10), and what its rate (16 x 60 an hour) gave back meanwhile:
        # one more on a slow run (four busy processes beside the suite: 161)
        refilled = (time.monotonic() - began) * 16 * 60 / 3600
        assert 160 <= made <= 160 + int(refilled) + 1
        other = await stub.SignInDevice(device(), metadata=at("2001:db8:8::9"))
        assert other.session.is_new_account
        v4 = await stub.SignInDevice(device(), metadata=at(OTHER))
        assert v4.session.is_new_account


async def test_an_ipv6_networks_password_checks_are_bounded_by_its_56_and_48() -> None:
    clock = ManualClock(0.0)
    work = PasswordWork(clock=clock, rate=AttemptRule(2, 1 / 5))  # /56: 8, /48: 32

    def nothing() -> None:
        return None
    checked, refused = 0, 0
    for n in range(40):
        for _ in range(2):
            try:
                await work.run(v6("2001:db8:a:{n:02x}00::1", n), nothing)
                checked += 1
            except ServiceError as error:
                assert error.reason == "TOO_MANY_SIGN_INS"
                refused += 1
    assert (checked, refused) == (32, 48)
    await work.run(v6("2001:db8:b::{n}", 1), nothing)  # another /48
    for _ in range(2):  # IPv4: its own 2
        await work.run("192.0.2.1", nothing)
    in56 = 0
    for n in range(10):  # /64s of one /56: its 8
        for _ in range(2):
            with contextlib.suppress(ServiceError):
                await work.run(v6("2001:db8:c:{n}::1", n), nothing)
                in56 += 1
    assert in56 == 8


# ---------------------------------------------------------------- the new maps, bounded

async def test_the_new_maps_are_bounded() -> None:
    clock = ManualClock(0.0)
    work = PasswordWork(clock=clock, max_keys=100)
    creations = AccountCreations(clock, 60.0, 5.0, max_keys=100)
    for n in range(1_000):  # each in a /48 of its own: three keys per call
        key = v6("2001:db8:{n:x}:1::1", n)
        work.take(key)
        with creations.one(key):
            pass
    assert work.keys_held == 300  # the /64s, /56s and /48s: 100 each
    assert creations.keys_held == 300


async def test_hashes_run_on_threads_of_lower_priority_than_the_server() -> None:
    """A hash yields to the games when every core is busy: its thread's nice value is the
    process's plus ``niceness`` (Linux: each thread has its own); 0 keeps the process's."""
    def priority() -> tuple[str, int]:
        return (threading.current_thread().name,
                os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    own = os.getpriority(os.PRIO_PROCESS, 0)
    name, nice = await PasswordWork(at_once=1, niceness=5).run("198.51.100.7", priority)
    assert name.startswith("password-hash") and nice == min(own + 5, 19)
    name, nice = await PasswordWork(at_once=1, niceness=0).run("198.51.100.7", priority)
    assert nice == own
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == own  # the loop's
