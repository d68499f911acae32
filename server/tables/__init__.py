"""One node's tables: the state machine of a table (``table``), the registry that holds them
(``registry``), what watchers see (``views``, ``fanout``, ``lobby``), commit-to-visible
delivery, recovery from the log, and the bots. Never imports grpc.aio, rpc/ or cluster/:
what a table may ask of its owner is a protocol (``ports.TableHost``), what it shares with a
cluster another (``ownership.OwnershipPort``)."""
