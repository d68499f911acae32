"""The gRPC metadata keys the server reads and writes besides ``authorization``: who a relay
says the client is, and the proofs that it may say so."""

from __future__ import annotations

FORWARDED_FOR = "x-forwarded-for"  # the client a relay forwards for
FORWARDING_KEY = "x-copas-forwarding-key"  # the web bridge's proof (one process's secret)
CLUSTER_KEY = "x-copas-cluster-key"  # a node of the cluster vouching for the client
HOPS = "x-copas-hops"  # a relayed call carries it: it is never relayed again
ADMIN_BY = "x-copas-admin-by"  # the operator a relayed admin call is made for (its audit)
# Initial metadata of the answers that seat a player or name a table (CreateTable,
# JoinTable, GetTable, the first message of Play and WatchTable), from a cluster node: the
# public host:port of the node that owns the table, for the client to call it directly.
OWNER = "x-copas-owner"
