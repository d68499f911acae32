"""How a node connects to PostgreSQL (``connect``: every connection it opens, with the
settings below), and one PostgreSQL connection for a small store beside the tables
(accounts, championships): its schema made under an advisory lock (one node at a time), each
call one transaction under a thread lock, a broken connection opened again, an outage a
``StoreUnreachable``."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from server.store.base import StoreUnreachable

T = TypeVar("T")

# Added to every connection unless --database sets them itself. TCP keepalives and a TCP user
# timeout: a database whose machine is lost, paused or cut off sends no reset, and without them
# a node would wait on its connection (a commit, its lease) for the kernel's own timeouts,
# minutes to hours; with them the connection fails within about 10 s, the node fail-stops and
# its next connection finds the database again (after a failover: the new primary).
CONNECTION_DEFAULTS = {"keepalives": "1", "keepalives_idle": "5", "keepalives_interval": "2",
                       "keepalives_count": "3", "tcp_user_timeout": "10000"}
# With several hosts (libpq's multi-host form, a primary and its standbys), a node must reach
# the one that takes writes: target_session_attrs=read-write unless the DSN says so already.
WRITABLE = ("read-write", "primary")


def conninfo(dsn: str, connect_timeout: int) -> str:
    """``dsn`` with what a node adds (``CONNECTION_DEFAULTS``, ``connect_timeout`` seconds for
    each host tried, target_session_attrs=read-write for several hosts); the DSN's own values
    win.

    :raises ValueError: the DSN cannot be read, or names several hosts and lets a connection
        go to one that does not take writes.
    """
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        given = conninfo_to_dict(dsn)
    except ProgrammingError as exc:
        raise ValueError(f"--database cannot be read: {exc}") from None
    added = {**CONNECTION_DEFAULTS, "connect_timeout": str(connect_timeout)}
    hosts = [h for h in str(given.get("host", "")).split(",") if h] or [""]
    if len(hosts) > 1:
        attrs = str(given.get("target_session_attrs", "read-write"))
        if attrs not in WRITABLE:
            raise ValueError(f"--database names {len(hosts)} hosts with "
                             f"target_session_attrs={attrs}: a node could connect to a standby; "
                             "use target_session_attrs=read-write")
        added["target_session_attrs"] = attrs
    return make_conninfo(dsn, **{k: v for k, v in added.items() if k not in given})


def connect(dsn: str, connect_timeout: int = 5) -> Any:
    """A connection (autocommit) to the database ``dsn`` names, with ``conninfo``'s settings.

    :raises psycopg.Error: it cannot be made.
    """
    import psycopg

    try:
        info = conninfo(dsn, connect_timeout)
    except ValueError as exc:
        raise psycopg.ProgrammingError(str(exc)) from None
    return psycopg.connect(info, autocommit=True)


class PgConnection:
    def __init__(self, dsn: str, schema: str, lock_key: int, what: str,
                 prepare: Callable[[Any], None] | None = None) -> None:
        """``what``: whose database, as an outage's message names it ("the accounts'");
        ``prepare(connection)``: the schema's migrations, after ``schema`` in the same
        transaction under the lock (it may raise ``StoreUnusable``)."""
        self._dsn, self._what = dsn, what
        self._db: Any = connect(dsn, connect_timeout=10)
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
                    self._db = connect(self._dsn)
                with self._db.transaction():
                    return body(self._db)
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                raise StoreUnreachable(f"{self._what} database cannot be reached: "
                                       f"{str(exc).splitlines()[0] if str(exc) else exc!r}"
                                       ) from None
