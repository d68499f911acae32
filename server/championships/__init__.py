"""Championships run by the server: their store, the driver that seats and counts their
rounds, and its wiring (RULES.md, "Championships"). A layer beside the accounts: it uses the
tables, the store and the accounts, never the edge (rpc), the cluster or main."""
