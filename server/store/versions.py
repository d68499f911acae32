"""Every store's schema version, read before any store is opened (and so before any is
migrated): data a newer Copas wrote is refused at start and left exactly as it was, all of it,
not only the store that happened to be opened first.

The stores and their versions: the tables' (SQLite ``copas.db``, or the cluster's PostgreSQL),
the accounts' (``accounts.sqlite3``, or ``accounts_meta``), the championships'
(``championships.sqlite3``, or ``championships_meta``)."""

from __future__ import annotations

from pathlib import Path

from server.store.base import StoreUnusable
from server.store.pg_connection import connect

SQLITE_FILES = ("copas.db", "accounts.sqlite3", "championships.sqlite3")


def known_versions() -> dict[str, int]:
    """The newest version of each store this server knows, by its SQLite file's name."""
    from server.accounts.sqlite import SCHEMA_VERSION as ACCOUNTS
    from server.championships.store import SCHEMA_VERSION as CHAMPIONSHIPS
    from server.store.sqlite import SCHEMA_VERSION as TABLES

    return {"copas.db": TABLES, "accounts.sqlite3": ACCOUNTS,
            "championships.sqlite3": CHAMPIONSHIPS}


def _user_version(path: Path) -> int:
    """A SQLite file's ``user_version``, read from its header (bytes 60..63, big-endian):
    nothing is opened as a database, locked or written (a version a write-ahead log holds and
    the file not yet is read by the store's own open)."""
    try:
        with path.open("rb") as file:
            header = file.read(100)
    except OSError:
        return 0
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return 0  # not a database we can read: the store's own open says why
    return int.from_bytes(header[60:64], "big")


def check_data_dir(data_dir: str) -> None:
    """:raises StoreUnusable: a file of ``data_dir`` has a schema newer than this server's."""
    if data_dir == "memory":
        return
    for name, known in known_versions().items():
        path = Path(data_dir) / name
        if path.is_file() and (found := _user_version(path)) > known:
            whose = {"copas.db": "", "accounts.sqlite3": "accounts ",
                     "championships.sqlite3": "championships "}[name]
            raise StoreUnusable(f"{path} has {whose}schema version {found}; this server knows "
                                f"up to {known}: run a newer Copas")


def check_database(dsn: str) -> None:
    """:raises StoreUnusable: the cluster's database has a schema newer than this server's."""
    import psycopg

    from server.store.postgres import PG_SCHEMA_VERSION

    known = {("copas", ""): PG_SCHEMA_VERSION,
             ("accounts_meta", "accounts "): known_versions()["accounts.sqlite3"],
             ("championships_meta", "championships "): known_versions()["championships.sqlite3"]}
    try:
        with connect(dsn, connect_timeout=10) as db:
            present = {name for (name,) in db.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema()")}
            for (table, what), newest in known.items():
                if table not in present:
                    continue
                row = db.execute(f"SELECT value FROM {table} WHERE key = 'schema_version'"
                                 ).fetchone()
                if row is not None and int(row[0]) > newest:
                    raise StoreUnusable(
                        f"the database has {what}schema version {row[0]}; this server "
                        f"knows up to {newest}: run a newer Copas")
    except psycopg.Error:
        return  # unreachable or unreadable: the stores' own open says why
