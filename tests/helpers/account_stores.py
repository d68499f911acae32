"""An accounts store of each kind for the store's tests (memory, SQLite in a temporary
directory, a fresh PostgreSQL database), closed and opened again on demand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from server.accounts.model import MemoryAccountStore
from server.accounts.postgres import PgAccountStore
from server.accounts.sqlite import SqliteAccountStore
from tests.helpers.servers import fresh_database


class Opened:
    def __init__(self, kind: str, tmp: Path, request: pytest.FixtureRequest) -> None:
        self.kind = kind
        self.path = tmp / "accounts.sqlite3"
        self.dsn = (fresh_database(request.getfixturevalue("postgres").dsn)
                    if kind == "postgresql" else "")
        self.store: Any = self.open()

    def open(self) -> Any:
        if self.kind == "memory":
            return MemoryAccountStore()
        return SqliteAccountStore(self.path) if self.kind == "sqlite" \
            else PgAccountStore(self.dsn)

    def reopen(self) -> Any:
        if self.kind != "memory":
            self.store.close()
            self.store = self.open()
        return self.store

    def close(self) -> None:
        if self.kind != "memory":
            self.store.close()
