"""The game seam (docs/DESIGN.md, "Games: the seam"): outside the games' own folders no module
names a game or imports a game's engine, bots or module, and a game's folder names no other
game. A game's folders are its server module ``server/games/<game>/``, its terminal clients'
``clients/games/<game>.py``, its engine bots for those clients ``tools/games/<game>.py``, and
its engine and bots in ``engine/`` and ``ai/`` (Hearts's at their top, ``engine/bisca/`` and
``ai/bisca/``; not scanned, nor the page ``clients/ts/``, which the issue allows). The generic
machine reaches a game only through a registry: ``server.games.get``, ``clients.games.get``,
``tools.games.register``, the two last finding their games by listing their package.

``server/games/names.py`` is the server's registry: its list of games by name, the one place a
game's name is a value (it may hold those names and nothing else of a game). It stays a list
rather than a listing of ``server/games/``'s packages because its order is the contract's: the
first game is the one a request, a table or a record that names none plays (``Rules.game``
empty), and the order is the one every refusal lists the accepted games in; a listing would
sort them by name and still have to name the default one."""

from __future__ import annotations

import ast
import re
from pathlib import Path, PurePosixPath

import pytest

from clients import games as client_games
from server import games
from server.games.names import GAMES

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("server", "tools", "clients")  # engine/ and ai/ are the games' own packages
ENGINES = ("engine", "ai")
HOMES = ("server/games", "clients/games", "tools/games")  # a game's folder in each: <game>
REGISTRY = "server/games/names.py"
# The contract's Suit enum (cards.proto) names a suit of every pack, Bisca's too: a suit is no
# game. Only this name of it is let through, not a game's rule about the suit (hearts_broken).
SUIT_NAMES = frozenset({"SUIT_HEARTS"})


def _words(names: tuple[str, ...] | list[str]) -> re.Pattern[str]:
    return re.compile("|".join(names), re.IGNORECASE)


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}


def _reaches(name: str, modules: tuple[str, ...]) -> bool:
    return any(name == m or name.startswith(m + ".") for m in modules)


def home_of(where: str) -> str | None:
    """The game whose folder ``where`` (a path from the root) is in, if any."""
    parts = PurePosixPath(where).parts
    for home in HOMES:
        if parts[:2] == PurePosixPath(home).parts and len(parts) > 2:
            name = PurePosixPath(parts[2]).stem
            if name in GAMES:
                return name
    return None


def findings_in(source: str, where: str) -> list[str]:
    """Where the module at ``where`` names a game or imports one (anywhere: in a function,
    under TYPE_CHECKING, in a docstring): any game outside the games' folders; in a game's
    folder, another game's modules or names (only a server's game module may say another
    game's name in its words: a Hearts option at a Bisca table is refused with a reason that
    says so, as issue 41 asks)."""
    home = home_of(where)
    says_others = home is not None and where.startswith("server/")
    others = [name for name in GAMES if name != home]
    game_word = _words(others)
    game_modules = tuple(f"{package}.{name}" for name in others
                         for package in ("server.games", "clients.games", "tools.games",
                                         *ENGINES))
    tree = ast.parse(source, where)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        at = f"{where}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [f"{at} imports {a.name}" for a in node.names
                      if (home is None and a.name.split(".")[0] in ENGINES)
                      or _reaches(a.name, game_modules)]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            if (home is None and node.module.split(".")[0] in ENGINES) \
                    or any(_reaches(n, game_modules) for n in names):
                found.append(f"{at} imports from {node.module}")
        elif isinstance(node, ast.Name) and game_word.search(node.id) \
                and node.id not in SUIT_NAMES:
            found.append(f"{at} names {node.id}")
        elif isinstance(node, ast.Attribute) and game_word.search(node.attr) \
                and node.attr not in SUIT_NAMES:
            found.append(f"{at} reads .{node.attr}")
        elif isinstance(node, ast.keyword) and node.arg and game_word.search(node.arg):
            found.append(f"{at} passes {node.arg}=")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and game_word.search(node.name):
            found.append(f"{at} defines {node.name}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and not says_others \
                and (match := game_word.search(node.value)) \
                and not (where == REGISTRY and node.value in GAMES):
            found.append(f"{at} {'documents' if id(node) in docs else 'says'} "
                         f"{match.group()!r}")
    return found


def findings(path: Path) -> list[str]:
    return findings_in(path.read_text(), path.relative_to(ROOT).as_posix())


def scanned() -> list[Path]:
    return [path for package in SCANNED for path in sorted((ROOT / package).rglob("*.py"))
            if not path.is_relative_to(ROOT / "clients" / "ts")]


def test_no_module_names_a_game_outside_its_folders_nor_another_game_in_them() -> None:
    wrong = [line for path in scanned() for line in findings(path)]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(("where", "is_found"), [
    ("clients/render.py", True), ("clients/games/__init__.py", True), ("tools/cli.py", True),
    ("clients/games/bisca.py", True), ("server/games/bisca/views.py", True),
    ("clients/games/hearts.py", False), ("tools/games/hearts.py", False),
    ("server/games/hearts/views.py", False)])
def test_a_hearts_rule_is_found_everywhere_but_in_a_folder_of_hearts(where: str,
                                                                      is_found: bool) -> None:
    for source in ("line = view.hearts_broken\n", "rules = Rules(queen_breaks_hearts=True)\n",
                   "from clients.games.hearts import x\n", "import server.games.hearts.views\n",
                   "def is_hearts() -> bool: ...\n"):
        assert bool(findings_in(source, where)) is is_found, (where, source)
    words = '"""Shoot the moon at Hearts."""\n'  # a server's game module's words may say it
    assert bool(findings_in(words, where)) is (is_found and not where.startswith("server/g"))


def test_a_bisca_name_is_found_in_a_folder_of_hearts_and_in_generic_code() -> None:
    for where in ("clients/games/hearts.py", "tools/games/hearts.py", "clients/play.py",
                  "server/games/hearts/play.py"):
        assert findings_in("size = view.bisca.stock_size\n", where), where
        assert findings_in("from engine.bisca import Game\n", where), where
        if not where.startswith("server/"):
            assert findings_in('PRESETS = {"bisca3": 2}\n', where), where
    assert not findings_in("from engine.bisca import Game\n", "server/games/bisca/play.py")


def test_the_suit_is_no_game_but_only_by_its_name_in_the_contract() -> None:
    """A suit symbol table (``clients/common.py``) is generic; a Hearts rule about the suit
    is not, nor another name that merely holds the word."""
    assert not findings_in("SYMBOL = {cards_pb2.SUIT_HEARTS: '♥'}\n", "clients/common.py")
    assert findings_in("HEARTS = cards_pb2.SUIT_HEARTS\n", "clients/common.py")
    assert findings_in("n = view.hearts_broken\n", "clients/common.py")


def test_the_registry_may_hold_the_games_names_and_nothing_else_of_a_game() -> None:
    assert not findings_in('GAMES = ("hearts", "bisca")\n', REGISTRY)
    assert findings_in('DEFAULT = "hearts-first"\n', REGISTRY)
    assert findings_in('GAMES = ("hearts", "bisca")\n', "server/games/__init__.py")


def test_the_table_machine_and_the_clients_are_scanned() -> None:
    """The generic machine itself (the tables, the edge, the cluster, the store's SQL, the
    configuration; the clients and the tools outside their games' folders) is scanned and no
    game's folder."""
    paths = {p.relative_to(ROOT).as_posix() for p in scanned()}
    generic = ("server/tables/", "server/rpc/service.py", "server/rpc/play.py",
               "server/rpc/gateway.py", "server/cluster/", "server/store/sqlite.py",
               "server/store/postgres.py", "server/config.py", "server/errors.py",
               "server/main.py", "server/games/__init__.py", "server/games/base.py",
               "clients/render.py", "clients/play.py", "clients/bots.py", "clients/cli.py",
               "clients/common.py", "clients/games/__init__.py", "tools/cli.py",
               "tools/games/__init__.py")
    for prefix in generic:
        assert any(p.startswith(prefix) for p in paths), prefix
        assert home_of(prefix) is None, prefix


def test_a_module_reaches_a_game_through_the_registry() -> None:
    assert games.get().name == games.DEFAULT_GAME == GAMES[0]
    assert all(games.get(name).name == name for name in GAMES)
    with pytest.raises(KeyError):
        games.get("poker")
    assert games.bot_policies()[0] == "auto"


def test_the_clients_find_the_servers_games_in_their_folder() -> None:
    """``clients/games/`` holds a module per game the server plays, found by listing it, with
    the server's default game as its own (the contract's: ``Rules.game`` empty)."""
    assert set(client_games.names()) == set(GAMES)
    assert client_games.default().name == client_games.names()[0] == games.DEFAULT_GAME
    assert all(client_games.get(name).name == name for name in GAMES)
    assert client_games.get("").name == games.DEFAULT_GAME
    with pytest.raises(KeyError):
        client_games.get("poker")
