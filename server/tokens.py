"""Player tokens: bearer secrets made with ``secrets.token_urlsafe``, kept by the server only as
their SHA-256 (the one hash every part of the server uses)."""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import secrets


def new_token() -> str:
    return secrets.token_urlsafe(24)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def network_tag(table_id: str, address: str) -> str:
    """A client's network as one table keeps it for the rated rule: equal for two seats of
    the table from one network, and not the address ("" when not known). The network is the
    client's quota key (an IPv4 address, or an IPv6 /64) widened for IPv6 to its /48: one
    allocation holds thousands of /64s."""
    if not address:
        return ""
    try:
        network = ipaddress.ip_network(address, strict=False)
        if network.version == 6 and network.prefixlen > 48:
            address = str(network.supernet(new_prefix=48))
    except ValueError:
        pass  # not an address (a test's name): as it is
    return hashlib.sha256(f"net:{table_id}:{address}".encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=1 << 15)  # a championship's views name every player each time
def pseudonym(record_id: str, account_id: str) -> str:
    """The name a game record gives a signed-in seat's account: the same in that record, not
    linkable to the account or to another record without the account's private id."""
    return "p_" + hashlib.sha256(f"player:{record_id}:{account_id}".encode()).hexdigest()[:16]
