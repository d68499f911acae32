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
