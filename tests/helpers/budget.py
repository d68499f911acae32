"""How much random testing a run does: a small budget by default (`make check`, `make test`),
a thorough one with ``HYPOTHESIS_PROFILE=thorough`` (hypothesis's examples and the suite's own
random loops alike). The small budget still reaches every kind of case each test draws; the
thorough one is for a change to the engine, the table machine or the request handling."""

from __future__ import annotations

import os

PROFILE_VARIABLE = "HYPOTHESIS_PROFILE"
THOROUGH = os.environ.get(PROFILE_VARIABLE) == "thorough"


def budget(small: int, thorough: int) -> int:
    """How many random cases a test runs: ``small``, or ``thorough`` in the thorough profile."""
    return thorough if THOROUGH else small


def load_hypothesis_profile() -> None:
    """The default profile: few examples, no deadline (a loaded machine is not a failure of
    the code); ``thorough``: many more. A test's own ``settings`` take their counts from
    ``budget``."""
    from hypothesis import HealthCheck, settings

    settings.register_profile("default", max_examples=25, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("thorough", max_examples=300, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("thorough" if THOROUGH else "default")
