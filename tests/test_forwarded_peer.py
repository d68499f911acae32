"""Who a client is, for the quotas: its own address, unless a relay the server trusts says
whom it forwards for (`x-forwarded-for`): the web bridge (a loopback peer presenting the
bridge's key) or a proxy named by --trusted-proxies."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.metadata import FORWARDED_FOR, FORWARDING_KEY
from server.rpc.peers import (
    MAX_HOPS,
    PeerTrust,
    forwarded_chain,
    hop_address,
    trusted_networks,
)

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


BEHIND = trusted_networks("127.0.0.9, 10.0.0.0/8")  # a proxy in front of the web port


@pytest.mark.parametrize(("chain", "expected"), [
    # The bridge appends whom it saw: a trusted proxy's own chain is read past the proxy.
    ("198.51.100.1, 127.0.0.9", "198.51.100.1"),
    ("6.6.6.6, 198.51.100.1, 127.0.0.9", "198.51.100.1"),  # what the browser wrote: ignored
    ("198.51.100.1, 10.1.1.1, 127.0.0.9", "198.51.100.1"),  # two proxies in a row
    ("198.51.100.1:8080, 127.0.0.9", "198.51.100.1"),  # with a port
    ("[2001:db8::1]:443, 127.0.0.9", "2001:db8::/64"),
    # Every hop trusted: the farthest, never the bridge's own (shared) address.
    ("127.0.0.9", "127.0.0.9"),
    ("10.2.2.2, 127.0.0.9", "10.2.2.2"),
    # Garbage from a trusted proxy: the proxy is the last hop believed.
    ("unknown, 127.0.0.9", "127.0.0.9"),
    ("198.51.100.1 ; drop table, 127.0.0.9", "127.0.0.9"),
    # Not behind a trusted proxy: the browser's own x-forwarded-for cannot pick its address.
    ("198.51.100.1, 127.0.0.2", "127.0.0.2"),
    ("127.0.0.9, 127.0.0.2", "127.0.0.2"),
])
def test_the_bridge_chain_is_read_past_the_trusted_proxies(chain: str, expected: str) -> None:
    call = relayed("127.0.0.1", chain)
    assert PeerTrust(KEY, BEHIND).client_of(call.peer(), call.invocation_metadata()) == expected


def test_the_chain_the_bridge_passes_on_is_bounded() -> None:
    long = [f"10.0.{i // 256}.{i % 256}" for i in range(1000)]
    chain = forwarded_chain([", ".join(long), "x" * 10_000], "127.0.0.9")
    hops = chain.split(", ")
    assert len(hops) == MAX_HOPS and hops[-1] == "127.0.0.9"
    assert hops[-2] == "invalid"  # an entry too long to be an address is not cut into one
    assert forwarded_chain([], "127.0.0.2") == "127.0.0.2"
    assert forwarded_chain(["198.51.100.1", " 10.0.0.1 ,"], "127.0.0.9") == \
        "198.51.100.1, 10.0.0.1, 127.0.0.9"  # repeated headers, in order


def test_a_chain_of_trusted_hops_is_read_only_so_far() -> None:
    chain = ", ".join(["198.51.100.1", *(f"10.0.0.{i}" for i in range(1, 40))])
    call = Call("10.9.9.9", (FORWARDED_FOR, chain))
    assert PeerTrust(None, BEHIND).client_of(call.peer(), call.invocation_metadata()) == \
        f"10.0.0.{40 - MAX_HOPS}"  # the farthest of the last MAX_HOPS, all trusted


@pytest.mark.parametrize(("entry", "expected"), [
    ("198.51.100.1", "198.51.100.1"), (" 198.51.100.1:443 ", "198.51.100.1"),
    ("2001:DB8::1", "2001:db8::1"), ("[2001:db8::1]", "2001:db8::1"),
    ("[2001:db8::1]:443", "2001:db8::1"), ("unknown", None), ("", None),
    ("198.51.100.1:http", None), ("[2001:db8::1]x", None), ("[2001:db8::1", None),
    ("198.51.100.1:1:2", None), ("example.com", None), ("1" * 100, None),
])
def test_a_hop_is_an_address_or_nothing(entry: str, expected: str | None) -> None:
    assert hop_address(entry) == expected


@given(st.lists(st.text(max_size=200), max_size=5))
def test_any_received_chain_is_passed_on_bounded(received: list[str]) -> None:
    chain = forwarded_chain(received, "127.0.0.9")
    assert chain.endswith("127.0.0.9") and len(chain.split(",")) <= MAX_HOPS
    assert len(chain) <= MAX_HOPS * 66


@given(st.text(max_size=300), st.sampled_from(["127.0.0.1", "10.1.2.3", "198.51.100.7"]))
def test_any_chain_names_some_client_and_never_fails(chain: str, peer: str) -> None:
    call = Call(peer, (FORWARDED_FOR, chain), (FORWARDING_KEY, KEY))
    client = PeerTrust(KEY, BEHIND).client_of(call.peer(), call.invocation_metadata())
    assert client
    if peer == "198.51.100.7":  # not a relay: its own address, whatever it sends
        assert client == peer
