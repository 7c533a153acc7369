"""A typed asyncio client for socialgraph.v1 over the generated stubs."""

from socialgraph_client.client import (
    Counts,
    FollowEntry,
    PendingRequest,
    Relationship,
    SocialGraphClient,
    Suggestion,
    TlsConfig,
)
from socialgraph_client.errors import SocialGraphError

__all__ = [
    "Counts",
    "FollowEntry",
    "PendingRequest",
    "Relationship",
    "SocialGraphClient",
    "SocialGraphError",
    "Suggestion",
    "TlsConfig",
]
