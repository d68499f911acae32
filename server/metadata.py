"""The gRPC metadata keys the server reads and writes besides ``authorization``: who a relay
says the client is, and the proofs that it may say so."""

from __future__ import annotations

FORWARDED_FOR = "x-forwarded-for"  # the client a relay forwards for
FORWARDING_KEY = "x-copas-forwarding-key"  # the web bridge's proof (one process's secret)
CLUSTER_KEY = "x-copas-cluster-key"  # a node of the cluster vouching for the client
HOPS = "x-copas-hops"  # a relayed call carries it: it is never relayed again
ADMIN_BY = "x-copas-admin-by"  # the operator a relayed admin call is made for (its audit)
