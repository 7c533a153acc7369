"""Every RPC the protos declare, read from the generated modules' descriptors: the one list the
tests hold a table against (the scopes, the client's RPCs, what reflection describes), so an RPC
added to a proto is checked everywhere without being named in a test."""

from __future__ import annotations

from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from socialgraph.v1 import social_graph_pb2, timeline_pb2

__all__ = ["GRAPH", "SERVICES", "TIMELINES", "declared_methods"]

GRAPH: ServiceDescriptor = social_graph_pb2.DESCRIPTOR.services_by_name["SocialGraphService"]
TIMELINES: ServiceDescriptor = timeline_pb2.DESCRIPTOR.services_by_name["TimelineService"]
SERVICES: tuple[ServiceDescriptor, ...] = tuple(
    service for module in (social_graph_pb2, timeline_pb2) for service in module.DESCRIPTOR.services_by_name.values()
)
"""Every service of the two API protos (a third one added to either is in it)."""


def declared_methods(*services: ServiceDescriptor) -> dict[str, MethodDescriptor]:
    """Path (``/socialgraph.v1.SocialGraphService/Follow``) -> method, for ``services`` (every
    service of ours when none is given), in the protos' order."""
    return {
        f"/{service.full_name}/{method.name}": method for service in services or SERVICES for method in service.methods
    }
