"""The edge, the only package that speaks grpc.aio or Connect: the gateway every call passes
first (caller, quotas, decoding, routing, errors, metrics, logs), the servicer that adapts
calls to the tables, input caps, the web bridge, reflection."""
