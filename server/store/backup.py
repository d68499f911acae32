"""A consistent backup of a node's data directory, taken while its server runs, and its
restore (``copas admin backup`` and ``copas admin restore``, docs/OPERATING.md "Backups and
restores").

A data directory holds up to three SQLite databases in WAL mode (``versions.SQLITE_FILES``):
``copas.db`` (the tables' logs and the game records), ``accounts.sqlite3`` and
``championships.sqlite3``. A backup is one directory holding a copy of each and a manifest,
``copas-backup.json``. It is made on the node's machine, from the files, by the server's
user (a reader of a WAL database writes its ``-shm``); the server is not asked and need not
run.

**One instant for all three.** The server commits to the three databases separately (a
game's record in ``copas.db``, then its rating in ``accounts.sqlite3``; a championship's
tables in ``copas.db``, then its round in ``championships.sqlite3``; an account before its
seats), so copies taken one after the other could hold a rating without its record or a
seat of an account that is not there. The backup takes each database's write lock at once
(``BEGIN IMMEDIATE``, in the order of ``SQLITE_FILES``, each waited for at most
``lock_wait``; when one is not had, all are let go and it tries again), opens a read
transaction on each (WAL readers see the database as of that moment, whatever is committed
after), and lets the locks go: the server's writers wait a few milliseconds. The copies are
those read transactions: the three databases as they were at one instant between two
commits, which is what a kill -9 at that instant would have left, and a server recovers
from that (every acknowledged action is in it: nothing is acknowledged before its commit).

**Whole or absent.** Each snapshot is copied with SQLite's online backup API into a
directory of its own beside the destination (``.NAME.partial-...``), switched to
rollback-journal mode (a single file, no WAL), ``copas.db``'s state set to ``backup``,
checked (``PRAGMA quick_check``) and synced; then the manifest (when, from where, by which
Copas, each file's size, SHA-256 and schema version) and the rename to the destination's
name. A backup that fails leaves nothing; one that is there is complete.

**Restoring** copies a backup, its checksums verified, into a data directory that does not
exist or is empty (never over data), the same way (a directory beside it, then a rename);
a server started on it takes the copies as they are: a database marked ``backup`` needs no
WAL (``server.store.sqlite``), while a raw copy of a running server's ``copas.db`` without
its ``-wal`` is still refused, and so is a backup of one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from server.store.sqlite import BACKUP_STATE, is_rollback_file, lost_wal
from server.store.versions import SQLITE_FILES, known_versions

MANIFEST = "copas-backup.json"
FORMAT = 1
SQLITE_MAGIC = b"SQLite format 3\x00"


class BackupError(Exception):
    """A backup or restore that did not happen (nothing was left behind): ``status`` 2 for
    what was asked (a directory missing or not empty, a file that is not a database, a
    backup that is damaged), 1 for a failure on the way (a full disk, the databases kept
    busy). The message is one line saying why."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


# ---------------------------------------------------------------- backup

def backup(data_dir: Path, dest: Path, *, version: str = "unknown", lock_wait: float = 1.0,
           tries: int = 20) -> dict[str, Any]:
    """Back up the databases of ``data_dir`` into the new directory ``dest``, consistently
    with each other (see the module's text), while a server may be using them. Returns the
    manifest written in it.

    :raises BackupError: nothing was written (``dest`` is not there).
    """
    files = _source_files(data_dir)
    _check_destination(dest)
    partial = dest.with_name(f".{dest.name}.partial-{secrets.token_hex(4)}")
    try:
        partial.mkdir()
    except OSError as exc:
        raise BackupError(f"cannot write in {dest.parent}: {exc.strerror}") from None
    try:
        manifest = _write_backup(data_dir, files, partial, version, lock_wait, tries)
        _write_json(partial / MANIFEST, manifest)
        _sync_dir(partial)
        if dest.exists():  # made meanwhile by someone else: theirs is kept
            raise BackupError(f"{dest} was made while the backup ran: it is kept as it is")
        partial.rename(dest)
        _sync_dir(dest.parent)
        return manifest
    except BaseException as exc:
        shutil.rmtree(partial, ignore_errors=True)
        if isinstance(exc, OSError):
            raise BackupError(f"the backup into {dest} failed: {_why(exc)}", 1) from None
        if isinstance(exc, sqlite3.Error):
            raise BackupError(f"the backup into {dest} failed: {exc}", 1) from None
        raise


def _source_files(data_dir: Path) -> list[Path]:
    """The databases of ``data_dir`` to copy (``copas.db`` first), checked as a server's start
    checks them, before any is opened (opening one makes its ``-wal`` and ``-shm``)."""
    if str(data_dir) == "memory":
        raise BackupError("--data-dir memory keeps nothing to back up")
    if not data_dir.exists():
        raise BackupError(f"no data directory {data_dir}")
    if not data_dir.is_dir():
        raise BackupError(f"{data_dir} is not a directory")
    if not (data_dir / SQLITE_FILES[0]).is_file():
        raise BackupError(f"{data_dir} holds no {SQLITE_FILES[0]}: not a Copas data directory "
                          "(give the server's --data-dir)")
    files = [data_dir / name for name in SQLITE_FILES if (data_dir / name).is_file()]
    for path in files:
        _check_database_file(path)
    copas = files[0]
    wal = copas.with_name(copas.name + "-wal")
    if not wal.exists() and not is_rollback_file(copas) and _state(copas) == "running":
        raise BackupError(lost_wal(copas))
    return files


def _check_database_file(path: Path) -> None:
    try:
        with path.open("rb") as file:
            header = file.read(len(SQLITE_MAGIC))
        wal = path.with_name(path.name + "-wal")
        wal_size = wal.stat().st_size if wal.exists() else 0
    except OSError as exc:
        raise BackupError(f"cannot read {path}: {exc.strerror}") from None
    if not header and wal_size > 0:
        raise BackupError(f"{path} is empty but its write-ahead log {wal.name} holds "
                          f"{wal_size} bytes: the database was damaged")
    if header and header != SQLITE_MAGIC:
        raise BackupError(f"{path} is not a SQLite database")


def _state(path: Path) -> str | None:
    """The state mark of a ``copas.db`` that has no WAL (so its file is all of it), read
    without a lock or a file made beside it (``immutable``)."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        try:
            if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'copas'"
                          ).fetchone() is None:
                return None
            row = db.execute("SELECT value FROM copas WHERE key = 'state'").fetchone()
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise BackupError(f"cannot read {path}: {exc}") from None
    return None if row is None else str(row[0])


def _check_destination(dest: Path) -> None:
    if dest.exists() or dest.is_symlink():
        raise BackupError(f"{dest} exists: a backup goes into a new directory (a name not "
                          "taken, such as one with the date)")
    if not dest.parent.is_dir():
        raise BackupError(f"no directory {dest.parent} to write the backup in")


def _write_backup(data_dir: Path, files: list[Path], into: Path, version: str,
                  lock_wait: float, tries: int) -> dict[str, Any]:
    with _one_instant(files, lock_wait, tries) as (readers, taken):
        known = known_versions()
        entries: dict[str, dict[str, Any]] = {}
        for path, reader in zip(files, readers, strict=True):
            found = int(reader.execute("PRAGMA user_version").fetchone()[0])
            if found > known[path.name]:
                raise BackupError(f"{path} has schema version {found}; this Copas knows up "
                                  f"to {known[path.name]}: back it up with the Copas that "
                                  "serves it")
            _copy(reader, into / path.name, is_tables=path.name == SQLITE_FILES[0],
                  version=found)
            reader.close()  # its snapshot is no longer needed: the server may checkpoint
            entries[path.name] = {"bytes": (into / path.name).stat().st_size,
                                  "sha256": _sha256(into / path.name),
                                  "schema_version": found}
    return {"format": FORMAT, "taken_at": _utc(taken), "taken_at_unix": round(taken, 6),
            "copas_version": version, "data_dir": str(data_dir.resolve()), "files": entries}


@contextlib.contextmanager
def _one_instant(files: list[Path], lock_wait: float, tries: int
                 ) -> Iterator[tuple[list[sqlite3.Connection], float]]:
    """Read transactions on ``files`` that all see the same instant (see the module's text),
    and that instant (Unix time)."""
    readers: list[sqlite3.Connection] = []
    try:
        for path in files:
            readers.append(_open(f"{path.resolve().as_uri()}?mode=ro", path, uri=True))
        taken = _snapshot(files, readers, lock_wait, tries)
        yield readers, taken
    finally:
        for reader in readers:
            reader.close()


def _snapshot(files: list[Path], readers: list[sqlite3.Connection], lock_wait: float,
              tries: int) -> float:
    """Hold every database's write lock, begin each reader's transaction, let the locks go.
    The lock connections close while the readers are open, so none of them is the last
    connection of its database, which would fold the WAL into the file and delete it (a
    crashed server's WAL must stay for its restart to see that it crashed), and a reader,
    read-only, never does."""
    for attempt in range(tries):
        lockers: list[sqlite3.Connection] = []
        try:
            try:
                for path in files:
                    lockers.append(_open(str(path), path, timeout=lock_wait))
                    lockers[-1].execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                    raise BackupError(f"cannot lock {files[len(lockers) - 1]}: {exc}"
                                      ) from None
                time.sleep(min(0.05 * 2 ** attempt, 1.0))
                continue  # a database busy for longer than lock_wait: all let go, again
            taken = time.time()
            for reader in readers:
                reader.execute("BEGIN")
                reader.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return taken
        finally:
            for locker in lockers:
                with contextlib.suppress(sqlite3.Error):
                    if locker.in_transaction:
                        locker.execute("ROLLBACK")
                locker.close()
    raise BackupError(f"the databases of {files[0].parent} stayed busy: no instant with "
                      f"all of their write locks free in {tries} tries; try again", 1)


def _open(target: str, path: Path, *, uri: bool = False, timeout: float = 5.0
          ) -> sqlite3.Connection:
    try:
        return sqlite3.connect(target, uri=uri, timeout=timeout, isolation_level=None,
                               check_same_thread=False)
    except sqlite3.Error as exc:
        raise BackupError(f"cannot open {path}: {exc} (run the backup as the server's user: "
                          "a reader writes the database's -shm file)") from None


def _copy(reader: sqlite3.Connection, dest: Path, *, is_tables: bool, version: int) -> None:
    """The reader's snapshot into the new file ``dest``, in rollback-journal mode, checked
    and synced; ``is_tables``: ``copas.db``, marked as a backup."""
    copy = sqlite3.connect(dest, isolation_level=None)
    try:
        reader.backup(copy)
        copy.execute("PRAGMA journal_mode=DELETE")
        copy.execute("PRAGMA synchronous=FULL")
        if is_tables and version >= 2:
            copy.execute("UPDATE copas SET value = ? WHERE key = 'state'", (BACKUP_STATE,))
        problems = [str(row[0]) for row in copy.execute("PRAGMA quick_check").fetchall()]
        if problems != ["ok"]:
            raise BackupError(f"the copy of {dest.name} fails SQLite's check: "
                              f"{'; '.join(problems[:3])}", 1)
    finally:
        copy.close()
    _sync_file(dest)


# ---------------------------------------------------------------- restore

def read_manifest(backup_dir: Path) -> dict[str, Any]:
    """A backup's manifest, each file's checksum and schema version checked.

    :raises BackupError: it is not a backup, a file is missing or damaged, or a newer Copas
        made it.
    """
    if not backup_dir.is_dir():
        raise BackupError(f"no backup directory {backup_dir}")
    path = backup_dir / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        files = manifest["files"]
        if not isinstance(files, dict) or not all(
                isinstance(entry, dict) and isinstance(entry.get("sha256"), str)
                and type(entry.get("schema_version")) is int for entry in files.values()):
            raise TypeError("files")
    except FileNotFoundError:
        raise BackupError(f"{backup_dir} is not a Copas backup: it has no {MANIFEST} (one "
                          "made by `copas admin backup` has)") from None
    except OSError as exc:
        raise BackupError(f"cannot read {path}: {exc.strerror}") from None
    except (ValueError, TypeError, KeyError):
        raise BackupError(f"{path} is not a Copas backup's manifest") from None
    if manifest.get("format") != FORMAT:
        raise BackupError(f"{path} has format {manifest.get('format')!r}; this Copas reads "
                          f"format {FORMAT}: restore it with a newer Copas")
    known = known_versions()
    if SQLITE_FILES[0] not in files or not set(files) <= set(SQLITE_FILES):
        raise BackupError(f"{path} lists {', '.join(sorted(files)) or 'no files'}: a Copas "
                          f"backup has {SQLITE_FILES[0]} and may have "
                          f"{', '.join(SQLITE_FILES[1:])}")
    for name, entry in files.items():
        if entry["schema_version"] > known[name]:
            raise BackupError(f"{backup_dir / name} has schema version "
                              f"{entry['schema_version']}; this Copas knows up to "
                              f"{known[name]}: restore it with a newer Copas")
        try:
            digest = _sha256(backup_dir / name)
        except FileNotFoundError:
            raise BackupError(f"the backup {backup_dir} is missing {name}") from None
        except OSError as exc:
            raise BackupError(f"cannot read {backup_dir / name}: {exc.strerror}") from None
        if digest != entry.get("sha256"):
            raise BackupError(f"{backup_dir / name} is damaged: its SHA-256 is not the one "
                              "the backup wrote")
    return dict(manifest)


def restore(backup_dir: Path, data_dir: Path) -> dict[str, Any]:
    """Copy the backup ``backup_dir`` into ``data_dir`` (which must not exist or be empty),
    verified, for a server to start on. Returns the backup's manifest.

    :raises BackupError: nothing was written (``data_dir`` is as it was).
    """
    manifest = read_manifest(backup_dir)
    if data_dir.is_symlink() or (data_dir.exists() and not data_dir.is_dir()):
        raise BackupError(f"{data_dir} is not a directory")
    if data_dir.is_dir() and any(data_dir.iterdir()):
        raise BackupError(f"{data_dir} is not empty: restore into a new or empty directory "
                          "(move the old one away first; never over a server's data)")
    if not data_dir.parent.is_dir():
        raise BackupError(f"no directory {data_dir.parent} to restore into")
    if data_dir.is_dir() and data_dir.stat().st_dev != data_dir.parent.stat().st_dev:
        raise BackupError(f"{data_dir} is a mount point: restore into a new directory in it "
                          f"(--data-dir {data_dir / 'data'})")
    partial = data_dir.with_name(f".{data_dir.name}.partial-{secrets.token_hex(4)}")
    try:
        partial.mkdir()
    except OSError as exc:
        raise BackupError(f"cannot write in {data_dir.parent}: {exc.strerror}") from None
    try:
        for name, entry in manifest["files"].items():
            shutil.copyfile(backup_dir / name, partial / name)
            _sync_file(partial / name)
            if _sha256(partial / name) != entry["sha256"]:
                raise BackupError(f"the copy of {name} differs from the backup's", 1)
        _sync_dir(partial)
        if data_dir.is_dir() and any(data_dir.iterdir()):
            raise BackupError(f"{data_dir} was written while the restore ran: it is kept as "
                              "it is")
        partial.rename(data_dir)  # over an empty directory, or to a new name
        _sync_dir(data_dir.parent)
        return manifest
    except BaseException as exc:
        shutil.rmtree(partial, ignore_errors=True)
        if isinstance(exc, OSError):
            raise BackupError(f"the restore into {data_dir} failed: {_why(exc)}", 1) from None
        raise


# ---------------------------------------------------------------- files

def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    _sync_file(path)


def _sync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _utc(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _why(exc: OSError) -> str:
    return f"{exc.strerror or exc}{f' ({exc.filename})' if exc.filename else ''}"


def summary(manifest: dict[str, Any]) -> str:
    """A manifest in one line: when, and each file with its size and schema version."""
    files = ", ".join(f"{name} ({entry['bytes']:,} bytes, schema {entry['schema_version']})"
                      for name, entry in manifest["files"].items())
    return f"taken at {manifest['taken_at']} from {manifest['data_dir']}: {files}"
