"""The store: each table's event log and the records of finished games, durable before the
server answers: in memory, SQLite in a data directory (the default, ``open_local_store``),
or a cluster's shared PostgreSQL (``PgStore.open``)."""

from __future__ import annotations

from pathlib import Path

from server.store.base import (
    GameRecord,
    RecordSummary,
    Storage,
    StorageFailed,
    StoredTable,
    StoreUnusable,
    TableMeta,
)
from server.store.group_commit import CommitObserver
from server.store.memory import MemoryStore
from server.store.postgres import Node, PgStore
from server.store.sqlite import SqliteStore

__all__ = ["GameRecord", "MemoryStore", "Node", "PgStore", "RecordSummary", "SqliteStore",
           "Storage", "StorageFailed", "StoreUnusable", "StoredTable", "TableMeta",
           "open_local_store"]


def open_local_store(data_dir: str, on_commit: CommitObserver | None = None
                     ) -> MemoryStore | SqliteStore:
    """``memory`` for no durability, else the SQLite database ``copas.db`` in ``data_dir``.

    :raises StoreUnusable: see :meth:`SqliteStore.open`.
    """
    if data_dir == "memory":
        return MemoryStore()
    return SqliteStore.open(Path(data_dir) / "copas.db", on_commit)
