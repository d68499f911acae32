"""Who a call comes from: its client's address (the key of the per-client quotas) and the
hash of its bearer token.

A relay is believed about whom it forwards for (``x-forwarded-for``) only when it proves it
may be: the server's own web bridge (a loopback peer presenting the process's forwarding
key), a proxy named by ``--trusted-proxies``, or another node of the cluster (presenting the
cluster key, on the internal port: the public port's ``PeerTrust`` has no cluster keys, so
there a client's cluster key, hop mark and ``x-forwarded-for`` change nothing). Anyone else's
``x-forwarded-for`` is ignored, so no client can pick an address.

A chain of relays is read as nginx's ``real_ip_recursive`` reads it: from the right (the hop
the believed relay itself saw) leftwards past every trusted proxy, to the nearest hop that is
not one. Entries left of it were written by the client, or by proxies nobody vouches for.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from server import tokens
from server.errors import ServiceError
from server.metadata import CLUSTER_KEY, FORWARDED_FOR, FORWARDING_KEY, HOPS

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


def _texts(metadata: Metadata, name: str) -> str:
    """Every value of a repeated key, in order, as one comma-separated list."""
    return ",".join(value for key, value in metadata if key == name and isinstance(value, str))


MAX_HOPS = 16  # x-forwarded-for entries read from the right (and carried by the web bridge)
_MAX_HOP_CHARS = 64  # the longest entry read: an IPv6 address with a zone and a port fits


def hop_address(entry: str) -> str | None:
    """One x-forwarded-for entry as an address: '198.51.100.1', '198.51.100.1:443',
    '2001:db8::1' or '[2001:db8::1]:443' (the port dropped); None for anything else
    ('unknown', a name, garbage)."""
    entry = entry.strip()
    if len(entry) > _MAX_HOP_CHARS:
        return None
    text, port = entry, ""
    if entry.startswith("["):  # [IPv6] or [IPv6]:port
        text, closed, rest = entry[1:].partition("]")
        if not closed:
            return None
        if rest:
            if not rest.startswith(":"):
                return None
            port = rest[1:]
    elif entry.count(":") == 1:  # IPv4:port
        text, port = entry.split(":")
    if port and not (port.isdigit() and len(port) <= 5):
        return None
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def forwarded_chain(received: Iterable[str], peer: str) -> str:
    """The x-forwarded-for a relay passes on: the chain it received (its last ``MAX_HOPS``
    - 1 entries, each at most 64 characters, anything longer made invalid) with the address
    it saw the request come from appended."""
    hops = [h.strip() for value in received for h in value.split(",") if h.strip()]
    kept = [h if len(h) <= _MAX_HOP_CHARS else "invalid" for h in hops[-(MAX_HOPS - 1):]]
    return ", ".join([*kept, peer])


def _same_secret(presented: str | None, secret: str) -> bool:
    return presented is not None and hmac.compare_digest(presented.encode(), secret.encode())


class KeyRing(Protocol):
    """The cluster keys a node accepts (``server.cluster.keys``: they rotate)."""

    def accepts(self, presented: str | None) -> bool: ...


PEERS_CACHED = 65_536  # peers, and chains, whose client is remembered (then forgotten at once)
_CHAIN_CACHED_CHARS = 256


@dataclass(frozen=True)
class PeerTrust:
    """Whose word about the client a call's metadata is taken for."""

    forwarding_key: str | None = None  # the web bridge's (None: no bridge)
    proxies: Networks = ()  # --trusted-proxies
    cluster_keys: KeyRing | None = None  # the internal port's (None: public, or one process)
    _direct: dict[str, tuple[str, bool]] = field(default_factory=dict, compare=False)
    _chains: dict[str, str] = field(default_factory=dict, compare=False)

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

    def is_relayed(self, metadata: Metadata) -> bool:
        """Another node relayed the call: the hop mark counts only beside the cluster key (a
        client's own ``x-copas-hops`` changes nothing)."""
        return self.cluster_keys is not None and _text(metadata, HOPS) is not None \
            and self.cluster_keys.accepts(_text(metadata, CLUSTER_KEY))

    def client_of(self, peer: str, metadata: Metadata) -> str:
        """The quota key of the client a call comes from (see the module's docstring)."""
        own, is_relay = self._own(peer)
        if self.cluster_keys is not None and self.cluster_keys.accepts(
                _text(metadata, CLUSTER_KEY)):
            return (_text(metadata, FORWARDED_FOR) or "").strip() or own
        if not is_relay:
            return own
        address = raw_address(peer)
        is_bridge = self.forwarding_key is not None and _is_loopback(address)
        if is_bridge and not _is_in(address, self.proxies) \
                and not _same_secret(_text(metadata, FORWARDING_KEY), self.forwarding_key or ""):
            return client_key(address)
        chain = _texts(metadata, FORWARDED_FOR)
        walked = self._chains.get(chain)
        if walked is None:  # cached (short chains only): a client's calls repeat its chain
            walked = self._walk(chain)
            if len(chain) <= _CHAIN_CACHED_CHARS:
                if len(self._chains) >= PEERS_CACHED:
                    self._chains.clear()
                self._chains[chain] = walked
        return walked or own

    def _walk(self, chain: str) -> str:
        """The client an x-forwarded-for chain names ("": the relay itself). From the right:
        each hop is the address a believed relay saw, and it is a relay to believe in turn
        only when it is a trusted proxy. The first that is not is the client; when every hop
        is trusted, the farthest; after garbage, the last hop believed."""
        nearest = ""
        for entry in reversed(chain.split(",")[-MAX_HOPS:]):
            hop = hop_address(entry)
            if hop is None:
                return nearest
            nearest = client_key(hop)
            if not _is_in(hop, self.proxies):
                return nearest
        return nearest


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


ACCESS_TOKEN_PREFIX = "ca_"  # an account's access token (server.accounts.credentials)


def bears_access_token(metadata: Metadata) -> bool:
    """Whether the call's bearer token is an account's access token (not a player token)."""
    for key, value in metadata:
        if key == "authorization":
            text = value.decode(errors="replace") if isinstance(value, bytes) else value
            return text.partition(" ")[2].strip().startswith(ACCESS_TOKEN_PREFIX)
    return False
