"""The gateway believes a relay's x-forwarded-for only from a loopback peer with the key."""

from __future__ import annotations

from typing import Any

import pytest

from server.gateway import FORWARDED_FOR, FORWARDING_KEY, forwarded_peer

KEY = "k" * 43


class Metadata:
    """Just what ``forwarded_peer`` reads of a servicer context."""

    def __init__(self, *pairs: tuple[str, str]) -> None:
        self.pairs = pairs

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.pairs


def relayed(address: str, key: str = KEY) -> Any:
    return Metadata((FORWARDED_FOR, address), (FORWARDING_KEY, key), ("authorization", "x"))


@pytest.mark.parametrize(("peer", "context", "key", "expected"), [
    ("127.0.0.1", relayed("203.0.113.9"), KEY, "203.0.113.9"),
    ("::1", relayed("2001:db8:0:0::1"), KEY, "2001:db8::1"),  # normalised
    ("127.0.0.1", relayed("203.0.113.9"), None, "127.0.0.1"),  # no relay configured
    ("127.0.0.1", relayed("203.0.113.9", "wrong"), KEY, "127.0.0.1"),
    ("127.0.0.1", Metadata((FORWARDED_FOR, "203.0.113.9")), KEY, "127.0.0.1"),  # no key
    ("198.51.100.7", relayed("203.0.113.9"), KEY, "198.51.100.7"),  # not loopback
    ("127.0.0.1", relayed("203.0.113.9, 10.0.0.1"), KEY, "127.0.0.1"),  # one address only
    ("127.0.0.1", relayed("not an address"), KEY, "127.0.0.1"),
])
def test_only_the_bridge_on_loopback_may_name_the_clients_address(
        peer: str, context: Any, key: str | None, expected: str) -> None:
    assert forwarded_peer(context, peer, key) == expected
