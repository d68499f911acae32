"""Fixture databases written by a release of Copas, for tests/test_migrations.py (issue 39):

    .venv/bin/python tools/make_fixtures.py RELEASE_CHECKOUT OUT_DIR

RELEASE_CHECKOUT is a checkout of the release with its own .venv (``git worktree add --detach
../wt-release <commit> && make -C ../wt-release setup``); this script runs itself again with
that .venv's python and drives that release's server (``python -m server.main`` in the
checkout) through the release's own generated stubs. It writes OUT_DIR/sqlite/ (the data
directory of a server on SQLite, stopped cleanly, each file VACUUMed), OUT_DIR/postgres.sql
(``pg_dump --no-owner --no-privileges`` of a server's PostgreSQL database, from a throw-away
PostgreSQL of Debian's initdb/pg_ctl, tools/pglocal.py) and OUT_DIR/facts.json (what the
tests check: secrets, ids, tokens, sequences, hands, ratings, histories).

On each store: four guest accounts (fixed device secrets, one also with a password), a
rated 4-player game played to its end, a game with three bots played to its end, a game
left mid-hand, and a championship still taking registrations. The server runs with
``--refresh-token-days 36500``, so that the refresh tokens recorded stay valid for the tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PEOPLE = (("Ana", "fixture-device-secret-ana-0001"), ("Bia", "fixture-device-secret-bia-0002"),
          ("Cai", "fixture-device-secret-cai-0003"), ("Davi", "fixture-device-secret-davi-004"))
USERNAME, PASSWORD = "ana.fixture", "fixture-password-ana-0001"
NODE_ID = "fixture-node"
NO_CLOCKS: dict[str, Any] = {"pass_timeout_seconds": 0, "play_timeout_seconds": 0,
                             "moon_timeout_seconds": 0, "trick_pause_seconds": 0,
                             "hand_pause_seconds": 0}
CARDS_PLAYED_UNFINISHED = 6  # the third game stops after this many cards of its hand
DEADLINE = 60.0  # seconds any one wait of this script may take


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    release, out = Path(argv[0]).resolve(), Path(argv[1]).resolve()
    python = release / ".venv" / "bin" / "python"
    if not (release / "server" / "main.py").is_file() or not python.exists():
        print(f"{release} is not a Copas checkout with its .venv (make setup)", file=sys.stderr)
        return 2
    if Path(sys.prefix).resolve() != (release / ".venv").resolve():
        # the release's python, its stubs and its server
        os.execv(python, [str(python), str(Path(__file__).resolve()), str(release), str(out)])
    out.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "-C", str(release), "rev-parse", "--short=7", "HEAD"],
                            capture_output=True, text=True, check=True).stdout.strip()
    facts: dict[str, Any] = {"release": commit, "node_id": NODE_ID,
                             "username": USERNAME, "password": PASSWORD}
    with tempfile.TemporaryDirectory(prefix="copas-fixtures-") as temp:
        data = Path(temp) / "data"
        with Server(release, "--data-dir", str(data)) as server:
            facts["sqlite"] = play_everything(server.address)
        shutil.rmtree(out / "sqlite", ignore_errors=True)
        (out / "sqlite").mkdir()
        for path in sorted(data.iterdir()):
            if path.suffix in (".db", ".sqlite3"):
                vacuum(path)
        for path in sorted(data.iterdir()):  # the files a stopped server left (the WALs were
            shutil.copy2(path, out / "sqlite" / path.name)  # folded in by the VACUUM)
        facts["postgres"] = postgres_fixture(release, Path(temp), out / "postgres.sql")
    (out / "facts.json").write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n")
    print(f"fixtures of {commit} written to {out}")
    return 0


def vacuum(path: Path) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()


# ---------------------------------------------------------------- the release's server

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """The release's server on loopback with ``flags``; stopped with SIGTERM (a clean stop)."""

    def __init__(self, release: Path, *flags: str) -> None:
        self.address = f"127.0.0.1:{free_port()}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "server.main", "--listen", self.address, "--metrics-port",
             "0", "--web-port", "0", "--allow-seed", "--unlimited-quotas", "--bot-policy",
             "auto", "--bot-workers", "0", "--bot-pace", "0", "--log-level", "warning",
             "--refresh-token-days", "36500", *flags],
            cwd=release, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as waiting:
            waiting.register(self.proc.stdout, selectors.EVENT_READ)
            if not waiting.select(DEADLINE):
                self.proc.kill()
                raise RuntimeError("the release's server did not start")
        line = self.proc.stdout.readline()
        if "listening" not in line:
            self.proc.kill()
            raise RuntimeError(f"the release's server did not start: {line!r}")

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *_: object) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        if code != 0:
            raise RuntimeError(f"the release's server stopped with {code}")


# ---------------------------------------------------------------- what is played

def auth(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


def play_everything(address: str) -> dict[str, Any]:
    import grpc
    from copas.v1 import (
        accounts_pb2,
        accounts_pb2_grpc,
        championships_pb2,
        championships_pb2_grpc,
        copas_pb2,
        copas_pb2_grpc,
    )

    facts: dict[str, Any] = {}
    channel: Any  # blocking stubs (the generated types are grpc.aio's)
    with grpc.insecure_channel(address) as channel:
        grpc.channel_ready_future(channel).result(timeout=DEADLINE)
        accounts: Any = accounts_pb2_grpc.AccountServiceStub(channel)
        game: Any = copas_pb2_grpc.CopasServiceStub(channel)
        champs: Any = championships_pb2_grpc.ChampionshipServiceStub(channel)
        sessions = []
        for name, secret in PEOPLE:
            session = accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
                device_secret=secret, display_name=name), timeout=DEADLINE).session
            sessions.append(session)
        accounts.LinkPassword(accounts_pb2.LinkPasswordRequest(
            username=USERNAME, password=PASSWORD), metadata=auth(sessions[0].access_token),
            timeout=DEADLINE)
        facts["accounts"] = [
            {"name": s.account.display_name, "account_id": s.account.account_id,
             "device_secret": secret, "refresh_token": s.refresh_token}
            for s, (_, secret) in zip(sessions, PEOPLE, strict=True)]

        def new_table(seed: str, bots: int = 0, rating: str = "") -> str:
            return str(game.CreateTable(copas_pb2.CreateTableRequest(
                preset="quick", seed=seed, bot_seats=bots, rating=rating,
                display_name=f"fixture {seed}", rules=copas_pb2.RulesOverrides(**NO_CLOCKS)),
                timeout=DEADLINE).table.table_id)

        def join(table_id: str, people: list[Any]) -> list[str]:
            return [game.JoinTable(copas_pb2.JoinTableRequest(table_id=table_id),
                                   metadata=auth(s.access_token), timeout=DEADLINE).player_token
                    for s in people]

        def play(table_id: str, tokens: list[str], cards: int | None = None) -> None:
            """Every person's moves (the first pass choice, the first legal card, the first
            moon choice) until the game is over, or ``cards`` cards of the hand are down."""
            deadline = time.monotonic() + DEADLINE
            while time.monotonic() < deadline:
                acted = False
                for token in tokens:
                    view = game.GetView(copas_pb2.GetViewRequest(table_id=table_id),
                                        metadata=auth(token), timeout=DEADLINE).view
                    if view.phase == copas_pb2.PHASE_GAME_OVER:
                        return
                    down = 4 * view.trick_number + len(view.trick.cards) \
                        if view.phase == copas_pb2.PHASE_PLAYING else 0
                    if cards is not None and down >= cards:
                        return
                    if view.seat not in view.to_act:
                        continue
                    if view.phase == copas_pb2.PHASE_PASSING and not view.pass_choice:
                        game.PassCards(copas_pb2.PassCardsRequest(
                            table_id=table_id, cards=view.hand[:3]), metadata=auth(token),
                            timeout=DEADLINE)
                    elif view.phase == copas_pb2.PHASE_PLAYING:
                        game.PlayCard(copas_pb2.PlayCardRequest(
                            table_id=table_id, card=view.legal_cards[0]), metadata=auth(token),
                            timeout=DEADLINE)
                    elif view.phase == copas_pb2.PHASE_MOON_CHOICE and view.moon_choices:
                        game.ChooseMoon(copas_pb2.ChooseMoonRequest(
                            table_id=table_id, choice=view.moon_choices[0]),
                            metadata=auth(token), timeout=DEADLINE)
                    else:
                        continue
                    acted = True
                if not acted:  # bots to move: the server plays them at once
                    time.sleep(0.02)
            raise RuntimeError(f"table {table_id} did not get there in {DEADLINE} s")

        rated = new_table("fixture")
        play(rated, join(rated, sessions))
        with_bots = new_table("fixture-bots", bots=3, rating="with_bots")
        play(with_bots, join(with_bots, sessions[:1]))
        unfinished = new_table("fixture-unfinished")
        tokens = join(unfinished, sessions)
        play(unfinished, tokens, cards=CARDS_PLAYED_UNFINISHED)
        seats = []
        for token, session in zip(tokens, sessions, strict=True):
            answer = game.GetView(copas_pb2.GetViewRequest(table_id=unfinished),
                                  metadata=auth(token), timeout=DEADLINE)
            view = answer.view
            seats.append({"seat": view.seat, "account_id": session.account.account_id,
                          "player_token": token, "hand": [c.text for c in view.hand],
                          "legal_cards": [c.text for c in view.legal_cards],
                          "is_to_act": view.seat in view.to_act})
        facts["unfinished"] = {
            "table_id": unfinished, "sequence": answer.sequence, "seats": seats,
            "phase": copas_pb2.Phase.Name(view.phase), "hand_number": view.hand_number,
            "trick_number": view.trick_number,
            "trick": [c.card.text for c in view.trick.cards], "to_act": list(view.to_act)}

        champ = champs.CreateChampionship(championships_pb2.CreateChampionshipRequest(
            settings=championships_pb2.ChampionshipSettings(
                display_name="Fixture cup", rounds=2, preset="quick", max_players=8)),
            metadata=auth(sessions[0].access_token), timeout=DEADLINE).championship
        for session in sessions[:3]:
            champs.Register(championships_pb2.RegisterRequest(
                championship_id=champ.championship_id), metadata=auth(session.access_token),
                timeout=DEADLINE)
        facts["championship"] = {"championship_id": champ.championship_id,
                                 "display_name": "Fixture cup",
                                 "players": [s.account.display_name for s in sessions[:3]]}

        records = []
        for table_id in (rated, with_bots):
            record = game.GetGameRecord(copas_pb2.GetGameRecordRequest(record_id=table_id),
                                        timeout=DEADLINE).record
            records.append({
                "record_id": record.record_id, "table_id": record.table_id,
                "display_name": record.display_name,
                "seats": [{"seat": s.seat, "name": s.display_name, "is_bot": s.is_bot,
                           "total": s.total} for s in record.seats],
                "standings": [{"seat": s.seat, "place": s.place, "total": s.total,
                               "has_left": s.has_left} for s in record.standings],
                "end_reason": copas_pb2.GameEndReason.Name(record.end_reason),
                "action_count": record.action_count,
                "accounts": {str(s["seat"]): s.get("account", "")
                             for s in json.loads(record.record_json)["seats"]}})
        facts["records"] = records
        facts["listed"] = [r.record_id for r in game.ListGameRecords(
            copas_pb2.ListGameRecordsRequest(page_size=100), timeout=DEADLINE).records]

        # The accounts take each finished game in within seconds: wait for every history.
        expected = {s.account.account_id: 2 if n == 0 else 1 for n, s in enumerate(sessions)}
        deadline = time.monotonic() + DEADLINE
        while True:
            histories = {s.account.account_id: list(accounts.ListMyGames(
                accounts_pb2.ListMyGamesRequest(page_size=100),
                metadata=auth(s.access_token), timeout=DEADLINE).games) for s in sessions}
            if all(len(histories[a]) == n for a, n in expected.items()):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the games were not taken in: {histories}")
            time.sleep(0.1)
        for entry, session in zip(facts["accounts"], sessions, strict=True):
            profile = accounts.GetProfile(accounts_pb2.GetProfileRequest(),
                                          metadata=auth(session.access_token), timeout=DEADLINE)
            entry["ratings"] = [{"players": r.players, "mu": r.mu, "sigma": r.sigma,
                                 "games": r.games, "wins": r.wins, "rating": r.rating}
                                for r in profile.ratings]
            entry["games"], entry["wins"] = profile.games, profile.wins
            entry["history"] = [
                {"record_id": g.record_id, "table_name": g.table_name, "players": g.players,
                 "place": g.place, "points": g.points, "is_rated": g.is_rated,
                 "rating_after": g.rating_after, "rating_change": g.rating_change,
                 "finished": g.finish_time.ToNanoseconds() / 1e9}
                for g in histories[session.account.account_id]]
    return facts


# ---------------------------------------------------------------- PostgreSQL

def postgres_fixture(release: Path, temp: Path, dump: Path) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tools.pglocal import LocalPostgres, tool  # this checkout's

    temp.chmod(0o755)  # the postgres user (when run as root) reaches its directory
    pg = LocalPostgres(temp / "pg", free_port())
    pg.create()
    pg.start()
    try:
        base = pg.dsn.rsplit("/", 1)[0]
        subprocess.run([tool("psql"), "-X", "-q", pg.dsn, "-c", "CREATE DATABASE copas"],
                       check=True, capture_output=True, text=True, timeout=DEADLINE)
        dsn = f"{base}/copas"
        with Server(release, "--database", dsn, "--node-id", NODE_ID) as server:
            facts = play_everything(server.address)
        text = subprocess.run([tool("pg_dump"), "--no-owner", "--no-privileges", dsn],
                              check=True, capture_output=True, text=True,
                              timeout=DEADLINE).stdout
        dump.write_text(text)
        return facts
    finally:
        with contextlib.suppress(Exception):
            pg.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
