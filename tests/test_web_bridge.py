"""The web port: the page's files, and the copas.v1 contract over Connect relayed to the gRPC
service, with the same answers and errors (google.rpc details byte for byte), the browser's
token, and quotas per browser address. Driven by connectrpc's own Python client."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import signal
import socket
import struct
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import structlog
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from copas.admin.v1 import admin_connect, admin_pb2
from copas.v1 import (
    accounts_connect,
    accounts_pb2,
    cards_pb2,
    championships_connect,
    championships_pb2,
    championships_pb2_grpc,
    copas_connect,
    copas_pb2,
)
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from server.errors import ERROR_DOMAIN
from server.rpc import web
from tests.helpers.calls import auth
from tests.helpers.servers import ServerProcess, free_port, run_server, serving
from tests.helpers.web import post_json, sample

ROOT = Path(__file__).resolve().parent.parent
SERVICE = copas_pb2.DESCRIPTOR.services_by_name["CopasService"]
ACCOUNT_SERVICE = accounts_pb2.DESCRIPTOR.services_by_name["AccountService"]
CHAMPIONSHIP_SERVICE = championships_pb2.DESCRIPTOR.services_by_name["ChampionshipService"]
ADMIN_SERVICE = admin_pb2.DESCRIPTOR.services_by_name["AdminService"]
OPERATOR = "operator-token-of-the-web-bridge-test"


@contextlib.asynccontextmanager
async def web_server(**options: Any) -> AsyncIterator[tuple[Any, Any, Any]]:
    """A server with its web port on loopback, a gRPC stub and a Connect client of the page's."""
    port = free_port()
    async with (serving(web_port=port, web_host="127.0.0.1", **options) as (running, stub),
                copas_connect.CopasServiceClient(f"http://127.0.0.1:{port}") as client):
        yield running, stub, client


def refused_details(error: ConnectError) -> dict[str, bytes]:
    return {d.type_name: d.message_bytes for d in error.details}


@pytest.mark.parametrize(("service", "protocol", "relay"), [
    (SERVICE, copas_connect.CopasService, web.Relay),
    (ACCOUNT_SERVICE, accounts_connect.AccountService, web.AccountRelay),
    (CHAMPIONSHIP_SERVICE, championships_connect.ChampionshipService, web.ChampionshipRelay)])
def test_every_rpc_of_the_contract_is_relayed(service: Any, protocol: Any, relay: Any) -> None:
    """Each relay implements every method of its generated protocol itself (none is left to
    the protocol's UNIMPLEMENTED default)."""
    assert service.methods
    for rpc in service.methods:
        name = web.method_attribute(rpc.name)
        assert hasattr(protocol, name), rpc.name  # as the plugin names it
        assert getattr(relay, name) is not getattr(protocol, name), f"{rpc.name} is not relayed"


def test_the_web_port_relays_the_operators_championship_calls_and_no_other() -> None:
    """AdminRelay implements exactly ``web.ADMIN_METHODS`` (each a method of AdminService);
    tables, accounts, drain and the server's status are left to the protocol's
    UNIMPLEMENTED, and WebApp does not even route them."""
    assert web.ADMIN_METHODS.issubset(m.name for m in ADMIN_SERVICE.methods)
    for rpc in ADMIN_SERVICE.methods:
        name = web.method_attribute(rpc.name)
        relayed = getattr(web.AdminRelay, name) is not getattr(admin_connect.AdminService, name)
        assert relayed == (rpc.name in web.ADMIN_METHODS), rpc.name


def error_reason(error: ConnectError) -> str:
    return error_details_pb2.ErrorInfo.FromString(
        refused_details(error)["google.rpc.ErrorInfo"]).reason


async def test_the_operators_championship_calls_and_the_export_through_the_web_port(
        tmp_path: Path) -> None:
    """With --web-admin the page's organizer tools reach AdminService's championship calls:
    the operator's token goes along and the gRPC service judges it (none: UNAUTHENTICATED
    ADMIN_CREDENTIAL_REQUIRED; a wrong one: ADMIN_DENIED; a refusal comes back with its
    reason), each audited and counted; any other admin call is not served there (even with
    the token). Without --web-admin none is. ExportChampionship through the port is the gRPC
    service's file, CSV and JSON."""
    token_file = tmp_path / "admin-token"
    token_file.write_text(OPERATOR + "\n")
    settings = championships_pb2.ChampionshipSettings(
        display_name="Relay Cup", rounds=2, rules=copas_pb2.RulesOverrides(max_hands=1))
    operator = {"authorization": f"Bearer {OPERATOR}"}
    async with (web_server(admin_token_file=str(token_file), web_admin=True)
                as (running, _, _),
                admin_connect.AdminServiceClient(
                    f"http://127.0.0.1:{running.page.port}") as admin,
                championships_connect.ChampionshipServiceClient(
                    f"http://127.0.0.1:{running.page.port}") as champs):
        create = admin_pb2.CreateChampionshipRequest(settings=settings, reason="a test")
        for headers, code, reason in (
                ({}, Code.UNAUTHENTICATED, "ADMIN_CREDENTIAL_REQUIRED"),
                ({"authorization": "Bearer not-the-token-at-all"}, Code.PERMISSION_DENIED,
                 "ADMIN_DENIED")):
            with pytest.raises(ConnectError) as caught:
                await admin.create_championship(create, headers=headers)
            assert (caught.value.code, error_reason(caught.value)) == (code, reason)
        made = (await admin.create_championship(create, headers=operator)).championship
        assert made.settings.display_name == "Relay Cup"
        with pytest.raises(ConnectError) as caught:  # registering: nothing to pause
            await admin.pause_championship(admin_pb2.PauseChampionshipRequest(
                championship_id=made.championship_id, is_paused=True, reason="a test"),
                headers=operator)
        assert error_reason(caught.value) == "CHAMPIONSHIP_NOT_RUNNING"
        assert sample(running, "copas_admin_actions_total", method="CreateChampionship",
                      outcome="ok") == 1
        with pytest.raises(ConnectError) as caught:  # not on the web port, token or not
            await admin.server_status(admin_pb2.ServerStatusRequest(), headers=operator)
        assert caught.value.code is Code.UNIMPLEMENTED
        assert sample(running, "copas_admin_actions_total", method="ServerStatus",
                      outcome="ok") == 0
        # The audit line names the browser's address (the relay passes it on), never the token.
        cancel = {"championshipId": made.championship_id, "reason": "from a browser"}
        with structlog.testing.capture_logs() as logs:
            for source, headers in (("127.0.0.7", {"authorization": "Bearer wrong-token-here"}),
                                    ("127.0.0.8", operator)):
                await asyncio.to_thread(post_json, running.page.port, "CancelChampionship",
                                        cancel, source, headers, "copas.admin.v1.AdminService")
        audit = [(line["peer"], line["outcome"]) for line in logs
                 if line.get("event") == "admin_call"]
        assert audit == [("127.0.0.7", "ADMIN_DENIED"), ("127.0.0.8", "ok")]
        assert OPERATOR not in str(logs)

        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            direct = championships_pb2_grpc.ChampionshipServiceStub(channel)
            for export_format in (championships_pb2.EXPORT_FORMAT_CSV,
                                  championships_pb2.EXPORT_FORMAT_JSON):
                request = championships_pb2.ExportChampionshipRequest(
                    championship_id=made.championship_id, format=export_format)
                assert await champs.export_championship(request) \
                    == await direct.ExportChampionship(request)
        exported = await champs.export_championship(championships_pb2.ExportChampionshipRequest(
            championship_id=made.championship_id, format=championships_pb2.EXPORT_FORMAT_JSON))
        assert json.loads(exported.content)["name"] == "Relay Cup"
        assert (exported.media_type, exported.file_name) == (
            "application/json", f"{made.championship_id}-standings.json")

    async with (web_server(admin_token_file=str(token_file)) as (running, _, _),
                admin_connect.AdminServiceClient(
                    f"http://127.0.0.1:{running.page.port}") as admin):
        with pytest.raises(ConnectError) as caught:
            await admin.create_championship(create, headers=operator)
        assert caught.value.code is Code.UNIMPLEMENTED


async def test_a_guest_signs_in_through_the_web_port_and_its_seat_is_its_own() -> None:
    """AccountService on the web port: a guest's sign-in, its profile by the access token, a
    JoinTable with that token seats the account under its own name, a refusal comes back
    with its reason, and a refresh token works once."""
    async with web_server() as (running, stub, client):
        port = running.page.port
        async with accounts_connect.AccountServiceClient(f"http://127.0.0.1:{port}") as accounts:
            with pytest.raises(ConnectError) as caught:
                await accounts.sign_in_device(accounts_pb2.SignInDeviceRequest(device_secret="x"))
            info = error_details_pb2.ErrorInfo.FromString(
                refused_details(caught.value)["google.rpc.ErrorInfo"])
            assert info.reason == "WEAK_DEVICE_SECRET"
            session = (await accounts.sign_in_device(accounts_pb2.SignInDeviceRequest(
                device_secret="w3b-Device_secret-kept-in-localStorage-0123",
                display_name="Webby"))).session
            assert session.is_new_account and session.account.display_name == "Webby"
            bearer = {"authorization": f"Bearer {session.access_token}"}
            profile = await accounts.get_profile(accounts_pb2.GetProfileRequest(),
                                                 headers=bearer)
            assert profile.account.account_id == session.account.account_id
            table = (await client.create_table(copas_pb2.CreateTableRequest(bot_seats=3))).table
            joined = await client.join_table(copas_pb2.JoinTableRequest(
                table_id=table.table_id), headers=bearer)
            seated = (await stub.GetTable(copas_pb2.GetTableRequest(
                table_id=table.table_id))).table.seats[joined.seat]
            assert seated.display_name == "Webby"
            renewed = (await accounts.refresh_session(accounts_pb2.RefreshSessionRequest(
                refresh_token=session.refresh_token))).session
            assert renewed.access_token != session.access_token
            again = (await accounts.refresh_session(accounts_pb2.RefreshSessionRequest(
                refresh_token=session.refresh_token))).session  # a second tab, at once
            assert again.access_token == renewed.access_token
            newest = (await accounts.refresh_session(accounts_pb2.RefreshSessionRequest(
                refresh_token=renewed.refresh_token))).session
            with pytest.raises(ConnectError) as caught:
                await accounts.refresh_session(accounts_pb2.RefreshSessionRequest(
                    refresh_token=session.refresh_token))
            assert caught.value.code is Code.UNAUTHENTICATED
            info = error_details_pb2.ErrorInfo.FromString(
                refused_details(caught.value)["google.rpc.ErrorInfo"])
            assert info.reason == "SESSION_REVOKED"  # a reused refresh token ends the session
            with pytest.raises(ConnectError) as caught:
                await accounts.get_profile(accounts_pb2.GetProfileRequest(), headers={
                    "authorization": f"Bearer {newest.access_token}"})
            assert caught.value.code is Code.UNAUTHENTICATED


async def test_a_player_through_the_web_port_gets_the_grpc_answers_and_errors() -> None:
    async with web_server() as (running, stub, client):
        table = (await client.create_table(copas_pb2.CreateTableRequest(
            bot_seats=3, display_name="web"))).table
        joined = await client.join_table(copas_pb2.JoinTableRequest(
            table_id=table.table_id, display_name="Ana"))
        headers = {"authorization": f"Bearer {joined.player_token}"}
        stream = client.watch_table(copas_pb2.WatchTableRequest(table_id=table.table_id),
                                    headers=headers)
        async with contextlib.aclosing(stream):
            first = await anext(stream)
            view = first.event.view
            assert first.event.WhichOneof("kind") == "snapshot" and view.seat == joined.seat
            assert len(view.hand) == 13  # the token went along: this is the player's view
            request = copas_pb2.PlayCardRequest(table_id=table.table_id,  # while passing
                                                card=cards_pb2.Card(text="2C"))
            with pytest.raises(ConnectError) as caught:
                await client.play_card(request, headers=headers)
            with pytest.raises(grpc.aio.AioRpcError) as direct:
                await stub.PlayCard(request, metadata=auth(joined.player_token))
        error = caught.value
        assert error.code is Code.FAILED_PRECONDITION
        assert error.message == direct.value.details()
        status = rpc_status.from_call(direct.value)  # type: ignore[arg-type]
        assert status is not None
        assert refused_details(error) == {
            d.type_url.removeprefix("type.googleapis.com/"): d.value for d in status.details}
        info = error_details_pb2.ErrorInfo.FromString(
            refused_details(error)["google.rpc.ErrorInfo"])
        assert (info.reason, info.domain) == ("WRONG_PHASE", ERROR_DOMAIN)
        # The browser went away: its relayed stream is gone too.
        live = running.registry.get(table.table_id)
        for _ in range(500):
            if not len(live.fanout):
                break
            await asyncio.sleep(0.01)
        assert not len(live.fanout)

        with pytest.raises(ConnectError) as caught:
            await client.play_card(request)
        assert caught.value.code is Code.UNAUTHENTICATED
        with pytest.raises(ConnectError) as caught:
            await client.get_table(copas_pb2.GetTableRequest(table_id="t_nothing"))
        assert caught.value.code is Code.NOT_FOUND
        assert "google.rpc.ErrorInfo" in refused_details(caught.value)


async def test_quotas_count_each_browser_address_and_say_when_to_retry() -> None:
    async with web_server(peer_calls_per_second=1, peer_calls_burst=3,
                          quota_penalty=0.01) as (running, stub, _):
        port = running.page.port
        statuses = [await asyncio.to_thread(post_json, port, "ListTables", {}, "127.0.0.2")
                    for _ in range(4)]
        assert [s for s, _ in statuses] == [200, 200, 200, 429]
        error = statuses[-1][1]
        assert error["code"] == "resource_exhausted"
        types = {d["type"] for d in error["details"]}
        assert types == {"google.rpc.ErrorInfo", "google.rpc.QuotaFailure",
                         "google.rpc.RetryInfo"}
        # Another browser through the same relay, and a gRPC client on this machine, are still
        # served: the quota counted the first browser's address, not the relay's.
        assert (await asyncio.to_thread(post_json, port, "ListTables", {}, "127.0.0.3"))[0] == 200
        await stub.ListTables(copas_pb2.ListTablesRequest())


async def test_browsers_behind_a_trusted_proxy_each_have_their_own_quota() -> None:
    """A proxy at 127.0.0.9 (--trusted-proxies) names each browser in x-forwarded-for: each
    has its own table quota, and a refusal names that browser's address. A client that is not
    behind a trusted proxy cannot pick its address by sending the header itself."""
    async with web_server(trusted_proxies="127.0.0.9", tables_per_minute=1, tables_burst=2,
                          quota_penalty=0.01) as (running, _, _):
        port = running.page.port

        def create(source: str, forwarded_for: str) -> tuple[int, dict[str, Any]]:
            return post_json(port, "CreateTable", {}, source,
                             {"x-forwarded-for": forwarded_for})

        first = [await asyncio.to_thread(create, "127.0.0.9", "198.51.100.1") for _ in range(3)]
        assert [status for status, _ in first] == [200, 200, 429]
        assert "too many tables created from 198.51.100.1 " in first[-1][1]["message"]
        # The other browser behind the same proxy still has its whole quota.
        second = [await asyncio.to_thread(create, "127.0.0.9", "198.51.100.2") for _ in range(3)]
        assert [status for status, _ in second] == [200, 200, 429]
        assert "from 198.51.100.2 " in second[-1][1]["message"]
        # Garbage from the proxy is nobody's address: the call counts against the proxy itself.
        status, _ = await asyncio.to_thread(create, "127.0.0.9", "unknown, , [::1, 999.1.1.1")
        assert status == 200
        # A browser that writes x-forwarded-for itself is still counted by its own address.
        spoofed = [await asyncio.to_thread(create, "127.0.0.2", f"203.0.113.{i}")
                   for i in range(3)]
        assert [status for status, _ in spoofed] == [200, 200, 429]
        assert "from 127.0.0.2 " in spoofed[-1][1]["message"]


async def test_the_page_is_served_with_a_strict_policy() -> None:
    async with web_server() as (running, _, _client):
        port = running.page.port

        def get(method: str, path: str) -> tuple[int, dict[str, str], bytes]:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                connection.request(method, path)
                answer = connection.getresponse()
                return answer.status, dict(answer.getheaders()), answer.read()
            finally:
                connection.close()

        status, headers, body = await asyncio.to_thread(get, "GET", "/")
        assert status == 200 and headers["content-type"].startswith("text/html")
        assert b'src="/app.js"' in body
        assert "script-src 'self'" in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"
        status, headers, _ = await asyncio.to_thread(get, "GET", "/app.js")
        assert status == 200 and headers["content-type"].startswith("text/javascript")
        assert (await asyncio.to_thread(get, "GET", "/etc/passwd"))[0] == 404
        assert (await asyncio.to_thread(get, "DELETE", "/"))[0] == 405


async def test_the_page_is_installable_with_a_manifest_and_its_icons() -> None:
    """The web app manifest and every icon it names are served with their types, and the
    page's policy lets the browser read the manifest (issue 40: a phone's home screen)."""
    async with web_server() as (running, _, _client):
        port = running.page.port

        def get(path: str) -> tuple[int, dict[str, str], bytes]:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                connection.request("GET", path)
                answer = connection.getresponse()
                return answer.status, dict(answer.getheaders()), answer.read()
            finally:
                connection.close()

        status, headers, body = await asyncio.to_thread(get, "/")
        assert b'rel="manifest" href="/manifest.webmanifest"' in body
        assert "manifest-src 'self'" in headers["content-security-policy"]
        status, headers, body = await asyncio.to_thread(get, "/manifest.webmanifest")
        assert status == 200 and headers["content-type"] == "application/manifest+json"
        manifest = json.loads(body)
        assert manifest["start_url"] == "/" and manifest["display"] == "standalone"
        sizes = set()
        for icon in manifest["icons"]:
            status, headers, body = await asyncio.to_thread(get, icon["src"])
            assert status == 200 and headers["content-type"] == icon["type"], icon
            if icon["type"] == "image/png":  # the size it claims
                assert body[:8] == b"\x89PNG\r\n\x1a\n"
                width, height = struct.unpack(">II", body[16:24])
                assert f"{width}x{height}" == icon["sizes"]
                sizes.add(width)
        assert {192, 512} <= sizes


async def test_a_taken_web_port_fails_at_start() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        began = time.perf_counter()
        with pytest.raises(OSError, match=f"cannot serve the web page on 127.0.0.1:{port}"):
            async with serving(web_port=port, web_host="127.0.0.1"):
                pass
        print(f"refused to start in {time.perf_counter() - began:.2f} s")  # a figure only


async def test_the_server_process_serves_the_page_and_stops_its_streams_on_sigterm(
        tmp_path: Path) -> None:
    web_port = free_port()
    env = {"COPAS_WEB_PORT": str(web_port), "COPAS_WEB_HOST": "127.0.0.1"}  # from the env
    server = await asyncio.to_thread(ServerProcess, "--grace", "2", "--data-dir",
                                     str(tmp_path / "data"), env=env)
    try:
        assert "listening on" in server.first_line
        assert f"web page on http://127.0.0.1:{web_port}/" in await asyncio.to_thread(
            server.next_line)
        second = await asyncio.to_thread(run_server, "--data-dir", str(tmp_path / "second"),
                                         env=env, timeout=30)
        assert second.returncode == 1
        assert f"cannot serve the web page on 127.0.0.1:{web_port}" in second.stderr
        assert not (tmp_path / "second").exists()  # refused before touching its data
        async with copas_connect.CopasServiceClient(f"http://127.0.0.1:{web_port}") as client:
            table = (await client.create_table(copas_pb2.CreateTableRequest())).table
            stream = client.watch_table(copas_pb2.WatchTableRequest(table_id=table.table_id))
            async with contextlib.aclosing(stream):
                assert (await anext(stream)).event.WhichOneof("kind") == "snapshot"
                server.proc.send_signal(signal.SIGTERM)
                with pytest.raises((StopAsyncIteration, ConnectError)):
                    await asyncio.wait_for(anext(stream), 10)  # closed, not left hanging
        assert await asyncio.to_thread(server.proc.wait, 15) == 0
    finally:
        server.kill9()
