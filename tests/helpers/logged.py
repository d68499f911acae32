"""Tables on a manual clock whose log is kept as written, and their replay: what a restart
reads (the memory store keeps no log to read back)."""

from __future__ import annotations

from typing import Any

from server.observability import Metrics
from server.store import MemoryStore
from server.store.base import StoredTable, TableMeta
from server.tables.clock import ManualScheduler
from server.tables.ownership import LocalOwnership
from server.tables.recovery import rebuild
from server.tables.registry import TableRegistry
from tests.helpers.servers import config_for_tests


class LoggedStore(MemoryStore):
    """The memory store, keeping each table's log as written (a restart's reading of it)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, tuple[float, TableMeta, dict[int, str]]] = {}

    def create_table(self, table_id: str, created: float, meta: TableMeta) -> None:
        super().create_table(table_id, created, meta)
        self.tables[table_id] = (created, meta, {})

    def append(self, table_id: str, entry: str) -> int:
        n = super().append(table_id, entry)
        self.tables[table_id][2][n] = entry
        return n

    def delete_entry(self, table_id: str, n: int) -> None:
        super().delete_entry(table_id, n)
        del self.tables[table_id][2][n]


def new_registry(clock: ManualScheduler, store: LoggedStore | None = None, **options: Any
                 ) -> TableRegistry:
    config = config_for_tests(allow_seed=True, **options)
    return TableRegistry(config.registry_settings(), config.table_settings(), Metrics(),
                         store or LoggedStore(), clock, LocalOwnership())


def store_log(registry: TableRegistry, table: Any) -> list[str]:
    """The table's log as the store holds it, in order."""
    store = registry.store
    assert isinstance(store, LoggedStore)
    return [entry for _, entry in sorted(store.tables[table.id][2].items())]


def replayed(registry: TableRegistry, table: Any, **options: Any) -> Any:
    """The table rebuilt from its log by a fresh registry (of ``options``) on the same
    store."""
    store = registry.store
    assert isinstance(store, LoggedStore)
    created, meta, log = store.tables[table.id]
    stored = StoredTable(table.id, created, meta, tuple(sorted(log.items())), False,
                         table.sequence)
    fresh = LoggedStore()  # holding the log read, so the rebuilt table may write on
    fresh.create_table(table.id, created, meta)
    for _, entry in sorted(log.items()):
        fresh.append(table.id, entry)
    return rebuild(new_registry(ManualScheduler(registry.scheduler.now()), fresh, **options),
                   stored)
