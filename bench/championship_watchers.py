"""What one registration costs the server while 1,000 watchers follow the championship
(issue 38's target: <= 5 ms of server CPU): the server's CPU seconds over ``--registrations``
registrations, each of which every watcher is told of, divided by the registrations; beside
it the same registrations with no watcher (the registration's own cost), in the same run.
Before each, the server's CPU over ``--idle`` seconds with the watchers connected and nothing
happening (its timers, the driver's pass, the streams' keepalives): the ``net`` figures
subtract that rate over the registrations' time, as ``make bench-hostile`` does for a
registration's CPU.

The server is the default one (SQLite in a temporary directory), its quotas off (the watchers
all come from this process). By default its watch tick is 0 and each registration waits for
every watcher to be told of the one before: a message per registration per watcher, the
costliest case. ``--tick 0.25 --per-second 10`` is the default server under ten
registrations a second: a watcher's messages are then one a tick, whatever the pace.
Prints the figures; asserts nothing.

Run: ``.venv/bin/python bench/championship_watchers.py [--watchers 1000] [--tick T]
[--per-second N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from accounts import cpu_seconds, free_port  # type: ignore[import-not-found]  # noqa: E402

TOKEN = "operator-token-for-the-watchers-bench"


async def measure(port: int, pid: int, watchers: int, registrations: int,
                  per_second: float, idle: float) -> dict[str, float]:
    import grpc
    from copas.admin.v1 import admin_pb2, admin_pb2_grpc
    from copas.v1 import accounts_pb2, accounts_pb2_grpc, championships_pb2_grpc, copas_pb2
    from copas.v1 import championships_pb2 as pb

    operator = (("authorization", f"Bearer {TOKEN}"),)
    rules = copas_pb2.RulesOverrides(max_hands=1, play_timeout_seconds=20,
                                     pass_timeout_seconds=20, moon_timeout_seconds=20)
    # a connection each (not the shared subchannel), each under the server's 100 streams
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{port}",
                                          options=[("grpc.use_local_subchannel_pool", 1)])
                for _ in range(16)]
    try:
        admin = admin_pb2_grpc.AdminServiceStub(channels[0])
        accounts = accounts_pb2_grpc.AccountServiceStub(channels[0])
        champs = [championships_pb2_grpc.ChampionshipServiceStub(c) for c in channels]
        people = [(await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
            device_secret=secrets.token_urlsafe(24), display_name=f"Entrant {n}"))).session
            for n in range(2 * registrations)]
        await asyncio.sleep(3)  # the sign-ins' own after-work (sessions written) is not counted
        results: dict[str, float] = {}
        for name, count, group in (("alone", 0, people[:registrations]),
                                   ("watched", watchers, people[registrations:])):
            cid = (await admin.CreateChampionship(admin_pb2.CreateChampionshipRequest(
                settings=pb.ChampionshipSettings(display_name=f"Bench {name}", rounds=1,
                                                 rules=rules, max_players=1000),
                reason="bench"), metadata=operator)).championship.championship_id
            request = pb.WatchChampionshipRequest(championship_id=cid)
            streams = [champs[n % 16].WatchChampionship(request) for n in range(count)]
            for stream in streams:
                await stream.read()
            if idle:  # the server's CPU with the watchers connected and nothing happening
                before = cpu_seconds(pid) if pid else 0.0
                await asyncio.sleep(idle)
                results[f"idle_{name}_cpu_ms_per_s"] = \
                    ((cpu_seconds(pid) if pid else 0.0) - before) / idle * 1000
            began, before = time.monotonic(), cpu_seconds(pid) if pid else 0.0
            for n, person in enumerate(group, start=1):
                await champs[0].Register(pb.RegisterRequest(championship_id=cid),
                                         metadata=(("authorization",
                                                    f"Bearer {person.access_token}"),))
                if per_second:
                    await asyncio.sleep(1 / per_second)
                    continue
                for stream in streams:  # every watcher told, before the next registration
                    while (await stream.read()).championship.player_count < n:
                        pass
            for stream in streams:  # at a pace: every watcher told of the last one
                while (await stream.read()).championship.player_count < len(group):
                    pass
            spent = (cpu_seconds(pid) if pid else 0.0) - before
            results[f"registration_{name}_cpu_ms"] = spent / len(group) * 1000
            if idle:  # less what the server spends anyway over as long (its timers)
                background = results[f"idle_{name}_cpu_ms_per_s"] / 1000 \
                    * (time.monotonic() - began)
                results[f"registration_{name}_net_cpu_ms"] = \
                    (spent - background) / len(group) * 1000
            for stream in streams:
                stream.cancel()
        return results
    finally:
        for channel in channels:
            await channel.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--watchers", type=int, default=1000)
    parser.add_argument("--registrations", type=int, default=20)
    parser.add_argument("--tick", type=float, default=0.0,
                        help="the server's --championship-watch-tick (0: a message per change)")
    parser.add_argument("--per-second", type=float, default=0.0,
                        help="registrations a second (0: each one after every watcher was "
                             "told of the one before)")
    parser.add_argument("--idle", type=float, default=10.0,
                        help="seconds of the server's CPU with the watchers connected and no "
                             "registration, measured first: the net figures subtract it over "
                             "the registrations' time (0: not measured)")
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        token = Path(data) / "token"
        token.write_text(TOKEN + "\n")
        proc = subprocess.Popen(
            [sys.executable, "-m", "server.main", "--listen", f"127.0.0.1:{port}",
             "--metrics-port", "0", "--web-port", "0", "--data-dir", data,
             "--unlimited-quotas", "--log-level", "warning", "--bot-workers", "0",
             "--admin-token-file", str(token), "--championship-watch-tick", str(args.tick)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert proc.stdout is not None and "listening" in proc.stdout.readline()
            figures = asyncio.run(measure(port, proc.pid, args.watchers, args.registrations,
                                         args.per_second, args.idle))
        finally:
            proc.terminate()
            proc.wait(10)
    for name, value in figures.items():
        print(f"{name}={value:.3f}")
    extra = figures["registration_watched_cpu_ms"] - figures["registration_alone_cpu_ms"]
    print(f"watchers={args.watchers} tick={args.tick} per_second={args.per_second} "
          "registration_per_watcher_us="
          f"{extra / max(args.watchers, 1) * 1000:.2f} (target: a registration with 1,000 "
          "watchers <= 5 ms)")


if __name__ == "__main__":
    main()
