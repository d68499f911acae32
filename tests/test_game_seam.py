"""The game seam (docs/DESIGN.md, "Games: the seam"): outside the games' own folders
(``server/games/<game>/``, the engines ``engine/`` and ``engine/bisca/``, the bots ``ai/``) no
module names a game or imports a game's engine, bots or module; the generic machine reaches a
game only through the registry (``server.games.get``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from server import games
from server.games.names import GAMES

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("server", "tools", "clients")  # engine/ and ai/ are the games' own packages
GAME_WORD = re.compile(r"hearts|bisca", re.IGNORECASE)
ENGINES = ("engine", "ai")
GAME_MODULES = tuple(f"server.games.{name}" for name in GAMES)

# What still names a game outside its folder, and why. The list only shrinks: a module on it
# that no longer names a game fails the test until it is taken off.
ALLOWED = {
    "server/games/names.py": "the registry's list of games, by name",
    "tools/policies.py": "the engine's Hearts bots as the reference clients' policies: it "
                         "imports clients and copas, which neither ai/ nor server/ may",
    "clients/bots.py": "the terminal clients play Hearts's views (contract-only: no engine)",
    "clients/cli.py": "as bots.py",
    "clients/common.py": "as bots.py",
    "clients/render.py": "as bots.py",
    "clients/play.py": "as bots.py: `copas play --game` makes a table of a game, with the "
                       "seats its presets say (Bisca's)",
}


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}


def _reaches(name: str, modules: tuple[str, ...]) -> bool:
    return any(name == m or name.startswith(m + ".") for m in modules)


def findings(path: Path) -> list[str]:
    """Where ``path`` names a game or imports one (anywhere: in a function, under
    TYPE_CHECKING, in a docstring)."""
    tree = ast.parse(path.read_text(), str(path))
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [f"{where} imports {a.name}" for a in node.names
                      if a.name.split(".")[0] in ENGINES or _reaches(a.name, GAME_MODULES)]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            if node.module.split(".")[0] in ENGINES \
                    or any(_reaches(n, GAME_MODULES) for n in names):
                found.append(f"{where} imports from {node.module}")
        elif isinstance(node, ast.Name) and GAME_WORD.search(node.id):
            found.append(f"{where} names {node.id}")
        elif isinstance(node, ast.Attribute) and GAME_WORD.search(node.attr):
            found.append(f"{where} reads .{node.attr}")
        elif isinstance(node, ast.keyword) and node.arg and GAME_WORD.search(node.arg):
            found.append(f"{where} passes {node.arg}=")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and GAME_WORD.search(node.name):
            found.append(f"{where} defines {node.name}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and GAME_WORD.search(node.value):
            found.append(f"{where} {'documents' if id(node) in docs else 'says'} "
                         f"{GAME_WORD.search(node.value).group()!r}")  # type: ignore[union-attr]
    return found


def scanned() -> list[Path]:
    own = [ROOT / "server" / "games" / name for name in GAMES]
    return [path for package in SCANNED for path in sorted((ROOT / package).rglob("*.py"))
            if not any(path.is_relative_to(folder) for folder in own)]


def test_no_module_outside_the_games_folders_names_a_game_or_imports_its_engine() -> None:
    wrong = [line for path in scanned() if str(path.relative_to(ROOT)) not in ALLOWED
             for line in findings(path)]
    assert not wrong, "\n".join(wrong)


def test_the_allow_list_holds_only_modules_that_still_need_it() -> None:
    """Each allowed module exists and still names a game: take it off once it does not."""
    paths = {str(p.relative_to(ROOT)): p for p in scanned()}
    stale = [name for name in ALLOWED if name not in paths or not findings(paths[name])]
    assert not stale, f"no longer needed on the allow-list: {stale}"


def test_the_table_machine_is_on_the_clean_side() -> None:
    """The generic machine itself (the tables, the edge, the cluster, the store's SQL, the
    accounts' stores, the configuration) is never on the allow-list."""
    generic = ("server/tables/", "server/rpc/service.py", "server/rpc/play.py",
               "server/rpc/gateway.py", "server/cluster/", "server/store/sqlite.py",
               "server/store/postgres.py", "server/config.py", "server/errors.py",
               "server/main.py")
    assert not [name for name in ALLOWED if name.startswith(generic)]


def test_a_module_reaches_a_game_through_the_registry() -> None:
    assert games.get().name == games.DEFAULT_GAME == GAMES[0]
    assert all(games.get(name).name == name for name in GAMES)
    with pytest.raises(KeyError):
        games.get("poker")
    assert games.bot_policies()[0] == "auto"
