"""Who a client is, for the quotas: its own address, unless a relay the server trusts says
whom it forwards for (`x-forwarded-for`): the web bridge (a loopback peer presenting the
bridge's key) or a proxy named by --trusted-proxies."""

from __future__ import annotations

from typing import Any

import pytest

from server.metadata import FORWARDED_FOR, FORWARDING_KEY
from server.rpc.peers import PeerTrust, trusted_networks

KEY = "k" * 43
PROXIES = trusted_networks("10.0.0.0/8, 2001:db8:ffff::1")


class Call:
    """A call's peer and metadata, as a servicer context has them."""

    def __init__(self, peer: str, *pairs: tuple[str, str]) -> None:
        self._peer = peer
        self.pairs = pairs

    def peer(self) -> str:
        return f"ipv6:[{self._peer}]:5000" if ":" in self._peer else f"ipv4:{self._peer}:5000"

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.pairs


def relayed(peer: str, address: str, key: str = KEY) -> Call:
    return Call(peer, (FORWARDED_FOR, address), (FORWARDING_KEY, key), ("authorization", "x"))


@pytest.mark.parametrize(("call", "key", "expected"), [
    (relayed("127.0.0.1", "203.0.113.9"), KEY, "203.0.113.9"),
    (relayed("::1", "2001:db8:0:0::1"), KEY, "2001:db8::/64"),  # an IPv6 client by its /64
    (relayed("127.0.0.1", "203.0.113.9"), None, "127.0.0.1"),  # no bridge configured
    (relayed("127.0.0.1", "203.0.113.9", "wrong"), KEY, "127.0.0.1"),
    (Call("127.0.0.1", (FORWARDED_FOR, "203.0.113.9")), KEY, "127.0.0.1"),  # no key
    (relayed("198.51.100.7", "203.0.113.9"), KEY, "198.51.100.7"),  # not loopback
    (relayed("127.0.0.1", "not an address"), KEY, "127.0.0.1"),
    (Call("198.51.100.7"), None, "198.51.100.7"),
    (Call("2001:db8:1:2::7"), None, "2001:db8:1:2::/64"),
])
def test_only_the_bridge_on_loopback_may_name_the_clients_address(
        call: Any, key: str | None, expected: str) -> None:
    assert PeerTrust(key).client_of(call.peer(), call.invocation_metadata()) == expected


@pytest.mark.parametrize(("call", "expected"), [
    # A trusted proxy's word counts; the nearest untrusted hop is the client (what a client
    # wrote itself further left is ignored).
    (Call("10.1.2.3", (FORWARDED_FOR, "198.51.100.7")), "198.51.100.7"),
    (Call("10.1.2.3", (FORWARDED_FOR, "6.6.6.6, 198.51.100.7, 10.9.9.9")), "198.51.100.7"),
    (Call("2001:db8:ffff::1", (FORWARDED_FOR, "203.0.113.9")), "203.0.113.9"),
    # An untrusted peer's header is ignored.
    (Call("198.51.100.7", (FORWARDED_FOR, "203.0.113.9")), "198.51.100.7"),
    # A trusted proxy without the header counts as itself.
    (Call("10.1.2.3"), "10.1.2.3"),
])
def test_trusted_proxies_name_the_client(call: Any, expected: str) -> None:
    assert PeerTrust(None, PROXIES).client_of(call.peer(), call.invocation_metadata()) == \
        expected
