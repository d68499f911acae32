"""The engine's bots as policies of the reference clients, a module per game that has them
(``<game>.py``), each exporting ``register()``: found by listing this package, never by name.
``clients/`` never imports the engine, so ``copas`` (``tools/cli.py``) registers them from
here; a game without engine bots for the clients has no module here."""

from __future__ import annotations

import pkgutil
from importlib import import_module


def register() -> None:
    """Register every game's engine bots with ``clients.bots`` (``--policy NAME``)."""
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            import_module(f"{__name__}.{module.name}").register()
