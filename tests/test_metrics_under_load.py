"""``/metrics`` is a promise to every operator: scraped without pause beside a thousand accounts
signing in, refreshing and playing, a server answers HTTP 200 every time, with every series the
shipped dashboard reads (a gauge reads a snapshot on the server's own loop, never a structure
another thread changes or that its own reads reorder)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.helpers.accounts import (
    Scraper,
    dashboard_metrics,
    play_rated_games,
    sign_in_many,
)
from tests.helpers.servers import ServerProcess, free_port

ACCOUNTS = 1000
PLAYERS = [f"Metrics {n}" for n in range(8)]


async def test_metrics_answer_every_scrape_beside_a_thousand_accounts(tmp_path: Path) -> None:
    metrics, web = free_port(), free_port()
    with ServerProcess("--data-dir", str(tmp_path), "--unlimited-quotas", "--metrics-port",
                       str(metrics), "--metrics-host", "127.0.0.1", "--web-port", str(web),
                       "--web-host", "127.0.0.1", "--trick-pause", "0", "--hand-pause", "0",
                       "--log-level", "warning") as server:
        with Scraper([metrics]) as scraper:
            sessions, _ = await asyncio.gather(
                sign_in_many([server.address], ACCOUNTS),
                play_rated_games(server.address, 3, PLAYERS))
        assert len({s.account.account_id for s in sessions}) == ACCOUNTS
        assert scraper.failures == []
        assert len(scraper.statuses) > 3 and set(scraper.statuses) == {200}
        wanted = {m for m in dashboard_metrics() if not m.startswith("copas_cluster_")}
        assert wanted - scraper.exported[metrics] == set()
        assert server.stop() == 0
