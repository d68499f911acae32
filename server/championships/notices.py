"""A cluster node hears of every championship change at once: PostgreSQL's LISTEN on the
channel every change notifies (``ChampionshipStore``'s writes, on commit), read by a thread of
its own on a connection of its own and handed to the event loop as ``changed(id)``; so a node
that does not drive a championship tells its watchers of a new round as soon as its driver
wrote it, not at its next poll. A lost connection is opened again (every championship counts as
changed then: a change in the gap is not missed)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Callable

import structlog

from server.championships.store import CHANNEL
from server.store.pg_connection import connect

log = structlog.get_logger("copas.championships")

WAIT = 0.5  # seconds a read waits for a notice before it looks at the stop flag again
RETRY = 1.0  # seconds before a lost connection is opened again


class ChangeNotices:
    def __init__(self, dsn: str, changed: Callable[[str], None],
                 all_changed: Callable[[], None]) -> None:
        self._dsn = dsn
        self._changed = changed
        self._all_changed = all_changed
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._listen, name="copas-notices", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 10)

    def _hand(self, call: Callable[[], None]) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(call)

    def _listen(self) -> None:

        while not self._stopping.is_set():
            try:
                with connect(self._dsn) as db:
                    db.execute(f"LISTEN {CHANNEL}")
                    self._hand(self._all_changed)  # what changed while nobody listened
                    while not self._stopping.is_set():
                        for notice in db.notifies(timeout=WAIT):
                            self._hand(functools.partial(self._changed, notice.payload))
            except Exception as exc:  # the database away: listen again when it is back
                if not self._stopping.is_set():
                    log.warning("championship_notices_lost", error=str(exc)[:200])
                    self._stopping.wait(RETRY)
