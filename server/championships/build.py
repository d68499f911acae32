"""The championships of a server, from its configuration: their store (SQLite beside the
tables in ``--data-dir``, in memory, or the cluster's PostgreSQL), the driver over this
node's tables and records, and ``Championships`` for the edge."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from server.accounts.attempts import Creations
from server.championships.driver import Driver, StoreLease
from server.championships.notices import ChangeNotices
from server.championships.service import Championships
from server.championships.store import (
    FILE,
    ChampionshipStore,
    PgChampionshipStore,
    SqliteChampionshipStore,
)
from server.championships.tables import LocalTables
from server.config import Config
from server.observability import Metrics
from server.store.base import StoreUnusable
from server.tables.registry import TableRegistry


@dataclass(frozen=True, slots=True)
class ChampionshipsPart:
    store: ChampionshipStore
    driver: Driver
    championships: Championships
    tables: LocalTables
    notices: ChangeNotices | None
    """A cluster's: every change any node makes, heard at once (None: one node)."""


def open_championship_store(config: Config) -> ChampionshipStore:
    """:raises StoreUnusable: the championships' database cannot be opened."""
    try:
        if config.database:
            return PgChampionshipStore(config.database)
        if config.data_dir == "memory":
            return SqliteChampionshipStore(":memory:")
        return SqliteChampionshipStore(Path(config.data_dir) / FILE)
    except Exception as exc:
        raise StoreUnusable(f"cannot open the championships' store: {exc}") from None


LEASE_STEPS = 10  # a championship's lease lasts this many driver steps


def build_championships(config: Config, store: ChampionshipStore, registry: TableRegistry,
                        metrics: Metrics, node_id: str) -> ChampionshipsPart:
    """The parts, given this node's registry (its tables, and the records in its store). On
    a cluster (``--database``) a node drives a championship while it holds its lease."""
    tables = LocalTables(registry)
    lease = StoreLease(store, node_id, LEASE_STEPS * config.championship_interval,
                       lambda: registry.is_draining) \
        if config.database else None
    driver = Driver(store, tables, registry.store, metrics, lease=lease,
                    interval=config.championship_interval,
                    expire_after=config.championship_expiry_days * 86400.0)
    championships = Championships(store, driver, tables, registry.settings,
                                  per_account=config.championships_per_account,
                                  max_players=config.championship_max_players,
                                  creations=Creations(
                                      time.monotonic, config.championships_per_address_per_hour,
                                      config.championships_burst, what="championships",
                                      reason="TOO_MANY_CHAMPIONSHIPS",
                                      advice="register for one that exists"))
    notices = ChangeNotices(config.database, driver.changed, driver.changed_all) \
        if config.database else None
    return ChampionshipsPart(store, driver, championships, tables, notices)
