"""Backups and restores an operator can trust (issue 39): `copas admin backup` of a running
node under load, `copas admin restore` into a new directory, a server started on it with
every action acknowledged before the backup's instant (moves, games ended, accounts,
registrations) and nothing of after its end, its games going on; a raw copy without its WAL
still refused while a backup (or VACUUM INTO) is accepted; every bad input a clear refusal
that writes nothing."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from copas.v1 import copas_pb2, copas_pb2_grpc

from tests.helpers.backups import Load, check_restored, history
from tests.helpers.servers import ROOT, ServerProcess, run_server

FILES = ("copas.db", "accounts.sqlite3", "championships.sqlite3")
BACKUPS = 30  # taken beside the writer (without the locks, most runs find an orphan)


def node(data: Path, *flags: str) -> ServerProcess:
    return ServerProcess("--data-dir", str(data), "--unlimited-quotas", "--log-level",
                         "warning", "--bot-workers", "0", "--bot-table-pace", "0.01",
                         "--rate-one-network", "--trick-pause", "0", "--hand-pause", "0",
                         *flags)


def copas(*args: str) -> subprocess.CompletedProcess[str]:
    """`copas ARGS` as an operator runs it."""
    return subprocess.run([sys.executable, "-m", "tools.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def copas_here(*args: str) -> subprocess.CompletedProcess[str]:
    """`copas ARGS` run in this process (its exit status, what it printed): the same command
    line without a Python start each time."""
    from tools.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(args))
    return subprocess.CompletedProcess(["copas", *args], status, out.getvalue(),
                                       err.getvalue())


async def copas_async(*args: str) -> tuple[int, str, str]:
    """`copas ARGS` while this event loop goes on (the load keeps playing)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tools.cli", *args, cwd=ROOT, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode(), err.decode()


def refused(done: subprocess.CompletedProcess[str], command: str, *words: str) -> None:
    """A refusal: exit status 2, one line on stderr saying why."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stderr.startswith(f"copas admin {command}: ") and done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr
    for word in words:
        assert word in done.stderr, done.stderr


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# ---------------------------------------------------------------- under load


async def test_a_backup_under_load_restores_every_acknowledged_action(tmp_path: Path) -> None:
    live = node(tmp_path / "data")
    load = Load(live.address)
    try:
        await load.start()
        await load.under_way()  # games, sign-ins and registrations going on, some over
        began = time.time()
        status, out, err = await copas_async("admin", "backup", "--data-dir",
                                             str(tmp_path / "data"), str(tmp_path / "b1"),
                                             "--json")
        ended = time.time()
        assert status == 0, err
        await asyncio.sleep(1.5)  # and after it
        await load.stop()
        manifest = json.loads(out)
        taken = manifest["taken_at_unix"]
        assert began <= taken <= ended
        assert json.loads((tmp_path / "b1" / "copas-backup.json").read_text()) == manifest
        assert sorted(manifest["files"]) == sorted(FILES)
        assert listing(tmp_path / "b1") == sorted([*FILES, "copas-backup.json"])
        acked = load.acked
        before = acked.before(taken)
        # The load was load: the backup fell among acknowledged moves, games and sign-ins.
        assert len(before.moves) > 100 and len(acked.moves) > len(before.moves) + 50
        assert before.over and before.rated and before.registrations
        assert any(m[0] > ended for m in acked.moves)
        assert any(at > ended for at, _ in acked.sessions)
        # The live node's histories once the load is over: the restored ones are a prefix.
        async with grpc.aio.insecure_channel(live.address) as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            live_history = {t: await history(stub, t, tokens[0])
                            for t, tokens in acked.tokens.items()}
            live_records = {t: (await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(
                record_id=t))).record.SerializeToString() for t in before.over}
    finally:
        live.stop()

    restored = copas("admin", "restore", str(tmp_path / "b1"), "--data-dir",
                     str(tmp_path / "restored"))
    assert restored.returncode == 0, restored.stderr
    assert "start the server with --data-dir" in restored.stdout
    assert listing(tmp_path / "restored") == sorted(FILES)
    check_one_instant(tmp_path / "b1")

    server = node(tmp_path / "restored")
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            await check_restored(channel, load, taken, ended, live_history, live_records)
    finally:
        assert server.stop() == 0


def check_one_instant(backup: Path) -> None:
    """The backup's databases agree: every game the accounts took in has its record, every
    registration its account (each database copied as of the same instant)."""
    def read(name: str) -> sqlite3.Connection:
        return sqlite3.connect(f"{(backup / name).resolve().as_uri()}?mode=ro&immutable=1",
                               uri=True)
    tables, accounts, championships = (read(name) for name in FILES)
    try:
        records = {r for (r,) in tables.execute("SELECT record_id FROM records")}
        taken_in = {r for (r,) in accounts.execute("SELECT record_id FROM recorded_games")}
        assert taken_in and taken_in <= records, taken_in - records
        people = {a for (a,) in accounts.execute("SELECT account_id FROM accounts")}
        registered = {a for (a,) in championships.execute(
            "SELECT account_id FROM championship_players")}
        assert registered and registered <= people, registered - people
        state = tables.execute("SELECT value FROM copas WHERE key = 'state'").fetchone()
        assert state == ("backup",)
    finally:
        for db in (tables, accounts, championships):
            db.close()


def test_backups_beside_a_writer_of_two_databases_each_hold_one_instant(tmp_path: Path) -> None:
    """A writer that commits each game's record to copas.db and then its intake to
    accounts.sqlite3, as the server does, at full speed: every backup taken meanwhile holds
    no intake without its record, and the writer never waited long nor was refused (the
    locks are held for moments; a refused commit would stop a server)."""
    from server.store.backup import backup

    data = stopped_data_dir(tmp_path)
    stop = threading.Event()
    done: list[int] = []
    waits: list[float] = []
    failures: list[BaseException] = []

    def writer() -> None:
        tables = sqlite3.connect(data / "copas.db", isolation_level=None, timeout=5)
        accounts = sqlite3.connect(data / "accounts.sqlite3", isolation_level=None, timeout=5)
        try:
            n = 0
            while not stop.is_set():
                started = time.monotonic()
                tables.execute("INSERT INTO records (record_id, finished, summary, record) "
                               "VALUES (?, 0, '{}', '{}')", (f"r{n}",))
                accounts.execute("INSERT INTO recorded_games VALUES (?)", (f"r{n}",))
                waits.append(time.monotonic() - started)
                done.append(n)
                n += 1
        except BaseException as exc:  # the test reports it
            failures.append(exc)
        finally:
            tables.close()
            accounts.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for n in range(BACKUPS):
            backup(data, tmp_path / f"b{n}")
    finally:
        stop.set()
        thread.join(30)
    assert not failures, failures
    assert len(done) > 100 and max(waits) < 2.0
    for n in range(BACKUPS):
        db = sqlite3.connect(tmp_path / f"b{n}" / "copas.db")
        db.execute(f"ATTACH '{tmp_path / f'b{n}' / 'accounts.sqlite3'}' AS accounts")
        orphans = db.execute("SELECT count(*) FROM accounts.recorded_games WHERE record_id "
                             "NOT IN (SELECT record_id FROM records)").fetchone()[0]
        db.close()
        assert orphans == 0, n


# ---------------------------------------------------------------- what a start accepts


def test_a_raw_copy_without_its_wal_is_refused_a_backup_or_vacuum_into_is_accepted(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    live = node(data)
    try:
        with grpc.insecure_channel(live.address) as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            table = stub.CreateTable(copas_pb2.CreateTableRequest()).table
            stub.JoinTable(copas_pb2.JoinTableRequest(table_id=table.table_id,
                                                      display_name="A"))
        raw = tmp_path / "raw"  # the files as `cp` takes them, the -wal left out
        raw.mkdir()
        for name in FILES:
            shutil.copyfile(data / name, raw / name)
        vacuumed = tmp_path / "vacuumed"
        vacuumed.mkdir()
        for name in FILES:
            db = sqlite3.connect(data / name)
            db.execute(f"VACUUM INTO '{vacuumed / name}'")
            db.close()
        # SQLite's backup API by hand (sqlite3's .backup): a copy in WAL mode.
        by_hand = tmp_path / "by_hand.db"
        with contextlib.closing(sqlite3.connect(data / "copas.db")) as source, \
                contextlib.closing(sqlite3.connect(by_hand)) as copy:
            source.backup(copy)
        made = copas("admin", "backup", "--data-dir", str(data), str(tmp_path / "b"))
        assert made.returncode == 0, made.stderr
        assert made.stdout.startswith(f"backed up {data} into {tmp_path / 'b'}; taken at ")
    finally:
        live.stop()
    # The raw copy: its copas.db says a server was running, and it has no WAL. A backup of
    # it is refused as a start is (it would pass the loss on), and touches nothing.
    refused(copas_here("admin", "backup", "--data-dir", str(raw), str(tmp_path / "b2")), "backup",
            "did not stop cleanly")
    assert not (tmp_path / "b2").exists() and listing(raw) == sorted(FILES)
    for _ in range(2):  # and the refusal stays
        done = run_server("--data-dir", str(raw))
        assert done.returncode == 2, done.stderr
        assert "did not stop cleanly" in done.stderr and "copas admin backup" in done.stderr
    # A copy made by hand with SQLite's backup API is in WAL mode, as a raw copy: it cannot be
    # told from one and is refused, until the operator, who knows it is whole, switches it to
    # rollback-journal mode (docs/OPERATING.md, "Copies made another way").
    from server.store import SqliteStore, StoreUnusable

    with pytest.raises(StoreUnusable, match="did not stop cleanly"):
        SqliteStore.open(by_hand)
    with contextlib.closing(sqlite3.connect(by_hand)) as db:
        assert db.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
    asyncio.run(SqliteStore.open(by_hand).close())
    for accepted in (tmp_path / "b", vacuumed):  # both are whole without a WAL
        server = node(accepted)
        try:
            with grpc.insecure_channel(server.address) as channel:
                stub = copas_pb2_grpc.CopasServiceStub(channel)
                got = stub.GetTable(copas_pb2.GetTableRequest(table_id=table.table_id)).table
                assert [s.display_name for s in got.seats if s.is_taken] == ["A"]
        finally:
            assert server.stop() == 0


def test_a_backup_of_a_crashed_or_stopped_node_keeps_what_its_restart_needs(
        tmp_path: Path) -> None:
    """A crashed node's WAL is read, never folded in (its restart must see that it crashed),
    and the copy holds what the WAL held; a stopped node starts after its backup too."""
    data = tmp_path / "data"
    crashed = node(data)
    with grpc.insecure_channel(crashed.address) as channel:
        stub = copas_pb2_grpc.CopasServiceStub(channel)
        table = stub.CreateTable(copas_pb2.CreateTableRequest()).table
        stub.JoinTable(copas_pb2.JoinTableRequest(table_id=table.table_id, display_name="A"))
    crashed.kill9()
    wal = (data / "copas.db-wal").read_bytes()
    assert wal
    made = copas_here("admin", "backup", "--data-dir", str(data), str(tmp_path / "b"))
    assert made.returncode == 0, made.stderr
    assert (data / "copas.db-wal").read_bytes() == wal
    # The crashed node restarts (and stops), the backup starts, the stopped node's backup
    # is taken, and the stopped node starts after it.
    for directory, backup_after in ((data, "b2"), (tmp_path / "b", ""), (data, "")):
        server = node(directory)
        try:
            with grpc.insecure_channel(server.address) as channel:
                stub = copas_pb2_grpc.CopasServiceStub(channel)
                got = stub.GetTable(copas_pb2.GetTableRequest(table_id=table.table_id)).table
                assert [s.display_name for s in got.seats if s.is_taken] == ["A"]
        finally:
            assert server.stop() == 0
        if backup_after:
            again = copas_here("admin", "backup", "--data-dir", str(directory),
                               str(tmp_path / backup_after))
            assert again.returncode == 0, again.stderr


# ---------------------------------------------------------------- bad input


def test_a_backup_of_what_is_not_a_data_directory_is_refused(tmp_path: Path) -> None:
    dest = tmp_path / "b"
    refused(copas("admin", "backup", "--data-dir", str(tmp_path / "nowhere"), str(dest)),
            "backup", "no data directory")  # as a process: its exit status
    refused(copas_here("admin", "backup", "--data-dir", "memory", str(dest)), "backup",
            "nothing to back up")
    (tmp_path / "empty").mkdir()
    refused(copas_here("admin", "backup", "--data-dir", str(tmp_path / "empty"), str(dest)),
            "backup", "not a Copas data directory")
    (tmp_path / "file").write_text("x")
    refused(copas_here("admin", "backup", "--data-dir", str(tmp_path / "file"), str(dest)),
            "backup", "not a directory")
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "copas.db").write_bytes(os.urandom(8192))
    refused(copas_here("admin", "backup", "--data-dir", str(junk), str(dest)), "backup",
            "not a SQLite database")
    assert listing(tmp_path) == ["empty", "file", "junk"]  # nothing written anywhere
    assert listing(junk) == ["copas.db"]


def stopped_data_dir(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    node(data).stop()
    return data


def test_a_backup_never_writes_over_anything_nor_leaves_a_half(tmp_path: Path,
                                                                monkeypatch: Any) -> None:
    from server.store.backup import BackupError, backup

    data = stopped_data_dir(tmp_path)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "mine").write_text("kept")
    refused(copas_here("admin", "backup", "--data-dir", str(data), str(tmp_path / "taken")),
            "backup", "exists")
    assert listing(tmp_path / "taken") == ["mine"]
    refused(copas_here("admin", "backup", "--data-dir", str(data), str(tmp_path / "no" / "b")),
            "backup", "no directory")
    # The disk fails on the way (the third file's sync): nothing is left, not even a part.
    syncs = 0
    real_fsync = os.fsync

    def failing(fd: int) -> None:
        nonlocal syncs
        syncs += 1
        if syncs == 3:
            raise OSError(28, "No space left on device")
        real_fsync(fd)
    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(BackupError, match="No space left on device") as failed:
        backup(data, tmp_path / "b")
    assert failed.value.status == 1
    assert listing(tmp_path) == ["data", "taken"]


def test_a_restore_takes_only_a_whole_backup_into_an_empty_directory(tmp_path: Path) -> None:
    data = stopped_data_dir(tmp_path)
    backup = tmp_path / "b"
    assert copas_here("admin", "backup", "--data-dir", str(data), str(backup)).returncode == 0
    # Not over data: a directory that holds anything is left as it is.
    files = {p.name: p.read_bytes() for p in data.iterdir()}
    refused(copas_here("admin", "restore", str(backup), "--data-dir", str(data)), "restore",
            "not empty")
    assert {p.name: p.read_bytes() for p in data.iterdir()} == files
    refused(copas_here("admin", "restore", str(tmp_path / "nowhere"), "--data-dir",
                  str(tmp_path / "r")), "restore", "no backup directory")
    refused(copas_here("admin", "restore", str(data), "--data-dir", str(tmp_path / "r")),
            "restore", "not a Copas backup")
    # A damaged backup: one byte of a file changed.
    damaged = tmp_path / "damaged"
    shutil.copytree(backup, damaged)
    body = bytearray((damaged / "accounts.sqlite3").read_bytes())
    body[-1] ^= 1
    (damaged / "accounts.sqlite3").write_bytes(bytes(body))
    refused(copas_here("admin", "restore", str(damaged), "--data-dir", str(tmp_path / "r")),
            "restore", "damaged")
    # A backup of a newer Copas.
    newer = tmp_path / "newer"
    shutil.copytree(backup, newer)
    manifest = json.loads((newer / "copas-backup.json").read_text())
    manifest["files"]["copas.db"]["schema_version"] = 99
    (newer / "copas-backup.json").write_text(json.dumps(manifest))
    refused(copas_here("admin", "restore", str(newer), "--data-dir", str(tmp_path / "r")),
            "restore", "schema version 99", "newer Copas")
    assert not (tmp_path / "r").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    # An empty directory is taken (one made for it beforehand).
    (tmp_path / "r").mkdir()
    done = copas_here("admin", "restore", str(backup), "--data-dir", str(tmp_path / "r"), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads((backup / "copas-backup.json").read_text())
    assert listing(tmp_path / "r") == sorted(FILES)
    node(tmp_path / "r").stop()
