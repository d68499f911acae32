"""A cluster's backup as docs/OPERATING.md gives it (issue 39): `pg_dump` of the database
while a node serves under load, `pg_restore` into a new database, the node started on it
with its `--node-id`: every action acknowledged before the dump began is there (moves,
games ended, accounts, registrations: one snapshot of every store), nothing first answered
after it ended, and the games go on."""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import time
from pathlib import Path
from typing import Any

import grpc
from copas.v1 import copas_pb2, copas_pb2_grpc

from tests.helpers.backups import Load, check_restored, history
from tests.helpers.servers import ServerProcess, fresh_database
from tools.pglocal import tool


def cluster_node(dsn: str, tmp: Path) -> ServerProcess:
    return ServerProcess("--database", dsn, "--node-id", "n1", "--unlimited-quotas",
                         "--bot-workers", "0", "--bot-table-pace", "0.01", "--lease", "2",
                         "--rate-one-network", "--trick-pause", "0", "--hand-pause", "0",
                         "--log-level", "warning", log_dir=tmp)


async def test_pg_dump_under_load_and_pg_restore_keep_every_acknowledged_action(
        postgres: Any, tmp_path: Path) -> None:
    name = f"copas_{secrets.token_hex(4)}"
    live_dsn = fresh_database(postgres.dsn, name)
    live = cluster_node(live_dsn, tmp_path)
    load = Load(live.address)
    dump = tmp_path / "copas.dump"
    try:
        await load.start()
        await load.under_way()  # games, sign-ins and registrations going on, some over
        began = time.time()
        proc = await asyncio.create_subprocess_exec(
            tool("pg_dump"), "--format=custom", f"--file={dump}", live_dsn,
            stderr=asyncio.subprocess.PIPE)
        _, err = await asyncio.wait_for(proc.communicate(), 120)
        ended = time.time()
        assert proc.returncode == 0, err.decode()
        await asyncio.sleep(1.5)
        await load.stop()
        acked, before = load.acked, load.acked.before(began)
        assert len(before.moves) > 100 and any(m[0] > ended for m in acked.moves)
        assert before.over and before.rated and before.registrations
        async with grpc.aio.insecure_channel(live.address) as channel:
            stub = copas_pb2_grpc.CopasServiceStub(channel)
            live_history = {t: await history(stub, t, tokens[0])
                            for t, tokens in acked.tokens.items()}
            live_records = {t: (await stub.GetGameRecord(copas_pb2.GetGameRecordRequest(
                record_id=t))).record.SerializeToString() for t in before.over}
    finally:
        live.stop()

    restored_dsn = fresh_database(postgres.dsn, f"{name}_restored")
    done = subprocess.run([tool("pg_restore"), "--no-owner", "--exit-on-error",
                           "--single-transaction", f"--dbname={restored_dsn}", str(dump)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    node = cluster_node(restored_dsn, tmp_path)
    try:
        async with grpc.aio.insecure_channel(node.address) as channel:
            await check_restored(channel, load, began, ended, live_history, live_records)
    finally:
        assert node.stop() == 0
