"""Every test file has exactly one tier (tests/conftest.py's TIERS, applied as a marker), so
a new file cannot slip out of `make check` or into it unnoticed; the markers are the ones
pyproject.toml registers; and a unit file starts nothing (no server, process or database)."""

from __future__ import annotations

import re
import tomllib

from tests.conftest import TIERS
from tests.helpers.servers import ROOT

TESTS = ROOT / "tests"


def test_every_test_file_has_a_tier_and_every_tier_a_file() -> None:
    files = {path.name for path in TESTS.glob("test_*.py")}
    assert sorted(files - TIERS.keys()) == [], "add these to TIERS in tests/conftest.py"
    assert sorted(TIERS.keys() - files) == [], "TIERS names files that are gone"


def test_the_tiers_are_registered_markers() -> None:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    registered = {m.split(":")[0] for m in options["ini_options"]["markers"]}
    assert set(TIERS.values()) | {"perf", "sqlite_only"} <= registered


def test_unit_files_start_no_server_process_or_database() -> None:
    starts = re.compile(r"\b(serving|ServerProcess|run_server|clients_server|subprocess|"
                        r"(?<!\.)postgres(?!\.)|chromium|grpc\.aio\.insecure_channel)\b")
    for name, tier in TIERS.items():
        if tier == "unit" and name != "test_tiers.py":
            found = starts.findall((TESTS / name).read_text())
            assert not found, (name, sorted(set(found)))
