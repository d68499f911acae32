"""Copas bots: policies that play Hearts from what one seat may know.

Pure Python over the engine and the standard library (``ai -> engine -> stdlib``); the
playout core is compiled with mypyc at install, like the engine's hot module.

- ``InfoSet`` (``info_from_game``, ``InfoTracker``): what one seat may know, and nothing more.
- ``decide(info, policy, seed, budget)``: the policy's action for that seat (an engine
  ``Action``); policies ``random``, ``greedy``, ``duck`` and ``mc`` (the strong one).
- ``BotPool``: decisions in worker processes, awaited from an asyncio loop.

Inside, each module imports only the ones below it (``infoset``, ``playout`` <- ``policies``
<- ``pool``), never the package itself; this file re-exports them
(tests/test_no_import_cycles.py).
"""

from ai.infoset import InfoSet, InfoTracker, info_from_game
from ai.policies import POLICIES, Budget, decide
from ai.pool import BotPool

__all__ = ["POLICIES", "BotPool", "Budget", "InfoSet", "InfoTracker", "decide",
           "info_from_game"]
