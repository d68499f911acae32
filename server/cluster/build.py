"""A cluster node's parts, built in order from its registry, its share of the database and its
lease: takeovers, the router, the cluster key, the relay to the other nodes, quick matches
across them, the admin service's view of them and every node's lobby; with their gauges."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass

import grpc
from prometheus_client.core import CounterMetricFamily, Metric

from server.cluster.admin import ClusterAdmin
from server.cluster.forwarding import Forwarder
from server.cluster.keys import GRACE_SECONDS, ClusterKeys
from server.cluster.lobby import ClusterLobby
from server.cluster.matching import ClusterMatch
from server.cluster.ownership import Lease, Takeovers
from server.cluster.queries import ClusterQueries
from server.cluster.routing import AdminRouter, Router
from server.config import Config
from server.observability import gauges
from server.tables.registry import TableRegistry


@dataclass
class ClusterNode:
    """What a node among others holds for them (each part given back by ``close`` or, for
    ``takeovers``, by its own ``stop``)."""

    queries: ClusterQueries
    lease: Lease
    takeovers: Takeovers  # the lease's renewals and the sweeps, once started
    router: Router  # where each call goes
    keys: ClusterKeys  # the key relayed calls carry (kept fresh by ``keys.keep_fresh``)
    relay: Forwarder  # calls and streams relayed to their table's owner
    match: ClusterMatch  # quick matches joining a table of any node
    admin: ClusterAdmin  # the admin service's channels to the other nodes (its forwarder)
    admin_router: AdminRouter  # where each admin call goes
    lobby: ClusterLobby  # every node's tables

    async def close(self) -> None:
        """The relays first (calls in flight end with TABLE_MOVED), then the admin's channels."""
        await self.relay.close()
        await self.admin.close()

    def gauges(self) -> Iterable[Metric]:
        """What a cluster node holds for the others: each bounded and given back."""
        relay, router, takeovers = self.relay, self.router, self.takeovers
        yield from gauges(
            ("copas_cluster_connections", "Connections held to other nodes",
             relay.connections()),
            ("copas_cluster_relayed_calls", "Calls being relayed to other nodes now",
             relay.calls_in_flight()),
            ("copas_cluster_owners_cached", "Tables' owners and tokens' tables remembered",
             router.remembered()),
            ("copas_cluster_claims", "Single-table takeovers in progress",
             takeovers.claims_in_progress()),
            ("copas_cluster_lease_age_seconds", "Seconds since the last renewal of this "
             "node's lease that the database took", time.monotonic() - self.lease.renewed_at),
            ("copas_cluster_lobby_reads_cached", "The lobby's reads kept (at most two)",
             self.lobby.reads_kept()),
            ("copas_cluster_shared_watch_upstreams", "Relayed WatchTable streams open to "
             "other nodes that this node's spectators of one table share (one per table)",
             relay.shared.upstreams()),
            ("copas_cluster_shared_watchers", "This node's spectator streams fed by those "
             "shared upstreams", relay.shared.watchers()))
        lookups = CounterMetricFamily(
            "copas_cluster_lookups", "Owners and tokens' tables looked up in the database "
            "(read), or refused for want of the node's budget (shed)", labels=["outcome"])
        lookups.add_metric(["read"], router.lookups_read)
        lookups.add_metric(["shed"], router.lookups_shed)
        yield lookups
        yield CounterMetricFamily("copas_cluster_relayed", "Calls and streams relayed to the "
                                  "node owning their table", value=relay.relayed)
        yield CounterMetricFamily("copas_cluster_shared_watch_upstreams_opened", "Shared "
                                  "upstream WatchTable streams opened to other nodes",
                                  value=relay.shared.opened)
        yield CounterMetricFamily("copas_cluster_takeovers", "Tables taken over from nodes "
                                  "whose lease ran out", value=takeovers.taken_over)


async def build(config: Config, registry: TableRegistry, queries: ClusterQueries, lease: Lease,
                credentials: grpc.ChannelCredentials | None) -> ClusterNode:
    """The node's parts (nothing started: ``takeovers.start`` renews the lease first);
    ``credentials``: mutual TLS towards the other nodes' internal ports (None: plaintext)."""
    takeovers = Takeovers(registry, queries, lease)
    router = Router(registry, queries, lease, takeovers, config.cluster_lookups_per_second)
    keys = ClusterKeys(*await asyncio.to_thread(queries.cluster_keys, GRACE_SECONDS))
    # Half the owner's --max-concurrent-streams on each relaying connection: a busy owner's
    # grpc-core still counts calls it answered but has not given back, and refuses streams
    # past its limit (those are sent again: ``Forwarder.unary``).
    relay = Forwarder(keys, router.forget_owner, max(1, config.max_concurrent_streams // 2),
                      answer_within=config.lease / 2, credentials=credentials,
                      history=config.history, watcher_queue=config.watcher_queue,
                      max_watchers_per_table=config.max_watchers_per_table)
    admin = ClusterAdmin(queries, lease, router, takeovers, keys, answer_within=config.lease / 2,
                         credentials=credentials)
    return ClusterNode(queries, lease, takeovers, router, keys, relay,
                       ClusterMatch(registry, queries, router.spend_lookup), admin,
                       AdminRouter(router),
                       ClusterLobby(queries, registry.delivery.committed))
