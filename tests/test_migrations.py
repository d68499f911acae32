"""Data written by the previous release comes back (issue 39, "Versioned data, both ways"): this
server starts on the release's data (tests/fixtures/release-1c5f50a/: a SQLite data directory and
a PostgreSQL dump, made by tools/make_fixtures.py), migrates it, and serves it, seen from
outside: every account signs in (its device, its password, its refresh token) to the same
account, with its ratings and history; the finished games' records name no account (a
pseudonym per game instead) and keep their standings; the unfinished game goes on from the
same sequence with its players' tokens, to its end, rated from the release's ratings; the
championship still takes registrations. And a database newer than this server is refused at
start, left byte for byte as it was."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import grpc
import pytest
from copas.v1 import (
    accounts_pb2,
    accounts_pb2_grpc,
    championships_pb2,
    championships_pb2_grpc,
    copas_pb2,
    copas_pb2_grpc,
)
from grpc_health.v1 import health_pb2, health_pb2_grpc

from server.accounts import sqlite as account_sqlite
from server.store.postgres import PG_SCHEMA_VERSION
from server.store.sqlite import SCHEMA_VERSION
from server.tables.log_entries import LOG_FORMAT
from tests.helpers.calls import auth, card_pb
from tests.helpers.servers import ROOT, ServerProcess, fresh_database, run_server
from tools.pglocal import tool

RELEASE = ROOT / "tests" / "fixtures" / "release-1c5f50a"
FACTS = json.loads((RELEASE / "facts.json").read_text())
ACCOUNT_SCHEMA_VERSION = account_sqlite.SCHEMA_VERSION
CALL = 30  # seconds any one call may take


def serve(*flags: str, log_dir: Path) -> ServerProcess:
    return ServerProcess(*flags, "--unlimited-quotas", "--bot-workers", "0", "--log-level",
                         "warning", log_dir=log_dir)


def stop(server: ServerProcess) -> None:
    """A clean stop (SIGTERM), once the server answers: its first line comes before it
    takes SIGTERM as a stop (a SIGTERM sooner ends it at once, -15)."""
    with grpc.insecure_channel(server.address) as channel:
        answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(),
                                                           timeout=CALL)
    assert answer.status == health_pb2.HealthCheckResponse.SERVING
    assert server.stop() == 0, server.log()


def pseudonym(record_id: str, account_id: str) -> str:
    """What a record made today calls an account (server/tokens.py's, written out here)."""
    return "p_" + hashlib.sha256(f"player:{record_id}:{account_id}".encode()).hexdigest()[:16]


# ---------------------------------------------------------------- the checks, from outside

def served_ids(message: Any, facts: dict[str, Any]) -> list[str]:
    """The account ids of ``facts`` that a message carries anywhere."""
    data = message.SerializeToString()
    return [a["account_id"] for a in facts["accounts"] if a["account_id"].encode() in data]


async def check_accounts(address: str, facts: dict[str, Any], *, finished: str = "") -> None:
    """Every account signs in by its device (and Ana by her password) to the same account,
    with its ratings and history as the release showed them, and its own records listed
    without an account id. ``finished``: the release's unfinished game, since finished here,
    is each seat's one game more (its newest); else each refresh token the release gave
    signs in too."""
    async with grpc.aio.insecure_channel(address) as channel:
        accounts = accounts_pb2_grpc.AccountServiceStub(channel)
        game = copas_pb2_grpc.CopasServiceStub(channel)
        more = 1 if finished else 0
        for fact in facts["accounts"]:
            session = (await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
                device_secret=fact["device_secret"], display_name=fact["name"]),
                timeout=CALL)).session
            assert (session.account.account_id, session.account.display_name,
                    session.is_new_account) == (fact["account_id"], fact["name"], False)
            if not finished:
                again = (await accounts.RefreshSession(accounts_pb2.RefreshSessionRequest(
                    refresh_token=fact["refresh_token"]), timeout=CALL)).session
                assert again.account.account_id == fact["account_id"]
            profile = await accounts.GetProfile(accounts_pb2.GetProfileRequest(),
                                                metadata=auth(session.access_token),
                                                timeout=CALL)
            assert [(r.players, r.games) for r in profile.ratings] == [
                (r["players"], r["games"] + more) for r in fact["ratings"]]
            if not finished:
                assert [(r.wins, r.rating) for r in profile.ratings] == [
                    (r["wins"], r["rating"]) for r in fact["ratings"]]
                assert [(r.mu, r.sigma) for r in profile.ratings] == [
                    pytest.approx((r["mu"], r["sigma"]), rel=1e-12) for r in fact["ratings"]]
            assert profile.games == fact["games"] + more
            history = (await accounts.ListMyGames(accounts_pb2.ListMyGamesRequest(
                page_size=100), metadata=auth(session.access_token), timeout=CALL)).games
            assert [g.record_id for g in history[:more]] == [finished] * more
            assert [{"record_id": g.record_id, "table_name": g.table_name,
                     "players": g.players, "place": g.place, "points": g.points,
                     "is_rated": g.is_rated, "rating_after": g.rating_after,
                     "rating_change": g.rating_change,
                     "finished": pytest.approx(g.finish_time.ToNanoseconds() / 1e9, abs=1e-6)}
                    for g in history[more:]] == fact["history"]
            listed, token = [], ""
            while True:
                page = await game.ListGameRecords(copas_pb2.ListGameRecordsRequest(
                    account_id=fact["account_id"], page_size=1, page_token=token),
                    metadata=auth(session.access_token), timeout=CALL)
                assert served_ids(page, facts) == []
                listed += [r.record_id for r in page.records]
                token = page.next_page_token
                if not token:
                    break
            assert listed == [g.record_id for g in history]
        signed_in = (await accounts.SignInPassword(accounts_pb2.SignInPasswordRequest(
            username=FACTS["username"], password=FACTS["password"]), timeout=CALL)).session
        assert signed_in.account.account_id == facts["accounts"][0]["account_id"]
        assert signed_in.account.username == FACTS["username"]


def check_public(record: copas_pb2.GameRecord, accounts: dict[int, str]) -> None:
    """A record as everyone reads it: each signed-in seat (``accounts``: seat -> its account
    id, "" for none) named by its pseudonym in this record, in the message and its JSON."""
    expected = {seat: pseudonym(record.record_id, account) if account else ""
                for seat, account in accounts.items()}
    assert {s.seat: s.player_id for s in record.seats} == expected
    if record.record_json:
        seats = json.loads(record.record_json)["seats"]
        assert all("account" not in s and "net" not in s for s in seats)
        assert {s["seat"]: s.get("player", "") for s in seats} == expected


def accounts_of(fact: dict[str, Any]) -> dict[int, str]:
    return {int(seat): account for seat, account in fact["accounts"].items()}


async def check_records(address: str, facts: dict[str, Any], *, finished: str = "") -> None:
    """The finished games: served with no account id anywhere, each signed-in seat named by a
    pseudonym of this record, a bot by none; their seats, standings and ends as before; the
    records listed page by page as before (``finished``: after the release's unfinished game,
    finished here)."""
    async with grpc.aio.insecure_channel(address) as channel:
        game = copas_pb2_grpc.CopasServiceStub(channel)
        for fact in facts["records"]:
            answer = await game.GetGameRecord(copas_pb2.GetGameRecordRequest(
                record_id=fact["record_id"]), timeout=CALL)
            assert served_ids(answer, facts) == []
            record = answer.record
            assert (record.table_id, record.display_name, record.action_count,
                    copas_pb2.GameEndReason.Name(record.end_reason)) == (
                fact["table_id"], fact["display_name"], fact["action_count"],
                fact["end_reason"])
            assert [{"seat": s.seat, "name": s.display_name, "is_bot": s.is_bot,
                     "total": s.total} for s in record.seats] == fact["seats"]
            assert [{"seat": s.seat, "place": s.place, "total": s.total,
                     "has_left": s.has_left} for s in record.standings] == fact["standings"]
            check_public(record, accounts_of(fact))
        seated = {s["seat"]: s["account_id"] for s in facts["unfinished"]["seats"]}
        kept = {r["record_id"]: accounts_of(r) for r in facts["records"]}
        listed, token = [], ""
        while True:
            page = await game.ListGameRecords(copas_pb2.ListGameRecordsRequest(
                page_size=1, page_token=token), timeout=CALL)
            assert len(page.records) <= 1
            assert served_ids(page, facts) == []
            for summary in page.records:
                check_public(summary, seated if summary.record_id == finished
                             else kept[summary.record_id])
            listed += [r.record_id for r in page.records]
            token = page.next_page_token
            if not token:
                break
        assert listed == [finished] * bool(finished) + facts["listed"]


async def check_unfinished(address: str, facts: dict[str, Any]) -> str:
    """The game left mid-hand: every player's token sees it at the same sequence with the
    same hand; the one to act plays a legal card, and so on to the game's end. Its record
    names no account, and rates its seats from the ratings the release gave them. Returns
    its record id."""
    table = facts["unfinished"]
    table_id = table["table_id"]
    async with grpc.aio.insecure_channel(address) as channel:
        game = copas_pb2_grpc.CopasServiceStub(channel)
        for seat in table["seats"]:
            answer = await game.GetView(copas_pb2.GetViewRequest(table_id=table_id),
                                        metadata=auth(seat["player_token"]), timeout=CALL)
            view = answer.view
            assert answer.sequence == table["sequence"]
            assert (view.seat, copas_pb2.Phase.Name(view.phase), view.hand_number,
                    view.trick_number, list(view.to_act)) == (
                seat["seat"], table["phase"], table["hand_number"], table["trick_number"],
                table["to_act"])
            assert [c.text for c in view.hand] == seat["hand"]
            assert [c.text for c in view.legal_cards] == seat["legal_cards"]
            assert [c.card.text for c in view.trick.cards] == table["trick"]
        player = next(s for s in table["seats"] if s["is_to_act"])
        played = await game.PlayCard(copas_pb2.PlayCardRequest(
            table_id=table_id, card=card_pb(player["legal_cards"][0])),
            metadata=auth(player["player_token"]), timeout=CALL)
        assert played.sequence == table["sequence"] + 1  # the event after the release's last
        after = await game.GetView(copas_pb2.GetViewRequest(table_id=table_id),
                                   metadata=auth(player["player_token"]), timeout=CALL)
        assert after.sequence >= played.sequence
        assert [c.text for c in after.view.hand] == [
            c for c in player["hand"] if c != player["legal_cards"][0]]
        assert [c.card.text for c in after.view.trick.cards] == [
            *table["trick"], player["legal_cards"][0]]
        await play_to_the_end(game, table_id, [s["player_token"] for s in table["seats"]])
        # The accounts take the game in within seconds (each node reads the newest records
        # every second): its record shows how it moved each seat's rating once they have.
        deadline = asyncio.get_running_loop().time() + CALL
        while True:
            answer = await game.GetGameRecord(copas_pb2.GetGameRecordRequest(
                record_id=table_id), timeout=CALL)
            if answer.record.ratings or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.05)
        assert served_ids(answer, facts) == []
        check_public(answer.record, {s["seat"]: s["account_id"] for s in table["seats"]})
        before = {a["account_id"]: a["ratings"][0] for a in facts["accounts"]}
        moved = {u.seat: u for u in answer.record.ratings}
        assert sorted(moved) == [s["seat"] for s in table["seats"]], "the game was not rated"
        for seat in table["seats"]:
            update, kept = moved[seat["seat"]], before[seat["account_id"]]
            assert (update.mu_before, update.sigma_before) == pytest.approx(
                (kept["mu"], kept["sigma"]), rel=1e-12)
            assert (update.games_before, update.games_after) == (kept["games"],
                                                                 kept["games"] + 1)
        return str(answer.record.record_id)


async def play_to_the_end(game: copas_pb2_grpc.CopasServiceStub, table_id: str,
                          tokens: list[str]) -> None:
    """Each player in turn plays its first legal card (or chooses the first moon choice)
    until the game is over."""
    for _ in range(4 * 52):  # far more turns than the hand has
        views = [(await game.GetView(copas_pb2.GetViewRequest(table_id=table_id),
                                     metadata=auth(token), timeout=CALL)).view
                 for token in tokens]
        if views[0].phase == copas_pb2.PHASE_GAME_OVER:
            return
        for token, view in zip(tokens, views, strict=True):
            if view.seat not in view.to_act:
                continue
            if view.phase == copas_pb2.PHASE_MOON_CHOICE:
                await game.ChooseMoon(copas_pb2.ChooseMoonRequest(
                    table_id=table_id, choice=view.moon_choices[0]), metadata=auth(token),
                    timeout=CALL)
            else:
                await game.PlayCard(copas_pb2.PlayCardRequest(
                    table_id=table_id, card=view.legal_cards[0]), metadata=auth(token),
                    timeout=CALL)
    raise AssertionError("the game did not end")


async def check_championship(address: str, facts: dict[str, Any]) -> None:
    """The championship still takes registrations: the fourth account registers."""
    kept = facts["championship"]
    request = championships_pb2.GetChampionshipRequest(championship_id=kept["championship_id"])
    async with grpc.aio.insecure_channel(address) as channel:
        champs = championships_pb2_grpc.ChampionshipServiceStub(channel)
        champ = (await champs.GetChampionship(request, timeout=CALL)).championship
        assert champ.settings.display_name == kept["display_name"]
        assert champ.state == championships_pb2.CHAMPIONSHIP_STATE_REGISTERING
        assert [p.display_name for p in champ.players] == kept["players"]
        newcomer = next(a for a in facts["accounts"] if a["name"] not in kept["players"])
        session = (await accounts_pb2_grpc.AccountServiceStub(channel).SignInDevice(
            accounts_pb2.SignInDeviceRequest(device_secret=newcomer["device_secret"]),
            timeout=CALL)).session
        await champs.Register(championships_pb2.RegisterRequest(
            championship_id=kept["championship_id"]), metadata=auth(session.access_token),
            timeout=CALL)
        champ = (await champs.GetChampionship(request, timeout=CALL)).championship
        assert [p.display_name for p in champ.players] == [*kept["players"], newcomer["name"]]
        assert champ.state == championships_pb2.CHAMPIONSHIP_STATE_REGISTERING


async def check_everything(address: str, facts: dict[str, Any]) -> str:
    """Every check on the release's data as it was; then its unfinished game is finished
    here (its record id returned) and the accounts and records checked again with it."""
    await check_accounts(address, facts)
    await check_records(address, facts)
    await check_championship(address, facts)
    finished = await check_unfinished(address, facts)
    await check_accounts(address, facts, finished=finished)
    await check_records(address, facts, finished=finished)
    return finished


# ---------------------------------------------------------------- SQLite

def release_data(tmp_path: Path) -> Path:
    """A copy of the release's data directory (the fixture itself is never opened)."""
    data = tmp_path / "data"
    shutil.copytree(RELEASE / "sqlite", data)
    return data


def files_of(data: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(data.iterdir())}


def user_version(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def set_user_version(path: Path, version: int) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute(f"PRAGMA user_version = {version}")
    finally:
        db.close()  # the last connection: the WAL is folded in and removed


@pytest.mark.sqlite_only
async def test_the_release_s_sqlite_data_comes_back_migrated(tmp_path: Path) -> None:
    data = release_data(tmp_path)
    assert (user_version(data / "copas.db"), user_version(data / "accounts.sqlite3")) == (3, 0)
    with serve("--data-dir", str(data), log_dir=tmp_path) as server:
        finished = await check_everything(server.address, FACTS["sqlite"])
        stop(server)
    assert (user_version(data / "copas.db"), user_version(data / "accounts.sqlite3")) == (
        SCHEMA_VERSION, ACCOUNT_SCHEMA_VERSION)
    with serve("--data-dir", str(data), log_dir=tmp_path) as server:  # migrated, started again
        await check_accounts(server.address, FACTS["sqlite"], finished=finished)
        await check_records(server.address, FACTS["sqlite"], finished=finished)
        stop(server)


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The release's data directory as this server leaves it (migrated, stopped cleanly)."""
    base = tmp_path_factory.mktemp("migrated")
    data = release_data(base)
    with serve("--data-dir", str(data), log_dir=base) as server:
        stop(server)
    return data


@pytest.mark.sqlite_only
@pytest.mark.parametrize(("origin", "name"), [
    ("migrated", "copas.db"), ("migrated", "accounts.sqlite3"), ("release", "copas.db"),
    ("release", "accounts.sqlite3")])
def test_a_newer_sqlite_database_is_refused_and_left_as_it_was(
        tmp_path: Path, migrated: Path, origin: str, name: str) -> None:
    """One file of the data directory from a newer Copas (the others as this server leaves
    them, or as the release did): the start is refused with status 2, saying why, and no
    file of the data directory changes."""
    known = SCHEMA_VERSION if name == "copas.db" else ACCOUNT_SCHEMA_VERSION
    data = tmp_path / "data"
    shutil.copytree(migrated if origin == "migrated" else RELEASE / "sqlite", data)
    set_user_version(data / name, known + 1)
    before = files_of(data)
    done = run_server("--data-dir", str(data), "--log-level", "warning")
    assert done.returncode == 2, done.stderr
    whose = "" if name == "copas.db" else "accounts "
    assert f"{data / name} has {whose}schema version {known + 1}; this server knows up to " \
           f"{known}: run a newer Copas" in done.stderr
    after = files_of(data)
    assert sorted(after) == sorted(before)
    assert after[name] == before[name]
    assert [n for n in before if after[n] != before[n]] == []


# ---------------------------------------------------------------- PostgreSQL

def load(dsn: str, path: Path) -> None:
    subprocess.run([tool("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-f",
                    str(path)], check=True, capture_output=True, text=True, timeout=60)


def release_database(postgres: Any) -> str:
    """A fresh database holding the release's dump."""
    dsn = fresh_database(postgres.dsn)
    load(dsn, RELEASE / "postgres.sql")
    return dsn


def pg_dump(dsn: str) -> str:
    return subprocess.run([tool("pg_dump"), "--no-owner", "--no-privileges", dsn],
                          check=True, capture_output=True, text=True, timeout=60).stdout


def dump(dsn: str) -> list[str]:
    """The database as pg_dump shows it (its random \\restrict key left out)."""
    return [line for line in pg_dump(dsn).splitlines()
            if not line.startswith(("\\restrict", "\\unrestrict"))]


def query(dsn: str, sql: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as db:
        cursor = db.execute(sql)
        return cursor.fetchall() if cursor.description else []


def node(dsn: str, log_dir: Path) -> ServerProcess:
    """A node of the release's cluster (the same node id: its tables are this node's)."""
    return serve("--database", dsn, "--node-id", FACTS["node_id"], log_dir=log_dir)


async def test_the_release_s_postgresql_data_comes_back_migrated(postgres: Any,
                                                                  tmp_path: Path) -> None:
    dsn = release_database(postgres)
    assert query(dsn, "SELECT value FROM copas WHERE key = 'schema_version'") == [("7",)]
    with node(dsn, tmp_path) as server:
        finished = await check_everything(server.address, FACTS["postgres"])
        stop(server)
    assert query(dsn, "SELECT value FROM copas WHERE key = 'schema_version'") == [
        (str(PG_SCHEMA_VERSION),)]
    assert query(dsn, "SELECT value FROM accounts_meta WHERE key = 'schema_version'") == [
        (str(ACCOUNT_SCHEMA_VERSION),)]
    # Log formats (a rolling upgrade's rule): the table this node wrote entries to (the one
    # left of the release's) is of its format, and the node says its own.
    assert query(dsn, "SELECT table_id, log_format FROM tables") == [
        (FACTS["postgres"]["unfinished"]["table_id"], LOG_FORMAT)]
    assert query(dsn, "SELECT node_id, log_format FROM nodes") == [
        (FACTS["node_id"], LOG_FORMAT)]
    with node(dsn, tmp_path) as server:  # migrated data, started again
        await check_accounts(server.address, FACTS["postgres"], finished=finished)
        await check_records(server.address, FACTS["postgres"], finished=finished)
        stop(server)


@pytest.fixture(scope="module")
def migrated_dump(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The release's database as this server leaves it (migrated, stopped cleanly), dumped."""
    base = tmp_path_factory.mktemp("migrated-pg")
    dsn = release_database(postgres)
    with node(dsn, base) as server:
        stop(server)
    path = base / "migrated.sql"
    path.write_text(pg_dump(dsn))
    return path


@pytest.mark.parametrize(("origin", "table"), [
    ("migrated", "copas"), ("migrated", "accounts_meta"), ("release", "copas"),
    ("release", "accounts_meta")])
def test_a_newer_postgresql_database_is_refused_and_left_as_it_was(
        postgres: Any, migrated_dump: Path, origin: str, table: str) -> None:
    """The tables' or the accounts' schema from a newer Copas (the other as this server leaves
    it, or as the release did): the start is refused with status 2, saying why, and the
    database is as it was, row for row."""
    known = PG_SCHEMA_VERSION if table == "copas" else ACCOUNT_SCHEMA_VERSION
    dsn = fresh_database(postgres.dsn)
    load(dsn, migrated_dump if origin == "migrated" else RELEASE / "postgres.sql")
    if origin == "release" and table == "accounts_meta":  # the release's accounts had none
        query(dsn, "CREATE TABLE accounts_meta (key text PRIMARY KEY, value text NOT NULL)")
    query(dsn, f"INSERT INTO {table} VALUES ('schema_version', '{known + 1}') "
               "ON CONFLICT (key) DO UPDATE SET value = excluded.value")
    before = dump(dsn)
    done = run_server("--database", dsn, "--node-id", FACTS["node_id"], "--log-level",
                      "warning")
    assert done.returncode == 2, done.stderr
    whose = "" if table == "copas" else "accounts "
    assert f"the database has {whose}schema version {known + 1}; this server knows up to " \
           f"{known}: run a newer Copas" in done.stderr
    assert dump(dsn) == before
