"""One PostgreSQL connection for a small store beside the tables (accounts, championships):
its schema made under an advisory lock (one node at a time), each call one transaction under
a thread lock, a broken connection opened again, an outage a ``StoreUnreachable``."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from server.store.base import StoreUnreachable

T = TypeVar("T")


class PgConnection:
    def __init__(self, dsn: str, schema: str, lock_key: int, what: str,
                 prepare: Callable[[Any], None] | None = None) -> None:
        """``what``: whose database, as an outage's message names it ("the accounts'");
        ``prepare(connection)``: the schema's migrations, after ``schema`` in the same
        transaction under the lock (it may raise ``StoreUnusable``)."""
        import psycopg

        self._dsn, self._what = dsn, what
        self._db: Any = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
        with self._db.transaction():
            self._db.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key,))
            for statement in schema.split(";"):
                if statement.strip():
                    self._db.execute(statement)
            if prepare is not None:
                prepare(self._db)
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def run(self, body: Callable[[Any], T]) -> T:
        """``body(connection)`` in one transaction (blocking: call it off the event loop).

        :raises StoreUnreachable: the database cannot be reached.
        """
        import psycopg

        with self._lock:
            try:
                if self._db.closed or self._db.broken:
                    self._db = psycopg.connect(self._dsn, autocommit=True, connect_timeout=5)
                with self._db.transaction():
                    return body(self._db)
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                raise StoreUnreachable(f"{self._what} database cannot be reached: "
                                       f"{str(exc).splitlines()[0] if str(exc) else exc!r}"
                                       ) from None
