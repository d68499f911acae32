"""The cluster key: the secret a node presents when it relays a call to another node (on that
node's internal port only: the public port ignores it). It lives in the database (the first
node makes it), and it rotates without a restart:

    python -m server.cluster.keys rotate --database postgresql://...

writes a new key and keeps the one before it as the previous key. Every node re-reads the
keys every ``REFRESH_SECONDS``: from then on it presents the new key, and it accepts both
until ``GRACE_SECONDS`` after the rotation (by the database's clock), so relays in flight
and nodes that have not yet re-read keep working. Rotate again no sooner than a refresh
period later.
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import os
import sys

import structlog

from server.cluster.queries import ClusterQueries, PgClusterQueries
from server.store.postgres import PgStore

log = structlog.get_logger("copas.cluster")

REFRESH_SECONDS = 10.0  # how often a node re-reads the keys
GRACE_SECONDS = 300.0  # the previous key is accepted this long after a rotation


class ClusterKeys:
    """The key this node presents, and the keys it accepts."""

    def __init__(self, current: str, previous: str = "") -> None:
        self.current = current
        self._accepted: tuple[bytes, ...] = ()
        self.update(current, previous)

    def update(self, current: str, previous: str) -> None:
        if current != self.current:
            log.info("cluster_key_rotated")
        self.current = current
        self._accepted = tuple(k.encode() for k in (current, previous) if k)

    def accepts(self, presented: str | None) -> bool:
        """``presented`` is the current key or, within the grace, the previous one."""
        if not presented:
            return False
        given = presented.encode()
        return any([hmac.compare_digest(given, key) for key in self._accepted])

    async def keep_fresh(self, queries: ClusterQueries) -> None:
        """Re-read the keys every ``REFRESH_SECONDS`` (a failed read keeps what was read)."""
        while True:
            await asyncio.sleep(REFRESH_SECONDS)
            try:
                current, previous = await asyncio.to_thread(queries.cluster_keys,
                                                         GRACE_SECONDS)
            except Exception as exc:  # the database is away: the next read may succeed
                log.warning("cluster_keys_unread", error=str(exc))
                continue
            self.update(current, previous)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server.cluster.keys",
                                     description="Rotate a Copas cluster's key.")
    parser.add_argument("action", choices=("rotate",))
    parser.add_argument("--database", default=os.environ.get("COPAS_DATABASE", ""),
                        help="the cluster's PostgreSQL (default: COPAS_DATABASE)")
    args = parser.parse_args(argv)
    if not args.database:
        parser.error("--database (or COPAS_DATABASE) is required")
    store = PgStore.open(args.database, None)
    try:
        PgClusterQueries(store).rotate_cluster_key()
    finally:
        asyncio.run(store.close())
    print(f"cluster key rotated: nodes present the new key within {REFRESH_SECONDS:g} s and "
          f"accept the previous one for {GRACE_SECONDS:g} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
