"""The package as a user installs it: an sdist built from a copy of the checkout and a wheel
built from that sdist (what ``python -m build`` does, without the mypyc compile:
COPAS_PURE_ENGINE=1), installed with its dependencies from the registry into a fresh virtual
environment, and a server started from that environment's ``copas-server`` in a directory
away from the checkout: it serves gRPC, the page (package data) and accounts. And the wheel
holds every module and package of the tree (setuptools finds them; a list by hand once left
server/accounts/ and server/championships/ out) and nothing else (no tests/, bench/,
clients/ts/, data/)."""

from __future__ import annotations

import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import zipfile
from pathlib import Path
from typing import IO, Any

import grpc
import pytest
from copas.v1 import accounts_pb2, accounts_pb2_grpc, copas_pb2, copas_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.helpers.servers import ROOT, free_port

ROOTS = ("engine", "ai", "server", "clients", "tools")  # the packages beside copas
PAGE = ("index.html", "style.css", "app.js")  # server/web/, package data
# Not copied for the build: version control, environments, caches, what builds leave (a stale
# egg-info's SOURCES.txt would feed the sdist), compiled extensions, a server's data.
ANYWHERE = {".git", ".venv", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache",
            ".hypothesis"}
AT_THE_TOP = {"build", "dist", "data"}


def _not_copied(directory: str, names: list[str]) -> set[str]:
    top = Path(directory) == ROOT
    return {name for name in names
            if name in ANYWHERE or name == "node_modules" or name.endswith((".egg-info", ".so"))
            or (top and name in AT_THE_TOP)}


def _run(command: list[str], timeout: float, **options: Any) -> str:
    """Run ``command`` to its end (within ``timeout``): its output, or a failure naming it."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                          **options)
    assert done.returncode == 0, f"{' '.join(command)}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    return str(done.stdout)


def _fresh_environment() -> dict[str, str]:
    """The tests' environment without anything that would point Python at the checkout
    (PYTHONPATH, a virtual environment) or at the user's site-packages; the session mark
    (conftest.py) stays, so a leftover is found."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("PYTHON") and key != "VIRTUAL_ENV"}
    return {**env, "PYTHONNOUSERSITE": "1", "PYTHONSAFEPATH": "1", "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from the sdist of a copy of the checkout (the generated protobuf code
    included; clients/ts/node_modules linked in, as a build from the checkout sees it)."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    started = time.monotonic()
    shutil.copytree(ROOT, source, ignore=_not_copied)
    if (ROOT / "clients/ts/node_modules").is_dir():
        (source / "clients/ts/node_modules").symlink_to(ROOT / "clients/ts/node_modules")
    env = {**os.environ, "COPAS_PURE_ENGINE": "1"}  # setup.py: no mypyc compile
    _run([sys.executable, "-c", "import sys; from setuptools import build_meta; "
          "build_meta.build_sdist(sys.argv[1])", str(base / "sdist")],
         timeout=120, cwd=source, env=env)
    (sdist,) = (base / "sdist").glob("copas-*.tar.gz")
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
          "--no-deps", "--no-build-isolation", "--wheel-dir", str(base / "dist"), str(sdist)],
         timeout=180, cwd=base, env=env)
    (built,) = (base / "dist").glob("copas-*.whl")
    print(f"sdist and wheel built in {time.monotonic() - started:.1f} s")
    return built


def _tree() -> tuple[set[str], set[str]]:
    """The files the wheel must hold, as installed: every module under ROOTS and protos/copas,
    and the page (all of server/web/); and the packages among their directories."""
    modules: set[str] = set()
    for root, base in [*((ROOT / name, ROOT) for name in ROOTS),
                       (ROOT / "protos/copas", ROOT / "protos")]:
        for directory, subdirectories, names in os.walk(root):
            subdirectories[:] = [name for name in subdirectories
                                 if name not in ANYWHERE and name != "node_modules"]
            where = Path(directory).relative_to(base).as_posix()
            modules |= {f"{where}/{name}" for name in names if name.endswith(".py")}
    packages = {name.rpartition("/")[0] for name in modules if name.endswith("/__init__.py")}
    page = {f"server/web/{path.name}" for path in (ROOT / "server/web").iterdir()
            if path.is_file()}
    return modules | page, packages


def test_the_wheel_holds_every_package_module_and_page_file_and_nothing_else(
        wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        files = {name for name in archive.namelist() if not name.endswith("/")}
    required, packages = _tree()
    shipped = {name.rpartition("/")[0] for name in files if name.endswith("/__init__.py")}
    missing_packages = sorted(p.replace("/", ".") for p in packages - shipped)
    assert not missing_packages, f"packages missing from the wheel: {missing_packages}"
    missing = sorted(required - files)
    assert not missing, ("missing from the wheel (a directory of modules without an "
                         f"__init__.py is no package, or page files): {missing}")
    # Beyond them only the wheel's metadata and the generated code's type stubs.
    others = sorted(name for name in files - required
                    if not name.startswith("copas-") and not (name.startswith("copas/")
                                                              and name.endswith(".pyi")))
    assert not others, f"in the wheel but no part of the package: {others}"


class Lines:
    """A process's output lines as they come (read by a thread), each awaited with a deadline."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line)
        self.lines.put(None)  # the end: the process closed its output

    def wait_for(self, text: str, deadline: float) -> str:
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {text!r} in time; so far: {''.join(self.seen)}") \
                    from None
            if line is None:
                raise AssertionError(f"the output ended before {text!r}: {''.join(self.seen)}")
            self.seen.append(line)
            if text in line:
                return line


async def test_the_wheel_installs_in_a_fresh_environment_and_its_server_serves(
        wheel: Path, tmp_path: Path) -> None:
    env = _fresh_environment()
    venv, place = tmp_path / "venv", tmp_path / "elsewhere"
    place.mkdir()
    assert not place.is_relative_to(ROOT)
    started = time.monotonic()
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=60, env=env)
    python = venv / "bin" / "python"
    # This environment's pip installs into the new one (no pip of its own to set up there);
    # the dependencies come from the registry (or pip's cache), as for a user.
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
          "--disable-pip-version-check", "--no-compile", str(wheel)],
         timeout=240, cwd=place, env=env)
    installed = time.monotonic()

    # Every module of the wheel imports there, from there (not from the checkout): a module
    # that needs a package only the test extras bring fails here.
    found = _run([str(python), "-c", IMPORT_EVERY_MODULE, str(venv)], timeout=120, cwd=place,
                 env=env)
    assert "server.accounts" in found.split() and "server.championships" in found.split()
    _run([str(python), "-c", "import server.championships, server.accounts"], timeout=60,
         cwd=place, env=env)
    imported = time.monotonic()

    port, web_port = free_port(), free_port()
    log_path = place / "server.log"
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [str(venv / "bin" / "copas-server"), "--listen", f"127.0.0.1:{port}",
             "--web-port", str(web_port), "--web-host", "127.0.0.1", "--metrics-port", "0",
             "--data-dir", str(place / "data")],
            cwd=place, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        assert server.stdout is not None
        output = Lines(server.stdout)
        deadline = time.monotonic() + 60
        try:
            output.wait_for("listening on", deadline)
            output.wait_for(f"web page on http://127.0.0.1:{web_port}/", deadline)
        except AssertionError as failure:
            raise AssertionError(f"{failure}\n{log_path.read_text()}") from None
        serving = time.monotonic()
        print(f"venv and install {installed - started:.1f} s, every module imported "
              f"{imported - installed:.1f} s, the server serving {serving - imported:.1f} s")

        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            assert (await health.Check(health_pb2.HealthCheckRequest(), timeout=30)).status \
                == health_pb2.HealthCheckResponse.SERVING
            game = copas_pb2_grpc.CopasServiceStub(channel)
            table = (await game.CreateTable(copas_pb2.CreateTableRequest(), timeout=30)).table
            assert table.table_id
            accounts = accounts_pb2_grpc.AccountServiceStub(channel)  # server.accounts
            session = (await accounts.SignInDevice(accounts_pb2.SignInDeviceRequest(
                device_secret=secrets.token_urlsafe(24), display_name="Wheel"),
                timeout=30)).session
            assert session.access_token and session.is_new_account
        # The installed `copas` backs the running server's data up (server.store.backup).
        backup = _run([str(venv / "bin" / "copas"), "admin", "backup", "--data-dir",
                       str(place / "data"), str(place / "backup")], timeout=120, cwd=place,
                      env=env)
        assert "backed up" in backup and (place / "backup" / "copas-backup.json").is_file()

        for path, name in (("/", "index.html"), ("/style.css", "style.css"),
                           ("/app.js", "app.js")):  # the page, from the wheel's package data
            with urllib.request.urlopen(f"http://127.0.0.1:{web_port}{path}",
                                        timeout=30) as answer:
                assert answer.status == 200
                body = answer.read()
                if name == "index.html":  # the server writes its quick-match wait in (20 s)
                    body = body.replace(b'bots-after" content="20"', b'bots-after" content="0"')
                assert body == (ROOT / "server/web" / name).read_bytes(), name

        server.send_signal(signal.SIGTERM)
        assert server.wait(30) == 0, log_path.read_text()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(10)


# Imports every module of the packages installed in the environment (argv[1]) and prints its
# name; a module found outside that environment fails.
IMPORT_EVERY_MODULE = """
import importlib, pkgutil, sys
venv = sys.argv[1]
for root in ("engine", "ai", "server", "clients", "tools", "copas"):
    package = importlib.import_module(root)
    modules = [root, *(info.name for info in pkgutil.walk_packages(package.__path__, root + "."))]
    for name in modules:
        module = importlib.import_module(name)
        assert module.__file__ and module.__file__.startswith(venv), (name, module.__file__)
        print(name)
"""
