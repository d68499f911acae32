"""The dependency direction: clients -> protos <- server -> engine -> stdlib, and
ai -> engine -> stdlib."""

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def imported_roots(package: str) -> set[str]:
    roots = set()
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                roots |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                roots.add(node.module.split(".")[0])
    return roots


def test_engine_imports_only_the_standard_library_and_itself() -> None:
    roots = imported_roots("engine")
    outside = {r for r in roots if r != "engine" and r not in sys.stdlib_module_names}
    assert not outside, f"engine imports {outside}"
    assert not roots & {"asyncio", "time", "socket", "threading", "logging", "os"}


def test_ai_imports_only_the_engine_the_standard_library_and_itself() -> None:
    roots = imported_roots("ai")
    outside = {r for r in roots if r not in {"ai", "engine"} and r not in sys.stdlib_module_names}
    assert not outside, f"ai imports {outside}"
    assert not roots & {"server", "clients", "tools", "copas", "grpc"}


@pytest.mark.parametrize("package", ["clients"])
def test_clients_import_neither_engine_nor_server(package: str) -> None:
    assert not imported_roots(package) & {"engine", "server", "ai"}


def test_server_never_imports_clients() -> None:
    assert "clients" not in imported_roots("server")


# ---------------------------------------------------------------- the server's layers

LEAVES = {"server.config", "server.errors", "server.wire",
          "server.observability", "server.tokens", "server.metadata", "server.bounded"}


def server_imports(package: str) -> dict[str, set[str]]:
    """Each module of ``server/<package>`` (or of the leaves) -> every module it imports,
    wherever the import stands (top level, in a function, under TYPE_CHECKING), and every
    dotted name it reads (``grpc.aio.X`` reads ``grpc.aio``)."""
    found: dict[str, set[str]] = {}
    paths = ([ROOT / "server" / f"{name.split('.')[1]}.py" for name in LEAVES]
             if package == "leaves" else (ROOT / "server" / package).rglob("*.py"))
    for path in paths:
        names: set[str] = set()
        package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level:  # relative: from the file's own package upward
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    module = ".".join(p for p in (*base, module) if p)
                names.add(module)
                names |= {f"{module}.{alias.name}" for alias in node.names}
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                names.add(f"{node.value.id}.{node.attr}")
        found[str(path.relative_to(ROOT))] = names
    return found


def reaches(names: set[str], forbidden: tuple[str, ...]) -> set[str]:
    return {n for n in names if any(n == f or n.startswith(f + ".") for f in forbidden)}


@pytest.mark.parametrize(("package", "forbidden"), [
    ("tables", ("grpc.aio", "server.rpc", "server.cluster", "server.main")),
    ("store", ("grpc.aio", "server.tables", "server.rpc", "server.cluster", "server.main")),
    ("cluster", ("server.rpc", "server.main")),
    ("accounts", ("grpc.aio", "server.tables", "server.rpc", "server.cluster", "server.main")),
    ("championships", ("grpc.aio", "server.rpc", "server.cluster", "server.main")),
    ("rpc", ("server.main",)),
    ("leaves", ("grpc.aio", "server.tables", "server.rpc", "server.cluster", "server.store",
                "server.main")),
])
def test_the_server_imports_only_downward(package: str, forbidden: tuple[str, ...]) -> None:
    """main -> rpc -> cluster -> tables -> store -> engine, copas.v1; the leaves (config,
    errors, wire, observability, tokens) serve them all and import none of them; the
    championships, beside the accounts, use the tables, the store and the accounts."""
    wrong = {path: sorted(reaches(names, forbidden))
             for path, names in server_imports(package).items() if reaches(names, forbidden)}
    assert not wrong, wrong


def test_grpc_aio_is_spoken_only_at_the_edge_and_between_nodes() -> None:
    for package in ("tables", "store", "championships", "leaves"):
        for path, names in server_imports(package).items():
            assert not reaches(names, ("grpc.aio",)), path


# What tests may reach into, and why: a store's commit replaced to simulate a full disk
# (fault injection), and the engine's internals its rule tests rig a deal with or check.
TESTS_MAY_USE = {"_commit", "_begin_play", "_shuffle"}


def test_no_private_name_is_used_outside_its_module() -> None:
    """``x._name`` only on ``self``, ``cls`` or ``super()``, and no ``from m import _name``,
    in the project's code and its tests (namedtuples' own ``_asdict`` and ``_replace`` are
    their public API, as is ``os._exit``; tests may use ``TESTS_MAY_USE``, each for the
    reason given)."""
    public_underscored = {"_asdict", "_replace", "_fields", "_make", "_exit"}
    wrong = []
    for package in ("engine", "ai", "server", "clients", "tools", "tests"):
        allowed = public_underscored | (TESTS_MAY_USE if package == "tests" else set())
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                        and not node.attr.startswith("__") \
                        and node.attr not in allowed \
                        and not (isinstance(node.value, ast.Name)
                                 and node.value.id in ("self", "cls")) \
                        and not (isinstance(node.value, ast.Call)
                                 and isinstance(node.value.func, ast.Name)
                                 and node.value.func.id == "super"):
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}")
                elif isinstance(node, ast.ImportFrom) and any(
                        a.name.startswith("_") and not a.name.startswith("__")
                        for a in node.names):
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} import")
    assert not wrong, wrong


def test_every_method_of_the_service_has_a_route() -> None:
    """A call is routed (served here, or relayed to its table's owner) before any servicer
    code runs, from one table of every method: a new RPC without a route cannot start."""
    from server.cluster.routing import ROUTES, missing_routes

    assert missing_routes() == []
    assert set(ROUTES) == {m.name for m in
                           __import__("copas.v1.copas_pb2", fromlist=["x"]).DESCRIPTOR
                           .services_by_name["CopasService"].methods}


def test_every_method_of_the_admin_service_has_a_route() -> None:
    """The admin service's calls are routed by the same gateway, from a table of its own."""
    from server.cluster.routing import ADMIN_ROUTES, ADMIN_SERVICE, missing_routes

    assert missing_routes(ADMIN_SERVICE, ADMIN_ROUTES) == []
    assert set(ADMIN_ROUTES) == {m.name for m in
                                 __import__("copas.admin.v1.admin_pb2", fromlist=["x"])
                                 .DESCRIPTOR.services_by_name["AdminService"].methods}


def test_the_clusters_queries_read_the_store_and_nothing_above_it() -> None:
    """server/cluster/queries.py (the cluster's SQL, its protocol) may use the store's
    connections, never the tables, the edge or main: every cluster class depends on it, so
    it sits at the bottom of the cluster package (and the store never imports it back)."""
    names = server_imports("cluster")["server/cluster/queries.py"]
    assert not reaches(names, ("grpc", "server.tables", "server.rpc", "server.main")), names
    assert reaches(names, ("server.store",))
    for path, others in server_imports("cluster").items():  # the protocol, not PgStore
        if path != "server/cluster/queries.py":
            assert not reaches(others, ("server.store.postgres.PgStore",)) \
                or "server.cluster.queries.PgClusterQueries" in others, path
    for path, store_names in server_imports("store").items():
        assert not reaches(store_names, ("server.cluster.queries",)), path
