"""Accounts across a two-node cluster on PostgreSQL: signed in on one node, seated and rated on
the other; an operator's revoke on the first is refused on both at once."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any

import grpc
from copas.admin.v1 import admin_pb2, admin_pb2_grpc
from copas.v1 import accounts_pb2, accounts_pb2_grpc, copas_pb2, copas_pb2_grpc

from clients.common import error_reason
from tests.helpers.accounts import Scraper, dashboard_metrics, play_rated_games, sign_in_many
from tests.helpers.calls import auth, play_out
from tests.helpers.servers import ServerProcess, free_port, fresh_database

OPERATOR = "operator-0123456789-abcdefghij"


def node(dsn: str, node_id: str, token_file: Path, *flags: str) -> ServerProcess:
    return ServerProcess("--database", dsn, "--node-id", node_id, "--unlimited-quotas",
                         "--admin-token-file", str(token_file), "--bot-workers", "0",
                         "--log-level", "warning", "--rate-one-network", *flags)


async def reason_of(call: Any) -> str:
    try:
        await call
    except grpc.aio.AioRpcError as error:
        return error_reason(error)
    return "OK"


async def test_sign_in_on_one_node_play_on_the_other_revoke_ends_it_on_both(
        postgres: Any, tmp_path: Path) -> None:
    dsn = fresh_database(postgres.dsn)
    token_file = tmp_path / "operator"
    token_file.write_text(OPERATOR + "\n")
    a, b = node(dsn, "a", token_file), node(dsn, "b", token_file)
    try:
        async with grpc.aio.insecure_channel(a.address) as on_a, \
                grpc.aio.insecure_channel(b.address) as on_b:
            accounts_a = accounts_pb2_grpc.AccountServiceStub(on_a)
            accounts_b = accounts_pb2_grpc.AccountServiceStub(on_b)
            game_b = copas_pb2_grpc.CopasServiceStub(on_b)
            people = [(await accounts_a.SignInDevice(accounts_pb2.SignInDeviceRequest(
                device_secret=secrets.token_urlsafe(24), display_name=name))).session
                for name in ("Ana", "Bia", "Cai")]
            table = (await game_b.CreateTable(copas_pb2.CreateTableRequest(
                preset="quick", rules=copas_pb2.RulesOverrides(  # a clock of its own: not a
                    players=3, play_timeout_seconds=0)))).table  # quick match's, with reservations
            tokens = [(await game_b.JoinTable(copas_pb2.JoinTableRequest(
                table_id=table.table_id), metadata=auth(p.access_token))).player_token
                for p in people]
            seated = (await game_b.GetTable(copas_pb2.GetTableRequest(
                table_id=table.table_id))).table
            assert [s.display_name for s in seated.seats] == ["Ana", "Bia", "Cai"]
            await play_out(game_b, table.table_id, dict(enumerate(tokens)))  # a rated game
            for _ in range(200):  # rated by the cluster, seen from the other node
                profile = await accounts_a.GetProfile(accounts_pb2.GetProfileRequest(),
                                                      metadata=auth(people[0].access_token))
                if profile.games:
                    break
                await asyncio.sleep(0.05)
            assert profile.games == 1 and profile.ratings[0].games == 1

            ana = people[0]
            ended = await admin_pb2_grpc.AdminServiceStub(on_a).RevokeSessions(
                admin_pb2.RevokeSessionsRequest(account_id=ana.account.account_id,
                                                reason="a stolen phone"),
                metadata=auth(OPERATOR))
            assert ended.sessions_ended == 1
            # At once on both nodes: tokens are looked up in the shared store at each use.
            for accounts in (accounts_a, accounts_b):
                assert await reason_of(accounts.GetProfile(
                    accounts_pb2.GetProfileRequest(), metadata=auth(ana.access_token))) \
                    == "SESSION_REVOKED"
                assert await reason_of(accounts.RefreshSession(
                    accounts_pb2.RefreshSessionRequest(refresh_token=ana.refresh_token))) \
                    == "SESSION_REVOKED"
            other = (await game_b.CreateTable(copas_pb2.CreateTableRequest(
                preset="quick"))).table
            assert await reason_of(game_b.JoinTable(copas_pb2.JoinTableRequest(
                table_id=other.table_id), metadata=auth(ana.access_token))) == "SESSION_REVOKED"
            assert await reason_of(accounts_b.GetProfile(
                accounts_pb2.GetProfileRequest(), metadata=auth(people[1].access_token))) \
                == "OK"
    finally:
        a.stop()
        b.stop()


async def test_both_nodes_metrics_answer_every_scrape_beside_a_thousand_accounts(
        postgres: Any, tmp_path: Path) -> None:
    """Scraped without pause while a thousand accounts sign in on either node and refresh on
    the other, and bot accounts play: HTTP 200 every time on both, with every series the
    dashboard reads."""
    dsn = fresh_database(postgres.dsn)
    token_file = tmp_path / "operator"
    token_file.write_text(OPERATOR + "\n")
    ports = [free_port(), free_port()]
    a, b = (node(dsn, name, token_file, "--metrics-port", str(port), "--metrics-host",
                 "127.0.0.1") for name, port in zip("ab", ports, strict=True))
    try:
        with Scraper(ports) as scraper:
            sessions, _ = await asyncio.gather(
                sign_in_many([a.address, b.address], 1000),
                play_rated_games(b.address, 2, [f"Cluster {n}" for n in range(6)]))
        assert len({s.account.account_id for s in sessions}) == 1000
        assert scraper.failures == []
        assert len(scraper.statuses) > 6 and set(scraper.statuses) == {200}
        for port in ports:
            assert dashboard_metrics() - {"copas_web_connections",
                                          "copas_web_connections_waiting"} \
                - scraper.exported[port] == set(), port
    finally:
        a.stop()
        b.stop()
