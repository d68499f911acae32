"""Recovery: rebuild every table the store holds, before the server serves.

Replay is a pure function of the log: each entry goes through the table's own code with
``is_replaying`` set, which logs nothing, counts nothing, schedules nothing and sends
nothing. A table whose log does not replay is quarantined: its log stays as it is, the
failure is reported (an error line, ``copas_tables_quarantined``), its id answers
UNAVAILABLE, and the next start tries again. Finished games stay for what is left of
``--finished-table-ttl``; older ones go.
"""

from __future__ import annotations

import structlog

from server.store.base import StoredTable
from server.tables.log_entries import loads
from server.tables.registry import TableRegistry
from server.tables.table import Table

log = structlog.get_logger("copas.recovery")


def rebuild(registry: TableRegistry, stored: StoredTable) -> Table:
    """The table a stored log describes. Raises on anything that does not fit."""
    if stored.meta is None:
        raise ValueError(stored.error or "no table meta")
    table = registry.new_table(stored.table_id, stored.created, stored.meta)
    try:
        parse = table.game_module.action_from_json
        table.replay_log([(position, loads(text, parse)) for position, text in stored.entries],
                         stored.sequence)
        if stored.is_finished and not table.is_finished:
            raise ValueError("the store says finished but the log does not end the game")
    except BaseException:
        registry.forget_replayed(table)
        raise
    return table


def adopt_all(registry: TableRegistry, stored_tables: list[StoredTable]) -> int:
    """Rebuild and serve tables from the store (at start, or taken over from a node that
    died); returns how many now run here. Finished ones past their ttl go."""
    now = registry.scheduler.now()
    ttl = registry.settings.finished_table_ttl
    adopted = 0
    for stored in stored_tables:
        if stored.meta is not None:
            registry.note_order(stored.meta.order)
        if stored.is_finished and (stored.finished or 0.0) + ttl <= now:
            registry.store.release_table(stored.table_id)  # its record stays
            continue
        try:
            table = rebuild(registry, stored)
        except Exception as exc:  # any unreadable or inconsistent log
            reason = f"{type(exc).__name__}: {exc}"[:300]
            registry.quarantined[stored.table_id] = reason
            registry.metrics.tables_failed.inc()
            log.error("table_quarantined", table_id=stored.table_id, error=reason)
            continue
        registry.quarantined.pop(stored.table_id, None)
        table.resume_after_recovery(stored.finished)
        registry.adopt(table)
        registry.table_changed(table)  # the lobby (and a cluster's summaries) see it
        adopted += 1
    registry.metrics.tables_quarantined.set(len(registry.quarantined))
    return adopted


def recover(registry: TableRegistry) -> tuple[int, int]:
    """Rebuild every table in the store; returns (recovered, quarantined)."""
    stored = registry.store.load_tables()
    recovered = adopt_all(registry, stored)
    quarantined = len(registry.quarantined)
    log.info("tables_recovered", recovered=recovered, quarantined=quarantined)
    return recovered, quarantined
