"""The tests' fixtures: a throw-away PostgreSQL, a server on loopback and a stub for it;
and, with ``COPAS_PURE_ENGINE=1``, the engine's pure-Python source instead of its compiled
modules. What tests share besides fixtures is in ``tests.helpers``."""

from __future__ import annotations

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

if os.environ.get("COPAS_PURE_ENGINE") == "1":  # run the tests on the pure-Python modules
    sys.meta_path.insert(0, PureSourceFinder())

from engine import Rules  # noqa: E402


@pytest.fixture(scope="session")
def postgres() -> Any:
    """A throw-away PostgreSQL server (Debian's initdb/pg_ctl) for the session's tests; a
    test that needs one fails when the postgresql package is missing (.ci/run installs it)."""
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
