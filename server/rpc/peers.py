"""Who a call comes from: its client's address (the key of the per-client quotas) and the
hash of its bearer token.

A relay is believed about whom it forwards for (``x-forwarded-for``) only when it proves it
may be: the server's own web bridge (a loopback peer presenting the process's forwarding
key), a proxy named by ``--trusted-proxies``, or another node of the cluster (presenting the
cluster key). Anyone else's ``x-forwarded-for`` is ignored, so no client can pick an address.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field

from server import tokens
from server.errors import ServiceError
from server.metadata import CLUSTER_KEY, FORWARDED_FOR, FORWARDING_KEY

Networks = tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
Metadata = Iterable[tuple[str, str | bytes]]


def raw_address(peer: str) -> str:
    """'ipv4:1.2.3.4:5678' -> '1.2.3.4'; 'ipv6:[2001:db8::1]:5678' -> '2001:db8::1'."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6" and rest.startswith("["):
        return rest[1:rest.find("]")].split("%", 1)[0]
    if kind == "ipv4":
        return rest.rsplit(":", 1)[0]
    return peer or "unknown"


def client_key(address: str) -> str:
    """Who a client is for the quotas: its IPv4 address, or its IPv6 /64 network (one host
    may hold all of its addresses); loopback and IPv4-mapped addresses as IPv4."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        if not ip.is_loopback:
            return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def peer_address(peer: str) -> str:
    """The quota key of a gRPC peer string (see ``client_key``)."""
    return client_key(raw_address(peer))


def trusted_networks(text: str) -> Networks:
    """``--trusted-proxies``: comma-separated addresses or networks (CIDR).

    :raises ValueError: a part is neither.
    """
    return tuple(ipaddress.ip_network(part.strip(), strict=False)
                 for part in text.split(",") if part.strip())


def _is_in(address: str, networks: Networks) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _text(metadata: Metadata, name: str) -> str | None:
    for key, value in metadata:
        if key == name and isinstance(value, str):
            return value
    return None


def _same_secret(presented: str | None, secret: str) -> bool:
    return presented is not None and hmac.compare_digest(presented.encode(), secret.encode())


PEERS_CACHED = 65_536


@dataclass(frozen=True)
class PeerTrust:
    """Whose word about the client a call's metadata is taken for."""

    forwarding_key: str | None = None  # the web bridge's (None: no bridge)
    proxies: Networks = ()  # --trusted-proxies
    cluster_key: str = ""  # the cluster's ("" outside a cluster)
    _direct: dict[str, tuple[str, bool]] = field(default_factory=dict, compare=False)

    def _own(self, peer: str) -> tuple[str, bool]:
        """A peer's own quota key, and whether it is a relay to listen to (cached: a
        client's calls share its connection, and so its peer string)."""
        known = self._direct.get(peer)
        if known is None:
            address = raw_address(peer)
            is_relay = (self.forwarding_key is not None and _is_loopback(address)) \
                or _is_in(address, self.proxies)
            known = (client_key(address), is_relay)
            if len(self._direct) >= PEERS_CACHED:
                self._direct.clear()
            self._direct[peer] = known
        return known

    def client_of(self, peer: str, metadata: Metadata) -> str:
        """The quota key of the client a call comes from (see the module's docstring)."""
        own, is_relay = self._own(peer)
        if self.cluster_key and _same_secret(_text(metadata, CLUSTER_KEY), self.cluster_key):
            return (_text(metadata, FORWARDED_FOR) or "").strip() or own
        if not is_relay:
            return own
        address = raw_address(peer)
        is_bridge = self.forwarding_key is not None and _is_loopback(address)
        if is_bridge and not _is_in(address, self.proxies) \
                and not _same_secret(_text(metadata, FORWARDING_KEY), self.forwarding_key or ""):
            return client_key(address)
        # The nearest address that is not itself a trusted proxy (later entries were added by
        # nearer proxies; earlier ones a client could write itself).
        chain = _text(metadata, FORWARDED_FOR) or ""
        for hop in reversed([h.strip() for h in chain.split(",")]):
            try:
                ipaddress.ip_address(hop)
            except ValueError:
                return client_key(address)
            if not _is_in(hop, self.proxies):
                return client_key(hop)
        return client_key(address)


def bearer_token_hash(metadata: Metadata) -> str | None:
    """The hash of the call's ``authorization: Bearer <token>``, None without one.

    :raises ServiceError: UNAUTHENTICATED for a malformed header.
    """
    for key, value in metadata:
        if key == "authorization":
            text = value.decode(errors="replace") if isinstance(value, bytes) else value
            scheme, _, token = text.partition(" ")
            token = token.strip()
            if scheme.lower() != "bearer" or not token or len(token) > 256:
                raise ServiceError.unauthenticated(
                    "authorization metadata must be 'Bearer <token>'")
            return tokens.hash_token(token)
    return None
