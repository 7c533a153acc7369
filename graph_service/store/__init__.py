"""The edge store interface and its DynamoDB implementation."""

from graph_service.store.edge_store import EdgeStore

__all__ = ["EdgeStore"]
