"""Floods of issue 27's findings 2, 4, 5 and 6 beside an honest table; does the honest player
notice?

Starts the server (its defaults: SQLite in a temporary directory, quotas on, the web port on
loopback; loopback is a trusted proxy, so the gRPC flooders can speak for many addresses with
``x-forwarded-for``, and the web flooders connect from addresses of 127.0.0.0/8) and, per
round, times an honest table of four players (``bench/flood.py``'s victim over gRPC: a move
every 25 ms, each PlayCard's latency) in each phase: quiet, then beside each flood. In the
quiet phase and beside flood 2 an honest browser (``bench/hostile_web.py``: the same victim
over the web port in Connect's JSON, each player reading its WatchTable stream, and the page
fetched every 0.2 s) is timed too, after the gRPC victim. Each flood runs in a process of its
own.

* Flood 2 (slow readers on the web port): 17 addresses x 64 connections, a WatchTable of the
  two honest tables or a WatchLobby, that read their first message and never again; each
  tries once (with ``--slow-retry S``, a refused one is tried again after S seconds).
* Flood 4 (a Play stream of refusals): one player token's 4 Play streams (its most) send
  refused actions (a card while nobody may play) as fast as the server takes them, each
  opened again at once when the server ends it (TOO_MANY_REFUSALS).
* Flood 5 (spectators): 64 spectators (eight addresses, eight each) read the honest table's
  stream, and two more addresses try to open 1,024 spectator streams each on a table of bots
  playing fast (the quotas let each hold ``--max-spectator-streams-per-peer``).
* Flood 6 (snapshot amplification): two addresses open spectator streams on a long finished
  game with ``after_sequence=1``, read the snapshot and cancel, as fast as their quota allows.
* Accounts from one address and from 16 (issue 37): each address's 8 workers make new guest
  accounts, sign up with passwords, guess passwords of a real username and sign in to their
  own password account, as fast as the server answers. Beside them an honest person (another
  addresses: a person's devices, in turn) signs in with their password every second
  (``--sign-in-every``), in the quiet phase too: each sign-in is a password hash, an honest
  load that the flood's p99 is compared with, not the flood's doing: ``accounts1_honest_sign_ins``
  and ``accounts16_honest_sign_ins`` print how many succeeded of how many, with their p99.
* Championships from one address and from 16 (issue 38; ``bench/hostile_championships.py``):
  each address signs in guests (the server makes it a few new accounts; it reuses every one
  it got, in later rounds too) and, as fast as the server answers, creates championships
  named like the operator's (bounded per account and per address) and opens WatchChampionship
  streams, anonymous and signed in, on the operator's championship and on its own, reading
  them (a quarter never read: slow readers), opening each again at once when refused
  (TOO_MANY_STREAMS past ``--championship-watchers-per-address``); refusals counted by
  reason. The addresses are the same in every round, as a real flood's, so what the server
  let them make accumulates.

With a championship phase chosen, the operator creates a championship (AdminService) at the
start, and an honest person (a guest from an address of their own, following it with
WatchChampionship) registers into it and unregisters, alternately, every 0.2 s while the
victim plays, in quiet too: how many succeeded, their p50/p99. Then the person's
ListChampionships' first page (how many of it are the flood's, whether the operator's
championship is on it) and the server's CPU per registration call: the flood paused (SIGUSR1:
no new call, its streams held and read as before), the server's CPU over 3 s of nothing (its
idle rate), then over ``--registration-calls`` calls 0.2 s apart and 0.5 s after, less the
idle rate over that window, over the calls; the same in quiet. Whole-phase CPU over the calls
would be wrong, the flood burning CPU of its own; so is a window with the flood running, for
the same reason: paused, what is left is what the flood holds (its streams and
championships), which is what a registration can be made to cost more.
``championships1_registration_cpu_ratio`` and ``championships16_registration_cpu_ratio`` are
the medians of that over quiet's. After each flood: its counts (championships created and
refused by reason, streams held and refused, per address) and the championships not over the
server lists that are not the operator's.

Prints each phase's p50/p99 and how busy the server was (its CPU seconds a second), the
flooders' counts, and ``flood2_p99_ratio`` (the honest
browser's PlayCard), ``flood2_grpc_p99_ratio``, ``flood2_page_p99_ratio``, ``flood4_p99_ratio``,
``flood5_p99_ratio``, ``flood6_p99_ratio``, ``accounts1_p99_ratio``, ``accounts16_p99_ratio``,
``championships1_p99_ratio`` and ``championships16_p99_ratio`` (the honest p99 beside the flood
/ quiet, medians over rounds; the target is <= 2.0 each), and the registration CPU ratios
(target <= 2.0 each). Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
from copas.v1 import cards_pb2, copas_pb2, copas_pb2_grpc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import hostile_championships as champ  # type: ignore[import-not-found]  # noqa: E402
from flood import free_port, p, seat_victim, victim  # type: ignore[import-not-found]  # noqa: E402
from hostile_web import slow_readers, web_victim  # type: ignore[import-not-found]  # noqa: E402

PHASES = ("quiet", "flood2", "flood4", "flood5", "flood6", "accounts1", "accounts16",
          "championships1", "championships16")
BROWSER_PHASES = ("quiet", "flood2")  # the phases that time the honest browser too
CHAMPIONSHIP_PHASES = ("championships1", "championships16")
ADMIN_TOKEN = "the-operators-token-of-bench-hostile"
IDLE_WINDOW = 3.0  # seconds of the server's CPU with no registration, before the window

FAST = {"trick_pause_seconds": 0.0, "hand_pause_seconds": 0.0, "play_timeout_seconds": 0.0,
        "pass_timeout_seconds": 0.0, "moon_timeout_seconds": 0.0}


HONEST_DEVICES = tuple(f"203.0.113.{240 + n}" for n in range(8))


def as_client(address: str) -> tuple[tuple[str, str], ...]:
    return (("x-forwarded-for", address),)


async def wind_down(stop: asyncio.Event, tasks: list[asyncio.Task[Any]],
                    channels: list[grpc.aio.Channel], *, cancel: bool = True) -> None:
    """A flood's end: once ``stop`` is set, its tasks end (cancelled, or by themselves when
    they watch ``stop``) and its channels close."""
    await stop.wait()
    if cancel:
        for task in tasks:
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for channel in channels:
        await channel.close()


async def bot_table(stub: copas_pb2_grpc.CopasServiceStub, seed: str) -> str:
    table = (await stub.CreateTable(copas_pb2.CreateTableRequest(
        seed=seed, bot_seats=4, rules=copas_pb2.RulesOverrides(**FAST)),  # type: ignore[arg-type]
        metadata=as_client("203.0.113.200"))).table
    return str(table.table_id)


async def flood5(server: str, honest_table: str, bots_table: str, stop: asyncio.Event
                 ) -> dict[str, int]:
    """64 spectators of the honest table and two addresses asking 1,024 streams each."""
    counts = {"opened": 0, "refused": 0, "messages": 0}

    async def read(stub: Any, table_id: str, address: str) -> None:
        call = stub.WatchTable(copas_pb2.WatchTableRequest(table_id=table_id),
                               metadata=as_client(address))
        try:
            async for _ in call:
                counts["messages"] += 1
                if stop.is_set():
                    break
            counts["opened"] += 1
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                counts["refused"] += 1
        finally:
            call.cancel()

    channels = [grpc.aio.insecure_channel(server) for _ in range(24)]
    stubs = [copas_pb2_grpc.CopasServiceStub(c) for c in channels]
    tasks = [asyncio.create_task(read(stubs[i % 8], honest_table, f"198.51.100.{i // 8 + 1}"))
             for i in range(64)]
    tasks += [asyncio.create_task(read(stubs[8 + i % 16], bots_table,
                                       f"203.0.113.{1 + i // 1024}")) for i in range(2048)]
    await wind_down(stop, tasks, channels)
    return counts


async def flood6(server: str, finished_table: str, stop: asyncio.Event) -> dict[str, int]:
    """Two addresses opening and resetting history snapshots as fast as they are let."""
    counts = {"snapshots": 0, "refused": 0}

    async def worker(stub: Any, address: str) -> None:
        request = copas_pb2.WatchTableRequest(table_id=finished_table, after_sequence=1)
        while not stop.is_set():
            call = stub.WatchTable(request, metadata=as_client(address))
            try:
                await call.read()
                counts["snapshots"] += 1
            except grpc.aio.AioRpcError:
                counts["refused"] += 1
                await asyncio.sleep(0.005)
            finally:
                call.cancel()

    channels = [grpc.aio.insecure_channel(server) for _ in range(2)]
    tasks = [asyncio.create_task(worker(copas_pb2_grpc.CopasServiceStub(channels[i % 2]),
                                        f"192.0.2.{1 + i % 2}")) for i in range(16)]
    await wind_down(stop, tasks, channels, cancel=False)
    return counts


async def flood4(server: str, stop: asyncio.Event) -> dict[str, int]:
    """One token's 4 Play streams sending refused actions as fast as the server takes them
    (the results read); a stream the server ends is opened again at once."""
    counts: collections.Counter[str] = collections.Counter()
    origin = as_client("198.51.100.44")
    channels = [grpc.aio.insecure_channel(server) for _ in range(4)]
    stubs = [copas_pb2_grpc.CopasServiceStub(c) for c in channels]
    table = (await stubs[0].CreateTable(copas_pb2.CreateTableRequest(),
                                        metadata=origin)).table
    join = await stubs[0].JoinTable(copas_pb2.JoinTableRequest(
        table_id=table.table_id, display_name="flood4"), metadata=origin)
    metadata = (("authorization", f"Bearer {join.player_token}"), *origin)
    opening = copas_pb2.PlayRequest(open=copas_pb2.WatchTableRequest(table_id=table.table_id))
    refused = copas_pb2.PlayRequest(play_card=copas_pb2.PlayCardRequest(
        card=cards_pb2.Card(text="2C")))  # nobody may play: the table waits for players

    async def read(call: Any) -> None:
        async for response in call:
            if response.WhichOneof("kind") == "result":
                counts["results"] += 1
                counts["refused"] += response.result.HasField("error")

    async def stream(stub: Any) -> None:
        while not stop.is_set():
            call = stub.Play(metadata=metadata)
            reading = asyncio.create_task(read(call))
            try:
                await call.write(opening)
                counts["opened"] += 1
                while not reading.done():
                    await call.write(refused)
                    counts["sent"] += 1
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
                pass
            with contextlib.suppress(grpc.aio.AioRpcError):
                await reading
            code, details = await call.code(), await call.details()
            if "in a row" in (details or ""):
                counts["ended_too_many_refusals"] += 1
            else:
                counts[f"ended_{code.name}"] += 1
                await asyncio.sleep(0.005)

    tasks = [asyncio.create_task(stream(stubs[i])) for i in range(4)]
    await wind_down(stop, tasks, channels)
    return dict(counts)


HONEST_USER = "honest.person"
HONEST_PASSWORD = "the honest person's password"


async def account_flood(server: str, addresses: int, stop: asyncio.Event) -> dict[str, int]:
    """``addresses`` addresses, 8 workers each, making accounts, signing up, guessing the
    honest person's password and signing in to their own account, as fast as answered."""
    from copas.v1 import accounts_pb2, accounts_pb2_grpc

    counts: collections.Counter[str] = collections.Counter()
    channels = [grpc.aio.insecure_channel(server) for _ in range(min(addresses, 8))]
    stubs = [accounts_pb2_grpc.AccountServiceStub(c) for c in channels]

    async def worker(n: int) -> None:
        origin = as_client(f"100.64.{n % addresses}.1")
        stub = stubs[n % len(stubs)]
        own = f"flood{n}"
        with contextlib.suppress(grpc.aio.AioRpcError):
            await stub.SignUpPassword(accounts_pb2.SignUpPasswordRequest(
                username=own, password=HONEST_PASSWORD), metadata=origin)
        k = 0
        while not stop.is_set():
            k += 1
            calls = (
                ("guest", stub.SignInDevice(accounts_pb2.SignInDeviceRequest(
                    device_secret=f"flood-device-{n}-{k}-abcdefghijkl"), metadata=origin)),
                ("sign_up", stub.SignUpPassword(accounts_pb2.SignUpPasswordRequest(
                    username=f"f{n}x{k}", password=HONEST_PASSWORD), metadata=origin)),
                ("guess", stub.SignInPassword(accounts_pb2.SignInPasswordRequest(
                    username=HONEST_USER, password=f"guess {k}"), metadata=origin)),
                ("own", stub.SignInPassword(accounts_pb2.SignInPasswordRequest(
                    username=own, password=HONEST_PASSWORD), metadata=origin)))
            name, call = calls[k % len(calls)]
            try:
                await call
                counts[f"{name}_ok"] += 1
            except grpc.aio.AioRpcError as error:
                counts[f"{name}_{error.code().name}"] += 1

    tasks = [asyncio.create_task(worker(n)) for n in range(8 * addresses)]
    await wind_down(stop, tasks, channels, cancel=False)
    return dict(counts)


async def honest_sign_ins(stub: Any, until: asyncio.Event, every: float
                          ) -> tuple[int, int, list[float]]:
    """The honest person signing in with their password every ``every`` seconds, from their
    own devices' addresses in turn (``HONEST_DEVICES``: each then signs in once every 8 s,
    within an address's allowance of password checks, one per 5 s after a burst of 30),
    until ``until``: (succeeded, tried, latencies of those that succeeded)."""
    from copas.v1 import accounts_pb2

    ok = tried = 0
    latencies: list[float] = []
    failures: collections.Counter[str] = collections.Counter()
    while not until.is_set():
        tried += 1
        began = time.monotonic()
        try:
            await stub.SignInPassword(accounts_pb2.SignInPasswordRequest(
                username=HONEST_USER, password=HONEST_PASSWORD),
                metadata=as_client(HONEST_DEVICES[tried % len(HONEST_DEVICES)]), timeout=30)
            ok += 1
            latencies.append(time.monotonic() - began)
        except grpc.aio.AioRpcError as error:
            failures[f"{error.code().name} {error.details()}"[:120]] += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(until.wait(), every)
    if failures:
        print(f"the honest person's failed sign-ins: {dict(failures)}", flush=True)
    return ok, tried, latencies


async def flooder(kind: str, server: str, tables: list[str], slow_retry: float
                  ) -> dict[str, Any]:
    if kind.startswith("championships"):
        return await champ.flooder(server, int(kind.removeprefix("championships")), tables[0])
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    if kind == "2":
        return await slow_readers(int(tables[0]), tables[1:], stop, slow_retry)
    if kind == "4":
        return await flood4(server, stop)
    if kind == "5":
        return await flood5(server, tables[0], tables[1], stop)
    if kind.startswith("accounts"):
        return await account_flood(server, int(kind.removeprefix("accounts")), stop)
    return await flood6(server, tables[0], stop)


def tokens_of(honest: tuple[str, list[tuple[tuple[str, str], ...]], Any]) -> list[str]:
    return [metadata[0][1].removeprefix("Bearer ") for metadata in honest[1]]


def cpu_seconds(pid: int) -> float:
    """A process's CPU time so far, user and system (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def summary(latencies: list[float]) -> str:
    return f"p50 {p(latencies, .5) * 1e3:.2f} ms, p99 {p(latencies, .99) * 1e3:.2f} ms"


async def registration_cpu(person: Any, server_pid: int, calls: int
                           ) -> tuple[float, float, float, Any]:
    """The server's CPU per honest registration call (a Register or an Unregister, one
    every 0.2 s), with nothing else asking anything of the server (the victim's game over,
    a flood paused: only the streams it holds stay, read as before): the server's CPU over
    ``IDLE_WINDOW`` seconds of no call first (its idle rate: timers, the championships'
    driver, what the held streams cost by themselves), then over ``calls`` calls and 0.5 s
    after the last (each watcher's message of it). (gross, net, idle rate, the calls): gross
    is the window's CPU over the calls that succeeded, net the same less the idle rate over
    the window, the CPU the calls themselves caused: their handling and every message to
    every watcher they changed the championship for."""
    cpu, began = cpu_seconds(server_pid), time.monotonic()
    await asyncio.sleep(IDLE_WINDOW)
    idle = (cpu_seconds(server_pid) - cpu) / (time.monotonic() - began)
    cpu, began = cpu_seconds(server_pid), time.monotonic()
    done = await person.run(calls=calls)
    await asyncio.sleep(0.5)
    used, span = cpu_seconds(server_pid) - cpu, time.monotonic() - began
    ok = max(done.ok, 1)
    return used / ok, (used - idle * span) / ok, idle, done


def py_spy(args: argparse.Namespace, server_pid: int, name: str) -> subprocess.Popen[str] | None:
    """With ``--py-spy DIR``: py-spy sampling the server (its collapsed stacks in
    DIR/``name``.txt, for flamegraph.pl or speedscope) until stopped."""
    if not args.py_spy:
        return None
    Path(args.py_spy).mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        ["py-spy", "record", "--pid", str(server_pid), "--nonblocking", "--format", "raw",
         "--rate", "200", "-o", str(Path(args.py_spy) / f"{name}.txt")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)


def stop_py_spy(spy: subprocess.Popen[str] | None) -> None:
    if spy is not None:
        spy.send_signal(signal.SIGINT)  # py-spy writes what it sampled, then exits
        spy.wait(30)


async def rounds(address: str, web_port: int, server_pid: int, args: argparse.Namespace
                 ) -> dict[str, dict[str, list[float]]]:
    """The p99s of each phase, by victim: ``grpc`` (every phase), ``browser`` and ``page``
    (the BROWSER_PHASES); and ``server_cpu``, the server's CPU seconds a second while the gRPC
    victim played (a figure other processes on the machine do not move as much)."""
    p99: dict[str, dict[str, list[float]]] = {
        "grpc": {phase: [] for phase in args.phases},
        "server_cpu": {phase: [] for phase in args.phases},
        "browser": {phase: [] for phase in BROWSER_PHASES},
        "page": {phase: [] for phase in BROWSER_PHASES},
        # The honest person's sign-ins run in quiet too when an accounts phase is run: they
        # are the honest load (a hash a second) whose p99 the flood's is compared with.
        "sign_in": {phase: [] for phase in args.phases
                    if phase.startswith("accounts") or (phase == "quiet" and any(
                        other.startswith("accounts") for other in args.phases))}}
    registering = [phase for phase in args.phases if phase in CHAMPIONSHIP_PHASES]
    registering = ["quiet", *registering] if registering else []  # the honest registrations
    for figure in ("registration_cpu", "registration_gross", "registration_idle",
                   "registration_ok", "registration_p50", "registration_p99",
                   "first_page_flood", "first_page_place", "flood_listed"):
        p99[figure] = {phase: [] for phase in registering}
    async with grpc.aio.insecure_channel(address) as channel:
        stub = copas_pb2_grpc.CopasServiceStub(channel)
        from copas.v1 import accounts_pb2, accounts_pb2_grpc

        accounts = accounts_pb2_grpc.AccountServiceStub(channel)
        await accounts.SignUpPassword(accounts_pb2.SignUpPasswordRequest(
            username=HONEST_USER, password=HONEST_PASSWORD), metadata=as_client("203.0.113.250"))
        finished = ""
        if "flood6" in args.phases:
            finished = await bot_table(stub, "long")
            watch = stub.WatchTable(copas_pb2.WatchTableRequest(table_id=finished))
            async for response in watch:  # a long game: a snapshot after 1 lists many events
                if response.event.view.phase == copas_pb2.PHASE_GAME_OVER:
                    break
            watch.cancel()
            print(f"finished game: {response.event.sequence} events", flush=True)
        person, watching, told = None, None, collections.Counter[str]()
        if registering:
            person = champ.HonestPerson(channel, await champ.operator_championship(
                channel, ADMIN_TOKEN))
            await person.sign_in()
            watching = asyncio.create_task(person.watch(told))
        honest_ids = {person.championship_id} if person is not None else set()
        for number in range(args.rounds):
            origin = as_client(f"203.0.113.{10 + number}")  # its quota of unfinished tables
            for phase in args.phases:
                honest = await seat_victim(stub, f"{number}-{phase}", origin)
                browser = (await seat_victim(stub, f"{number}-{phase}-web", origin)
                           if phase in BROWSER_PHASES else None)
                flooding = None
                if phase != "quiet":
                    if phase == "flood2":
                        assert browser is not None
                        tables = [str(web_port), honest[0], browser[0]]
                    elif phase == "flood5":
                        tables = [honest[0], await bot_table(stub, f"b{number}")]
                    elif phase in CHAMPIONSHIP_PHASES:
                        assert person is not None
                        tables = [person.championship_id]
                    else:
                        tables = [finished] if phase == "flood6" else []
                    kind = phase if phase.startswith(("accounts", "championships")) \
                        else phase[-1]
                    flooding = subprocess.Popen(
                        [sys.executable, __file__, "--slow-retry", str(args.slow_retry),
                         "--flood", kind, address, *tables],
                        cwd=ROOT, stdout=subprocess.PIPE, text=True)
                    await asyncio.sleep(2.0)  # let the flood reach full speed
                spy = py_spy(args, server_pid, f"{phase}-round{number + 1}")
                cpu, began = cpu_seconds(server_pid), time.monotonic()
                flooder_cpu = cpu_seconds(flooding.pid) if flooding is not None else 0.0
                done = asyncio.Event()
                signing = asyncio.create_task(honest_sign_ins(accounts, done, args.sign_in_every)) \
                    if phase in p99["sign_in"] else None
                registrations = None
                if phase in registering:
                    assert person is not None
                    await person.sign_in()  # a token of 15 minutes: a fresh one each phase
                    registrations = asyncio.create_task(person.run(until=done))
                latencies = await victim(stub, *honest, args.moves)
                busy = (cpu_seconds(server_pid) - cpu) / (time.monotonic() - began)
                flooder_busy = ((cpu_seconds(flooding.pid) - flooder_cpu)
                                / (time.monotonic() - began)) if flooding is not None else 0.0
                done.set()
                if registrations is not None:
                    assert person is not None
                    await championship_figures(p99, phase, number, person, honest_ids,
                                               await registrations, flooding, server_pid,
                                               args)
                if signing is not None:
                    ok, tried, signed = await signing
                    p99["sign_in"][phase].append(ok / max(tried, 1))
                    print(f"{phase:7} round {number + 1}: the honest person signed in {ok} of "
                          f"{tried} times; {summary(signed) if signed else 'never'}",
                          flush=True)
                p99["grpc"][phase].append(p(latencies, 0.99))
                p99["server_cpu"][phase].append(busy)
                print(f"{phase:7} round {number + 1}: {summary(latencies)}; the server busy "
                      f"{busy:.2f} of a core"
                      + (f", the flooders {flooder_busy:.2f} (on the same cores)"
                         if flooding is not None else ""), flush=True)
                if browser is not None:
                    moves, pages, counts = await web_victim(web_port, browser[0],
                                                            tokens_of(browser), browser[2],
                                                            args.moves)
                    p99["browser"][phase].append(p(moves, 0.99))
                    p99["page"][phase].append(p(pages, 0.99))
                    print(f"{phase:7} round {number + 1}: browser PlayCard {summary(moves)}; "
                          f"page {summary(pages)}; {json.dumps(counts, sort_keys=True)}",
                          flush=True)
                stop_py_spy(spy)
                if flooding is not None:
                    flooding.send_signal(signal.SIGTERM)
                    out, _ = await asyncio.to_thread(flooding.communicate, timeout=60)
                    print(f"{phase:7} round {number + 1}: flooder "
                          f"{out.strip().splitlines()[-1] if out else '?'}", flush=True)
                    if phase in CHAMPIONSHIP_PHASES and out:
                        for key, value in json.loads(out.strip().splitlines()[-1]).items():
                            p99.setdefault(f"flood:{key}", {}).setdefault(phase, []).append(
                                value)
                if phase in registering:
                    assert person is not None
                    p99["flood_listed"][phase].append(await person.all_listed(honest_ids))
                    print(f"{phase:7} round {number + 1}: championships not over listed now, "
                          f"not the operator's: {p99['flood_listed'][phase][-1]}", flush=True)
        if watching is not None:
            watching.cancel()
            print(f"the honest person's WatchChampionship: {dict(told)}", flush=True)
    return p99


async def championship_figures(p99: dict[str, dict[str, list[Any]]], phase: str, number: int,
                               person: Any, honest_ids: set[str], during: Any,
                               flooding: subprocess.Popen[str] | None, server_pid: int,
                               args: argparse.Namespace) -> None:
    """After the victim played beside the honest registrations (``during``): what the
    honest person lists on ListChampionships' first page, then the server's CPU per
    registration with the flood paused (its streams held)."""
    share = during.ok / max(during.tried, 1)
    p99["registration_ok"][phase].append(share)
    p99["registration_p50"][phase].append(p(during.latencies, 0.5) if during.latencies else 0)
    p99["registration_p99"][phase].append(p(during.latencies, 0.99) if during.latencies else 0)
    print(f"{phase:7} round {number + 1}: the honest person's registrations: {during.ok} of "
          f"{during.tried}; {summary(during.latencies) if during.latencies else 'none'}"
          f"{'; refused ' + str(dict(during.refused)) if during.refused else ''}", flush=True)
    listed, flood, place = await person.first_page(honest_ids)
    p99["first_page_flood"][phase].append(flood)
    p99["first_page_place"][phase].append(place)
    print(f"{phase:7} round {number + 1}: ListChampionships' first page: {listed} listed, "
          f"{flood} of them the flood's; the operator's championship "
          f"{f'#{place}' if place else 'not on it'}", flush=True)
    if flooding is not None:
        flooding.send_signal(signal.SIGUSR1)  # paused: no new call, its streams held
        await asyncio.sleep(1.5)  # its calls under way answered, its streams told
    spy = py_spy(args, server_pid, f"{phase}-round{number + 1}-registrations")
    gross, net, idle, done = await registration_cpu(person, server_pid, args.registration_calls)
    stop_py_spy(spy)
    if flooding is not None:
        flooding.send_signal(signal.SIGUSR2)
    p99["registration_cpu"][phase].append(net)
    p99["registration_gross"][phase].append(gross)
    p99["registration_idle"][phase].append(idle)
    print(f"{phase:7} round {number + 1}: server CPU per registration call "
          f"{net * 1e3:.2f} ms ({gross * 1e3:.2f} ms gross, the server idle at {idle:.3f} of "
          f"a core; {done.ok} of {done.tried} calls)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--moves", type=int, default=500,
                        help="the honest table's moves timed per phase and round (its p99 is "
                             "the fifth slowest of 500)")
    parser.add_argument("--sign-in-every", type=float, default=1.0,
                        help="seconds between the honest person's sign-ins in the accounts "
                             "phases")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--phases", nargs="+", choices=PHASES, default=list(PHASES),
                        help="the phases to run (quiet is always run)")
    parser.add_argument("--slow-retry", type=float, default=0.0,
                        help="seconds before flood 2's refused connection is tried again "
                             "(0: each tries once)")
    parser.add_argument("--py-spy", metavar="DIR", default="",
                        help="sample the server with py-spy (on PATH) while each phase's "
                             "victims play: DIR/PHASE-roundN.txt, collapsed stacks (and "
                             "DIR/PHASE-roundN-registrations.txt: the registrations' CPU "
                             "window)")
    parser.add_argument("--flood", nargs="+", help=argparse.SUPPRESS)  # a flooder process
    parser.add_argument("--registration-calls", type=int, default=30,
                        help="the honest registration calls whose server CPU is measured, "
                             "per phase and round (0.2 s apart)")
    parser.add_argument("--server-flag", action="append", default=[],
                        help="a further flag for the server (e.g. --spectator-tick=0)")
    args = parser.parse_args()
    if args.flood:
        kind, server, *tables = args.flood
        print(json.dumps(asyncio.run(flooder(kind, server, tables, args.slow_retry))))
        return
    args.phases = ["quiet", *(phase for phase in PHASES[1:] if phase in args.phases)]
    address = f"127.0.0.1:{free_port()}"
    web_port = free_port()
    with tempfile.TemporaryDirectory() as data_dir:
        (Path(data_dir) / "admin-token").write_text(ADMIN_TOKEN + "\n")
        server = subprocess.Popen(
            [sys.executable, "-m", "server.main", "--listen", address, "--metrics-port", "0",
             "--web-port", str(web_port), "--web-host", "127.0.0.1", "--data-dir", data_dir,
             "--log-level", "warning", "--allow-seed", "--trusted-proxies", "127.0.0.1",
             "--bot-table-pace", "0.01", "--bot-policy", "auto",
             "--admin-token-file", str(Path(data_dir) / "admin-token"), *args.server_flag],
            cwd=ROOT, stdout=subprocess.PIPE, text=True,
            stderr=open(os.environ.get("HOSTILE_SERVER_LOG", os.devnull), "w"),  # noqa: SIM115
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        began = time.monotonic()
        try:
            assert server.stdout is not None and "listening" in server.stdout.readline()
            assert "web page on" in server.stdout.readline()
            p99 = asyncio.run(rounds(address, web_port, server.pid, args))
        finally:
            server.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(15)
    medians = {victim: {phase: statistics.median(values) for phase, values in phases.items()
                        if values} for victim, phases in p99.items()}
    quiet = medians["grpc"]["quiet"]
    print(f"honest_quiet_p99_ms={quiet * 1e3:.2f}")
    for phase in args.phases[1:]:
        print(f"honest_{phase}_p99_ms={medians['grpc'][phase] * 1e3:.2f}")
    for victim_name in ("browser", "page"):
        for phase, value in medians[victim_name].items():
            print(f"{victim_name}_{phase}_p99_ms={value * 1e3:.2f}")
    for phase, value in medians["server_cpu"].items():
        print(f"server_cpu_{phase}={value:.3f}")
    for phase, value in medians["sign_in"].items():
        print(f"{phase}_honest_sign_ins_ok_share={value:.3f}")
    for phase in args.phases[1:]:
        grpc_ratio = medians["grpc"][phase] / quiet
        if phase == "flood2":
            for victim_name in ("browser", "page"):
                ratio = medians[victim_name]["flood2"] / medians[victim_name]["quiet"]
                print(f"flood2_{'' if victim_name == 'browser' else 'page_'}p99_ratio="
                      f"{ratio:.3f}")
            print(f"flood2_grpc_p99_ratio={grpc_ratio:.3f}")
        else:
            print(f"{phase}_p99_ratio={grpc_ratio:.3f}")
    championship_summary(medians, p99)
    print(f"seconds={time.monotonic() - began:.0f}")


def championship_summary(medians: dict[str, dict[str, float]],
                         p99: dict[str, dict[str, list[Any]]]) -> None:
    """The championship phases' figures (medians over rounds; the flood's counts summed over
    rounds, its most held at once and its count per address the largest of a round)."""
    cpu = medians.get("registration_cpu", {})
    if "quiet" not in cpu:
        return
    for phase in cpu:
        print(f"{phase}_registration_cpu_ms={cpu[phase] * 1e3:.2f}")
        print(f"{phase}_registration_gross_cpu_ms="
              f"{medians['registration_gross'][phase] * 1e3:.2f}")
        print(f"{phase}_honest_registrations_ok_share="
              f"{min(p99['registration_ok'][phase]):.3f}")
        for q in ("p50", "p99"):
            print(f"{phase}_registration_{q}_ms="
                  f"{medians[f'registration_{q}'][phase] * 1e3:.2f}")
        print(f"{phase}_first_page_flood={max(p99['first_page_flood'][phase])}")
        places = p99["first_page_place"][phase]
        print(f"{phase}_operator_on_first_page={sum(1 for at in places if at)}/{len(places)}")
        print(f"{phase}_flood_championships_listed={p99['flood_listed'][phase][-1]}")
    for phase in CHAMPIONSHIP_PHASES:
        if phase not in cpu:
            continue
        print(f"{phase}_registration_cpu_ratio={cpu[phase] / cpu['quiet']:.3f}")
        for key, by_phase in sorted(p99.items()):
            if not key.startswith("flood:") or phase not in by_phase:
                continue
            name, values = key.removeprefix("flood:"), by_phase[phase]
            if "held" in name or "per_address" in name:
                print(f"{phase}_{name}={max(values)}")
            else:
                print(f"{phase}_{name}_total={sum(values)}")
        made = p99.get("flood:created_per_address_max", {}).get(phase, [])
        print(f"{phase}_created_per_address_over_rounds_at_most={sum(made)}")


if __name__ == "__main__":
    main()
