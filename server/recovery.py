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

from engine import Rules
from server.log_entries import loads
from server.registry import TableManager
from server.storage import StoredTable
from server.table import Table

log = structlog.get_logger("copas.recovery")


def rebuild(manager: TableManager, stored: StoredTable) -> Table:
    """The table a stored log describes. Raises on anything that does not fit."""
    if stored.error:
        raise ValueError(stored.error)
    meta = stored.meta
    table = Table(manager, table_id=stored.table_id, name=meta["name"], preset=meta["preset"],
                  rules=Rules.from_dict(meta["rules"]), seed=meta["seed"],
                  bot_seats=meta["bots"], order=meta["order"], created=stored.created,
                  request_key=meta.get("rk", ""), fingerprint=meta.get("fp", ""),
                  bot_policy=meta.get("bot_policy", "auto"))
    table.is_replaying = True
    try:
        if table.bot_seats == table.rules.players:
            table.start()
            table._end_step()
        for position, text in stored.entries:
            table.replay(loads(text), position)
        if stored.status == "finished" and not table.is_finished:
            raise ValueError("the store says finished but the log does not end the game")
    except BaseException:
        _forget(manager, table)
        raise
    table.sequence = max(table.sequence, stored.sequence)
    return table


def _forget(manager: TableManager, table: Table) -> None:
    """Undo what a failed replay registered."""
    for seat in table.seats:
        if seat.token_hash:
            manager.forget_token(seat.token_hash)
        if seat.holds_slot:
            seat.holds_slot = False
            manager.give_slot()


def adopt_all(manager: TableManager, stored_tables: list[StoredTable]) -> int:
    """Rebuild and serve tables from the store (at start, or taken over from a node that
    died); returns how many now run here. Finished ones past their ttl go."""
    now = manager.scheduler.now()
    ttl = manager.config.finished_table_ttl
    adopted = 0
    for stored in stored_tables:
        manager.note_order(int(stored.meta.get("order", 0) or 0))
        if stored.status == "finished" and (stored.finished or 0.0) + ttl <= now:
            manager.storage.release_table(stored.table_id)  # its record stays
            continue
        try:
            table = rebuild(manager, stored)
        except Exception as exc:  # any unreadable or inconsistent log
            reason = f"{type(exc).__name__}: {exc}"[:300]
            manager.quarantined[stored.table_id] = reason
            manager.metrics.tables_failed.inc()
            log.error("table_quarantined", table_id=stored.table_id, error=reason)
            continue
        manager.quarantined.pop(stored.table_id, None)
        manager._adopt(table)
        if table.request_key:
            manager._remember_create(table.request_key, table.fingerprint, table.id)
        table.resume_after_recovery(stored.finished)
        if table.is_finished:
            assert table.finished_at is not None
            manager._schedule_release(table, table.finished_at + ttl - now)
        manager.table_changed(table)  # the lobby (and a cluster's summaries) see it
        adopted += 1
    manager.metrics.tables_quarantined.set(len(manager.quarantined))
    return adopted


def recover(manager: TableManager) -> tuple[int, int]:
    """Rebuild every table in the store; returns (recovered, quarantined)."""
    stored = manager.storage.load_tables()
    recovered = adopt_all(manager, stored)
    quarantined = len(manager.quarantined)
    log.info("tables_recovered", recovered=recovered, quarantined=quarantined)
    return recovered, quarantined
