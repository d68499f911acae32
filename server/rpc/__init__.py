"""The edge, the only package that serves grpc.aio or Connect (cluster/ is only a client of
other nodes): the gateway every call passes first (caller, quotas, decoding, routing, errors,
metrics, logs), the servicer that adapts calls to the tables, the Play stream, input caps,
the web bridge, reflection."""
