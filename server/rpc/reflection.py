"""Server reflection, both versions: ``grpc.reflection.v1`` (what current tools ask first)
beside ``grpc.reflection.v1alpha``.

grpcio-reflection ships only v1alpha. The two protocols are the same messages under another
package name, so the maintained v1alpha servicer answers on the v1 path too, and the v1 file
(the v1alpha descriptor renamed) is added to the descriptor pool so tools can resolve it.
"""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection, reflection_pb2

V1_SERVICE_NAME = "grpc.reflection.v1.ServerReflection"
_V1_FILE = "grpc/reflection/v1/reflection.proto"


def _add_v1_descriptor() -> None:
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(_V1_FILE)
        return
    except KeyError:
        pass
    file = descriptor_pb2.FileDescriptorProto.FromString(reflection_pb2.DESCRIPTOR.serialized_pb)
    file.name = _V1_FILE
    file.package = "grpc.reflection.v1"
    old, new = ".grpc.reflection.v1alpha.", ".grpc.reflection.v1."
    for message in file.message_type:
        for field in message.field:
            if field.HasField("type_name"):
                field.type_name = field.type_name.replace(old, new)
    for service in file.service:
        for method in service.method:
            method.input_type = method.input_type.replace(old, new)
            method.output_type = method.output_type.replace(old, new)
    pool.Add(file)


def services(service_names: tuple[str, ...]
             ) -> dict[str, dict[str, grpc.RpcMethodHandler[Any, Any]]]:
    """Reflection v1 and v1alpha for ``service_names`` (the reflection services are added to
    the list), as method handlers by service name, for the server to serve."""
    _add_v1_descriptor()
    names = (*service_names, reflection.SERVICE_NAME, V1_SERVICE_NAME)
    servicer = reflection.aio.ReflectionServicer(names)
    handler = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString)
    return {reflection.SERVICE_NAME: {"ServerReflectionInfo": handler},
            V1_SERVICE_NAME: {"ServerReflectionInfo": handler}}
