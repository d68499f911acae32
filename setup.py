"""Compiles the engine's hot module (and the bots' playouts) with mypyc at install.

Everything else lives in pyproject.toml. The compiled modules are the same source as the
pure-Python ones (which stay importable: tests run the rules against both, see
tests/test_pure_engine.py). ``COPAS_PURE_ENGINE=1`` at install skips the compilation; a
machine without a C compiler falls back to pure Python (the extensions are optional).
"""

from __future__ import annotations

import os

from setuptools import setup

COMPILED = ["engine/game.py", "ai/playout.py"]


def ext_modules() -> list[object]:
    if os.environ.get("COPAS_PURE_ENGINE") == "1":
        return []
    from mypyc.build import mypycify

    # One extension per module (each beside its source), calling each other natively.
    extensions = mypycify(COMPILED, opt_level="3", separate=True)
    for extension in extensions:
        extension.optional = True  # no compiler: install the pure-Python engine
    return list(extensions)


setup(ext_modules=ext_modules())
