"""The Python client of socialgraph.v1: ``SocialGraphClient`` (blocking) and ``AsyncSocialGraphClient`` (asyncio).

Both have the same methods, built on one description of the RPCs (``rpcs.py``); see the package's
README for every method, the errors, retries, deadlines, paging, interceptors and tracing.
"""

from socialgraph_client import _stubs  # noqa: F401 - first: the generated modules, imported without protobuf 6.3x's warning
from socialgraph_client._version import API_FINGERPRINT, API_PACKAGE, __version__
from socialgraph_client.aio import AsyncSocialGraphClient
from socialgraph_client.errors import (
    Aborted,
    AccountDeactivatedError,
    AccountDeletedError,
    AlreadyExists,
    Cancelled,
    ConnectError,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    SocialGraphError,
    Unauthenticated,
    Unavailable,
    Unimplemented,
)
from socialgraph_client.options import USE_CLIENT_DEFAULT, Deadlines, Metadata, RetryPolicy, UseClientDefault
from socialgraph_client.reasons import DOMAIN, Reason
from socialgraph_client.sync import SocialGraphClient
from socialgraph_client.tls import TlsConfig
from socialgraph_client.tokens import Token
from socialgraph_client.tracing import Propagator, otel_context
from socialgraph_client.values import (
    AccountState,
    AccountStatus,
    Counts,
    FollowEntry,
    FollowState,
    MuteEntry,
    Page,
    PendingRequest,
    Relationship,
    Suggestion,
)

__all__ = [
    "API_FINGERPRINT",
    "API_PACKAGE",
    "DOMAIN",
    "USE_CLIENT_DEFAULT",
    "Aborted",
    "AccountDeactivatedError",
    "AccountDeletedError",
    "AccountState",
    "AccountStatus",
    "AlreadyExists",
    "AsyncSocialGraphClient",
    "Cancelled",
    "ConnectError",
    "Counts",
    "DeadlineExceeded",
    "Deadlines",
    "FailedPrecondition",
    "FollowEntry",
    "FollowState",
    "Internal",
    "InvalidArgument",
    "Metadata",
    "MuteEntry",
    "NotFound",
    "Page",
    "PendingRequest",
    "PermissionDenied",
    "Propagator",
    "Reason",
    "Relationship",
    "ResourceExhausted",
    "RetryPolicy",
    "SocialGraphClient",
    "SocialGraphError",
    "Suggestion",
    "TlsConfig",
    "Token",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "UseClientDefault",
    "__version__",
    "otel_context",
]
