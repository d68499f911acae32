"""The championship flood of ``bench/hostile.py`` (issue 38) and its honest side.

The flood (:func:`championship_flood`, in a process of its own): each flooding address (1, or
16) makes guest accounts (a device sign-in each; the server makes at most
--accounts-burst then --accounts-per-address-per-hour new ones, and the flooder reuses every
one it got, signing in to them again in later rounds) and, with them, creates championships
named like the honest one as fast as the server answers (bounded per account and per
address: the refusals are counted by reason, ``TOO_MANY_CHAMPIONSHIPS_account`` and
``..._address`` told apart by the message); and opens WatchChampionship streams on the honest
championship and on its own, anonymous and signed in, reading them (a quarter never read
after the first message: slow readers), opening each again at once when it is refused or
ends (refusals counted by reason: TOO_MANY_STREAMS past --championship-watchers-per-address).
SIGUSR1 pauses it (no new creation, sign-in or stream; the streams held stay, read as
before), SIGUSR2 resumes it; SIGTERM ends it, and it prints its counts as one JSON line.

The honest side (:class:`HonestPerson`): a person from an address of their own, signed in as
a guest, who registers into the operator's championship and unregisters, alternately, every
0.2 s, timing each call.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import signal
import time
from dataclasses import dataclass, field
from typing import Any

import grpc
from copas.v1 import accounts_pb2, accounts_pb2_grpc, championships_pb2_grpc, copas_pb2
from copas.v1 import championships_pb2 as pb

from clients.common import error_reason

NAME = "Copas Open"  # the operator's championship; the flood names its own the same
RULES = copas_pb2.RulesOverrides(max_hands=1, play_timeout_seconds=20, pass_timeout_seconds=20,
                                 moon_timeout_seconds=20)
WATCHERS_PER_ADDRESS = 12  # stream workers per flooding address (the server holds 8 an address)
CREATORS_PER_ADDRESS = 2  # workers signing in guests and creating championships
PACE = 0.2  # seconds between two of the honest person's calls
HONEST_ADDRESS = "203.0.113.251"


def settings() -> pb.ChampionshipSettings:
    return pb.ChampionshipSettings(display_name=NAME, rounds=1, rules=RULES, max_players=1000)


def flood_addresses(addresses: int) -> list[str]:
    """The flood's addresses: the same in every round (its buckets and accounts carry over,
    as a real attacker's), others for the flood of 1 and that of 16."""
    return [f"100.{66 if addresses == 1 else 67}.{a}.1" for a in range(addresses)]


def device(address: str, k: int) -> str:
    return f"champflood-{address.replace('.', '-')}-{k}-abcdefghijklmnop"


def origin(address: str, token: str = "") -> tuple[tuple[str, str], ...]:
    return (("x-forwarded-for", address),) + \
        ((("authorization", f"Bearer {token}"),) if token else ())


def why(error: grpc.aio.AioRpcError) -> str:
    """A refusal's reason; TOO_MANY_CHAMPIONSHIPS with whose bound it is."""
    reason = error_reason(error)
    if reason == "TOO_MANY_CHAMPIONSHIPS":
        reason += "_account" if "an account may" in (error.details() or "") else "_address"
    return reason


@dataclass
class Flooder:
    """One flooding address: its guests' access tokens and its championships."""

    address: str
    tokens: list[str] = field(default_factory=list)
    own: list[str] = field(default_factory=list)
    next_device: int = 0
    turn: int = 0
    held: int = 0
    most_held: int = 0


async def championship_flood(server: str, addresses: int, honest_id: str,
                             stop: asyncio.Event, running: asyncio.Event) -> dict[str, Any]:
    """The flood until ``stop``; paused while ``running`` is clear."""
    counts: collections.Counter[str] = collections.Counter()
    flooders = [Flooder(a) for a in flood_addresses(addresses)]
    # a connection of its own per address (not gRPC's shared subchannel: the server takes
    # 100 streams a connection, and the held ones would leave the others none)
    channels = [grpc.aio.insecure_channel(server, options=[("grpc.use_local_subchannel_pool", 1)])
                for _ in flooders]
    request = pb.CreateChampionshipRequest(settings=settings())

    async def create(f: Flooder, channel: grpc.aio.Channel) -> None:
        accounts = accounts_pb2_grpc.AccountServiceStub(channel)
        champs = championships_pb2_grpc.ChampionshipServiceStub(channel)
        while not stop.is_set():
            await running.wait()
            k, f.next_device = f.next_device, f.next_device + 1
            try:  # a guest: an account made before (this round or another) signs in again
                signed = await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
                    device_secret=device(f.address, k)), metadata=origin(f.address), timeout=10)
                f.tokens.append(signed.session.access_token)
                counts["guest_new" if signed.session.is_new_account else "guest_again"] += 1
            except grpc.aio.AioRpcError as error:
                f.next_device = min(f.next_device, k)
                counts[f"guest_{why(error)}"] += 1
            if not f.tokens:
                continue
            f.turn += 1
            try:
                made = await champs.CreateChampionship(
                    request, metadata=origin(f.address, f.tokens[f.turn % len(f.tokens)]),
                    timeout=10)
                f.own.append(made.championship.championship_id)
                counts["create_ok"] += 1
            except grpc.aio.AioRpcError as error:
                counts[f"create_{why(error)}"] += 1

    async def watch(f: Flooder, channel: grpc.aio.Channel, n: int) -> None:
        champs = championships_pb2_grpc.ChampionshipServiceStub(channel)
        slow, signed_in, on_own = n % 4 == 0, n % 4 in (2, 3), n % 4 == 3
        while not stop.is_set():
            await running.wait()
            target = f.own[n % len(f.own)] if on_own and f.own else honest_id
            token = f.tokens[n % len(f.tokens)] if signed_in and f.tokens else ""
            call = champs.WatchChampionship(pb.WatchChampionshipRequest(
                championship_id=target), metadata=origin(f.address, token))
            holding = False
            try:
                await call.read()
                holding = True
                f.held += 1
                f.most_held = max(f.most_held, f.held)
                counts["watch_opened"] += 1
                if slow:
                    await stop.wait()  # never reads again
                while not stop.is_set():
                    if await call.read() is grpc.aio.EOF:
                        counts["watch_ended"] += 1
                        break
                    counts["watch_messages"] += 1
            except grpc.aio.AioRpcError as error:
                counts[f"watch_{why(error)}"] += 1
            finally:
                if holding:
                    f.held -= 1
                call.cancel()

    tasks = [asyncio.create_task(create(f, channel))
             for f, channel in zip(flooders, channels, strict=True)
             for _ in range(CREATORS_PER_ADDRESS)]
    tasks += [asyncio.create_task(watch(f, channel, n))
              for f, channel in zip(flooders, channels, strict=True)
              for n in range(WATCHERS_PER_ADDRESS)]
    await stop.wait()
    held = [f.held for f in flooders]  # before the streams are cancelled
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for channel in channels:
        await channel.close()
    made = [len(f.own) for f in flooders]
    return {**dict(sorted(counts.items())),
            "streams_held_at_end": sum(held), "streams_held_per_address_max": max(held),
            "streams_held_per_address_most_ever": max(f.most_held for f in flooders),
            "created_per_address_max": max(made), "created_per_address_min": min(made),
            "guests_per_address_max": max(f.next_device for f in flooders)}


async def flooder(server: str, addresses: int, honest_id: str) -> dict[str, Any]:
    """The flood as its process runs it: SIGTERM ends it, SIGUSR1 pauses, SIGUSR2 resumes."""
    stop, running = asyncio.Event(), asyncio.Event()
    running.set()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: (stop.set(), running.set()))
    loop.add_signal_handler(signal.SIGUSR1, running.clear)
    loop.add_signal_handler(signal.SIGUSR2, running.set)
    return await championship_flood(server, addresses, honest_id, stop, running)


# ---------------------------------------------------------------- the honest side


async def operator_championship(channel: grpc.aio.Channel, admin_token: str) -> str:
    """The operator's championship (open for registration, started by nobody)."""
    from copas.admin.v1 import admin_pb2, admin_pb2_grpc

    made = await admin_pb2_grpc.AdminServiceStub(channel).CreateChampionship(
        admin_pb2.CreateChampionshipRequest(settings=settings(), reason="bench"),
        metadata=(("authorization", f"Bearer {admin_token}"),))
    return str(made.championship.championship_id)


@dataclass
class Registrations:
    """What the honest person's calls came to."""

    ok: int = 0
    tried: int = 0
    latencies: list[float] = field(default_factory=list)
    refused: collections.Counter[str] = field(default_factory=collections.Counter)


class HonestPerson:
    """A guest from an address of their own registering into ``championship_id`` and
    unregistering from it, alternately."""

    def __init__(self, channel: grpc.aio.Channel, championship_id: str) -> None:
        self._accounts = accounts_pb2_grpc.AccountServiceStub(channel)
        self.champs = championships_pb2_grpc.ChampionshipServiceStub(channel)
        self.championship_id = championship_id
        self._metadata = origin(HONEST_ADDRESS)
        self._registered = False

    async def sign_in(self) -> None:
        """Signs in (again: the same account; an access token lasts 15 minutes)."""
        signed = await self._accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
            device_secret="the-honest-persons-device-secret", display_name="Honest"),
            metadata=self._metadata)
        self._metadata = origin(HONEST_ADDRESS, signed.session.access_token)

    async def one(self, done: Registrations) -> None:
        """A Register, or an Unregister when registered."""
        done.tried += 1
        request: Any = pb.UnregisterRequest(championship_id=self.championship_id) \
            if self._registered else pb.RegisterRequest(championship_id=self.championship_id)
        call = self.champs.Unregister if self._registered else self.champs.Register
        began = time.monotonic()
        try:
            await call(request, metadata=self._metadata, timeout=30)
            done.latencies.append(time.monotonic() - began)
            done.ok += 1
            self._registered = not self._registered
        except grpc.aio.AioRpcError as error:
            reason = why(error)
            done.refused[reason] += 1
            if reason in ("ALREADY_REGISTERED", "NOT_REGISTERED"):
                self._registered = reason == "ALREADY_REGISTERED"

    async def run(self, until: asyncio.Event | None = None, calls: int = 0) -> Registrations:
        """A call every ``PACE`` seconds until ``until`` is set, or ``calls`` of them."""
        done = Registrations()
        while (until is None or not until.is_set()) and (not calls or done.tried < calls):
            began = time.monotonic()
            await self.one(done)
            left = PACE - (time.monotonic() - began)
            if until is None:
                await asyncio.sleep(max(left, 0.0))
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(until.wait(), max(left, 0.0))
        return done

    async def watch(self, told: collections.Counter[str]) -> None:
        """The person following the championship (WatchChampionship, signed in) until
        cancelled, counting its messages (and its refusals, which there should be none of)."""
        while True:
            call = self.champs.WatchChampionship(pb.WatchChampionshipRequest(
                championship_id=self.championship_id), metadata=self._metadata)
            try:
                async for _ in call:
                    told["messages"] += 1
            except grpc.aio.AioRpcError as error:
                told[f"refused_{why(error)}"] += 1
                await asyncio.sleep(1.0)
            finally:
                call.cancel()

    async def first_page(self, honest: set[str]) -> tuple[int, int, int]:
        """ListChampionships' first page as the person sees it: (listed, the flood's, the
        honest championship's place on it, 0 if absent)."""
        listed = (await self.champs.ListChampionships(pb.ListChampionshipsRequest(),
                                                      metadata=self._metadata)).championships
        ids = [c.championship_id for c in listed]
        place = ids.index(self.championship_id) + 1 if self.championship_id in ids else 0
        return len(ids), sum(cid not in honest for cid in ids), place

    async def all_listed(self, honest: set[str]) -> int:
        """The championships not over that are not the operator's, over every page."""
        found, token = 0, ""
        while True:
            page = await self.champs.ListChampionships(pb.ListChampionshipsRequest(
                page_size=100, page_token=token), metadata=self._metadata)
            found += sum(c.championship_id not in honest for c in page.championships)
            token = page.next_page_token
            if not token:
                return found
