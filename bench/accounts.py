"""What accounts cost the server, printed (never asserted):

- ``sign_in_cpu_ms`` and ``refresh_cpu_ms``: the server process's CPU per SignInDevice (a
  returning device) and per RefreshSession, beside ``get_table_cpu_ms``, a cheap call of the same
  server in the same run (their ratio is printed too). The server is the default one: SQLite in a
  temporary directory, fsync per transaction. CPU is read from /proc (every thread).
- ``argon2_ms``: one password hash at the server's default parameters (time cost 2, 19 MiB, one
  lane: OWASP's baseline), in this process; a password sign-in costs that on a thread, by design.
- ``rating_update_cpu_ms``: one four-player game taken into its accounts' histories and ratings
  (``record_game`` on the SQLite accounts' store, by the rated rule: each seat's update and its
  ``game_ratings`` row), in this process.
- ``leaderboard_page_ms``: a page of 50 from 100,000 rated accounts (most of them established,
  the rest provisional and on no board), the top page and one in the middle, and a place on
  it (SQLite, indexed), in this process; ``leaderboard_around_ms``: the service's "around me"
  (a page of 50 with the account in its middle) for accounts spread over the board.

Targets (issue 26): sign-in and refresh <= 2 ms, a rating update <= 1 ms, a leaderboard page
<= 5 ms; issue 37: a page anywhere, a place and "around me" from 100,000 accounts <= 5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from server.accounts.credentials import Passwords  # noqa: E402
from server.accounts.model import Account, FinishedGame, Placed  # noqa: E402
from server.accounts.ratings import (  # noqa: E402
    DEFAULT_KIND,
    Contender,
    Rating,
    Update,
    rate_game,
)
from server.accounts.service import Accounts  # noqa: E402
from server.accounts.sqlite import SqliteAccountStore  # noqa: E402


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def server_costs(calls: int) -> dict[str, float]:
    import grpc
    from copas.v1 import accounts_pb2, accounts_pb2_grpc, copas_pb2, copas_pb2_grpc

    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        proc = subprocess.Popen(
            [sys.executable, "-m", "server.main", "--listen", f"127.0.0.1:{port}",
             "--metrics-port", "0", "--web-port", "0", "--data-dir", data,
             "--unlimited-quotas", "--log-level", "warning", "--bot-workers", "0"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert proc.stdout is not None and "listening" in proc.stdout.readline()
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                accounts = accounts_pb2_grpc.AccountServiceStub(channel)
                game = copas_pb2_grpc.CopasServiceStub(channel)
                device = secrets.token_urlsafe(24)
                session = (await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
                    device_secret=device))).session
                table = (await game.CreateTable(copas_pb2.CreateTableRequest())).table
                results: dict[str, float] = {}

                async def measure(name: str, call: object) -> None:
                    before = cpu_seconds(proc.pid)
                    for _ in range(calls):
                        await call()  # type: ignore[operator]
                    results[name] = (cpu_seconds(proc.pid) - before) / calls * 1000

                async def get_table() -> None:
                    await game.GetTable(copas_pb2.GetTableRequest(table_id=table.table_id))

                async def sign_in() -> None:
                    await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
                        device_secret=device))

                refresh = [session.refresh_token]

                async def refreshed() -> None:
                    answer = await accounts.RefreshSession(accounts_pb2.RefreshSessionRequest(
                        refresh_token=refresh[0]))
                    refresh[0] = answer.session.refresh_token

                for _ in range(2):  # alternating rounds; the last round's figures stand
                    await measure("get_table_cpu_ms", get_table)
                    await measure("sign_in_cpu_ms", sign_in)
                    refresh[0] = (await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
                        device_secret=device))).session.refresh_token  # (the sign-ins ended
                    await measure("refresh_cpu_ms", refreshed)  # the oldest sessions)
                return results
        finally:
            proc.terminate()
            proc.wait(10)


async def store_costs(accounts_count: int, updates: int) -> dict[str, float]:
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as data:
        path = Path(data) / "accounts.sqlite3"
        store = SqliteAccountStore(path)
        began = time.process_time()
        for n in range(updates):
            ids = [f"a_{(n * 4 + k) % 400:05d}" for k in range(4)]
            game = FinishedGame(f"r{n}", "t", float(n), 4, tuple(
                Placed(a, k + 1, 10 * k, k, True, f"net{k}") for k, a in enumerate(ids)), True)

            def compute(before: list[Rating], game: FinishedGame = game) -> list[Update]:
                return rate_game([Contender(p.seat, p.place, p.has_played, p.network, b)
                                  for p, b in zip(game.places, before, strict=True)])
            await store.record_game(game, compute)
        results["rating_update_cpu_ms"] = (time.process_time() - began) / updates * 1000
        store.close()
        db = sqlite3.connect(path)  # 100,000 rated accounts, written directly
        rows = []
        for n in range(accounts_count):
            r = Rating(25 + (n % 997) / 50, 8 - (n % 89) / 20, 1 + n % 40, n % 7)
            rows.append((f"b_{n:06d}", DEFAULT_KIND, 4, r.mu, r.sigma, r.games, r.wins,
                         r.shown))
        db.executemany("INSERT INTO ratings (account_id, kind, players, mu, sigma, games, wins, "
                       "shown) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        db.executemany("INSERT INTO accounts (account_id, display_name, created) "
                       "VALUES (?, ?, ?)", [(row[0], f"P{row[0]}", 0.0) for row in rows])
        db.commit()
        db.close()
        store = SqliteAccountStore(path)
        for name, offset in (("leaderboard_top_page_ms", 0),
                             ("leaderboard_middle_page_ms", accounts_count // 2)):
            times = []
            for _ in range(30):
                began = time.perf_counter()
                page = await store.leaderboard(4, offset, 50)
                times.append(time.perf_counter() - began)
            assert len(page) == 50
            results[name] = statistics.median(times) * 1000
        times = []
        for n in range(30):
            began = time.perf_counter()
            await store.place_of(f"b_{n * 3001:06d}", 4)
            times.append(time.perf_counter() - began)
        results["leaderboard_place_ms"] = statistics.median(times) * 1000
        service = SimpleNamespace(_store=store)  # Accounts.around reads nothing but its store
        times = []
        for n in range(30):  # established ones (21 games), from the top to the bottom
            who = Account(f"b_{n * 3320 + 20:06d}", "", 0.0)
            began = time.perf_counter()
            page = await Accounts.around(service, who, 4, 50)  # type: ignore[arg-type]
            times.append(time.perf_counter() - began)
            assert who.id in {line.account_id for line in page}
        results["leaderboard_around_ms"] = statistics.median(times) * 1000
        store.close()
    passwords = Passwords()
    times = []
    for _ in range(5):
        began = time.perf_counter()
        passwords.hash("correct horse battery staple")
        times.append(time.perf_counter() - began)
    results["argon2_ms"] = statistics.median(times) * 1000
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--accounts", type=int, default=100_000)
    parser.add_argument("--updates", type=int, default=500)
    args = parser.parse_args()
    figures = asyncio.run(server_costs(args.calls))
    figures |= asyncio.run(store_costs(args.accounts, args.updates))
    for name, value in figures.items():
        print(f"{name}={value:.3f}")
    base = figures["get_table_cpu_ms"]
    print(f"sign_in_vs_get_table_ratio={figures['sign_in_cpu_ms'] / base:.2f}")
    print(f"refresh_vs_get_table_ratio={figures['refresh_cpu_ms'] / base:.2f}")
    print("argon2_parameters=time_cost 2, memory 19456 KiB, parallelism 1")


if __name__ == "__main__":
    main()
