"""The tests' fixtures: a throw-away PostgreSQL, a server on loopback and a stub for it;
and, with ``COPAS_PURE_ENGINE=1``, the engine's pure-Python source instead of its compiled
modules. Every test file has a tier (``TIERS``, applied as a marker: ``pytest -m unit`` is
`make check`'s); a file without one fails the collection. Hypothesis and the suite's own
random loops run a small budget unless ``HYPOTHESIS_PROFILE=thorough`` (see ``budget``).
What tests share besides fixtures is in ``tests.helpers``."""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMPILED_PACKAGES = ("engine", "ai")


class PureSourceFinder(importlib.abc.MetaPathFinder):
    """Imports the project's mypyc-compiled modules from their .py source instead."""

    def find_spec(self, fullname: str, path: Any, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".")[0] not in COMPILED_PACKAGES or "." not in fullname:
            return None
        source = ROOT.joinpath(*fullname.split(".")).with_suffix(".py")
        if not source.is_file():
            return None
        return importlib.util.spec_from_file_location(fullname, source)


# Servers the tests start as processes serve no web page unless a test asks (--web-port):
# none of them may take the default port 8080 from a running `make run`, or from another.
os.environ["COPAS_WEB_PORT"] = "0"
# Their bots play at once too (the tests of the bots' pace set --bot-pace or the table's).
os.environ["COPAS_BOT_PACE"] = "0"

if os.environ.get("COPAS_PURE_ENGINE") == "1":  # run the tests on the pure-Python modules
    sys.meta_path.insert(0, PureSourceFinder())

from engine import Rules  # noqa: E402

# ---------------------------------------------------------------- tiers

# unit: no server, no process, no network, no browser, no PostgreSQL; seconds in all.
# integration: servers in the test's own event loop (loopback gRPC, the web port).
# process: servers, bots or tools started as processes of their own (a terminal, Node, Prometheus).
# cluster: nodes or stores on a real PostgreSQL.  browser: a real Chromium.
# perf: a test (marked one by one) whose subject is a cost; its figures are printed.
UNIT, INTEGRATION, PROCESS = "unit", "integration", "process"
CLUSTER, BROWSER = "cluster", "browser"
TIERS = {
    "test_ai.py": UNIT, "test_cards.py": UNIT, "test_clients_offline.py": UNIT,
    "test_deal_and_passing.py": UNIT, "test_forwarded_peer.py": UNIT, "test_imports.py": UNIT,
    "test_no_import_cycles.py": UNIT, "test_openspiel_differential.py": UNIT,
    "test_game_seam.py": UNIT, "test_rating_kinds.py": CLUSTER, "test_demo.py": UNIT,
    "test_bisca_server.py": INTEGRATION, "test_bisca_cluster.py": CLUSTER,
    "test_attack_wave.py": INTEGRATION,
    "test_properties.py": UNIT, "test_pure_engine.py": UNIT, "test_rules.py": UNIT,
    "test_scoring.py": UNIT, "test_table_machine.py": UNIT, "test_tiers.py": UNIT,
    "test_tricks.py": UNIT, "test_bounded.py": UNIT, "test_web_codec.py": UNIT,
    "test_championship.py": UNIT, "test_delivery.py": UNIT, "test_seats.py": UNIT,
    "test_championship_tables.py": UNIT, "test_championship_director.py": INTEGRATION,
    "test_championship_operators.py": INTEGRATION,
    "test_timers.py": UNIT, "test_away_seats.py": UNIT, "test_wakeup.py": UNIT,
    "test_quick_match_bots.py": UNIT,
    "test_cluster_units.py": INTEGRATION,
    "test_lifecycle.py": PROCESS, "test_web_hostile.py": PROCESS,
    "test_accounts.py": UNIT, "test_account_store.py": CLUSTER,
    "test_leaderboard_board.py": CLUSTER,
    "test_accounts_server.py": INTEGRATION, "test_admin_accounts.py": INTEGRATION,
    "test_rated_games.py": INTEGRATION, "test_rated_farms.py": INTEGRATION,
    "test_account_games_kill9.py": PROCESS, "test_backup.py": PROCESS,
    "test_accounts_cluster.py": CLUSTER, "test_sign_in_protection.py": INTEGRATION,
    "test_view_bytes.py": UNIT, "test_views_and_records.py": UNIT,
    "test_admin.py": INTEGRATION, "test_contract.py": INTEGRATION,
    "test_fuzz_requests.py": INTEGRATION, "test_play_stream.py": INTEGRATION,
    "test_readme.py": INTEGRATION, "test_round_trip.py": INTEGRATION,
    "test_server_api.py": INTEGRATION, "test_server_game.py": INTEGRATION,
    "test_server_play.py": INTEGRATION, "test_quick_match_seats.py": INTEGRATION,
    "test_fail_stop.py": INTEGRATION, "test_page_tokens.py": INTEGRATION,
    "test_names.py": INTEGRATION,
    "test_rematch.py": INTEGRATION,
    "test_spectators.py": INTEGRATION, "test_stream_limits_and_leavers.py": INTEGRATION,
    "test_address_limits_and_floods.py": PROCESS, "test_metrics_under_load.py": PROCESS,
    "test_bot_clients.py": PROCESS,
    "test_clients.py": PROCESS, "test_durability.py": PROCESS,
    "test_hostile_clients_and_faults.py": PROCESS, "test_ops.py": PROCESS,
    "test_server_bots.py": PROCESS, "test_server_process.py": PROCESS,
    "test_ts_client.py": PROCESS, "test_web_bridge.py": PROCESS,
    "test_web_connections.py": PROCESS, "test_wheel.py": PROCESS,
    "test_cluster.py": CLUSTER, "test_cluster_admin.py": CLUSTER,
    "test_cluster_as_one_server.py": CLUSTER, "test_cluster_owner.py": CLUSTER,
    "test_cluster_failover.py": CLUSTER,
    "test_store_contract.py": CLUSTER, "test_championship_store.py": CLUSTER,
    "test_migrations.py": CLUSTER, "test_backup_postgres.py": CLUSTER,
    "test_mixed_versions.py": CLUSTER,
    "test_championships.py": INTEGRATION, "test_championship_privacy.py": INTEGRATION,
    "test_championship_bounds.py": INTEGRATION,
    "test_championship_kill9.py": PROCESS,
    "test_championship_cluster.py": CLUSTER, "test_championship_cli.py": PROCESS,
    "test_championship_acceptance.py": CLUSTER,
    "test_web_championships.py": BROWSER, "test_web_quick_match.py": BROWSER,
    "test_web_page.py": BROWSER, "test_web_rematch.py": BROWSER,
    "test_reactions.py": INTEGRATION, "test_web_reactions.py": BROWSER,
    "test_presence.py": INTEGRATION,
    "test_bisca_engine.py": UNIT, "test_bisca_bots.py": UNIT,
    "test_web_languages.py": BROWSER, "test_web_account.py": BROWSER,
    "test_web_one_screen.py": BROWSER, "test_web_replay.py": BROWSER,
    "test_web_attention.py": BROWSER, "test_bisca_clients.py": PROCESS,
    "test_web_bisca.py": BROWSER, "test_bisca_championship.py": INTEGRATION,
    "test_web_bisca_championship.py": BROWSER,
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    untiered = sorted({item.path.name for item in items if item.path.name not in TIERS})
    if untiered:
        raise pytest.UsageError(f"no tier for {', '.join(untiered)}: add it to TIERS in "
                                "tests/conftest.py")
    for item in items:
        item.add_marker(TIERS[item.path.name])


# ---------------------------------------------------------------- budgets

from tests.helpers.budget import load_hypothesis_profile  # noqa: E402

load_hypothesis_profile()


# ---------------------------------------------------------------- nothing left running

def pytest_configure(config: pytest.Config) -> None:
    # A SIGTERM of pytest ends it as Ctrl-C does: the fixtures' teardowns run (the throw-away
    # PostgreSQL is stopped) and pytest_unconfigure below ends what is left.
    import signal

    signal.signal(signal.SIGTERM, signal.default_int_handler)


def _descendants(root: int) -> list[int]:
    """This process's children, their children and so on (from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


# Every process this one starts inherits this mark (a process of its own, and its children,
# also after its parent died and it went to init); each xdist worker has its own.
SESSION_MARK = "COPAS_TEST_SESSION"
os.environ[SESSION_MARK] = f"{os.getpid()}-{os.urandom(6).hex()}"


def pytest_unconfigure(config: pytest.Config) -> None:
    """A server, bot worker, PostgreSQL or tool a test started and did not stop (a test that
    failed half-way, an interrupted run) is killed at the end of the session: this process's
    descendants and every process that carries its mark."""
    import signal

    from tools.testrun import holders

    mark = f"{SESSION_MARK}={os.environ[SESSION_MARK]}"
    for pid in {*_descendants(os.getpid()), *holders(mark)}:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def postgres() -> Any:
    """A throw-away PostgreSQL server (Debian's initdb/pg_ctl) for the session's tests; a
    test that needs one fails when the postgresql package is missing (make test installs it)."""
    import shutil
    import tempfile

    from tools.pglocal import LocalPostgres, free_port

    base = Path(tempfile.mkdtemp(prefix="copas-pg-"))
    base.chmod(0o755)  # the postgres user (when run as root) reaches its directory
    server = LocalPostgres(base / "pg", free_port())
    server.create()
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def online() -> Rules:
    return Rules.preset("online")


# ---------------------------------------------------------------- gRPC server fixtures

@pytest.fixture
async def server(tmp_path: Any) -> Any:
    """A real server on loopback (in this event loop), seeds allowed, metrics on a free port."""
    from server.main import shutdown, start
    from tests.helpers.servers import config_for_tests, free_port

    running = await start(config_for_tests(metrics_port=free_port(), metrics_host="127.0.0.1",
                                      allow_seed=True, finished_table_ttl=30.0,
                                      data_dir=str(tmp_path / "data")))
    yield running
    await shutdown(running, 0)


@pytest.fixture
async def stub(server: Any) -> Any:
    import grpc
    from copas.v1 import copas_pb2_grpc

    channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
    yield copas_pb2_grpc.CopasServiceStub(channel)
    await channel.close()


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """An OIDC issuer's signing key and its JWKS file (tests.helpers.accounts.Keys)."""
    from tests.helpers.accounts import Keys

    return Keys(tmp_path_factory.mktemp("oidc"))
