"""The client's reason constants are exactly the reasons the server's error table can send."""

from __future__ import annotations

from google.rpc import error_details_pb2, status_pb2
from socialgraph_client import DOMAIN, Reason

from graph_service.api import error_mapping
from graph_service.domain.errors import DomainError


def server_reasons() -> set[str]:
    """Every ``reason`` a DomainError subclass declares, plus the reason of an unexpected failure."""
    reasons = set()
    pending = list(DomainError.__subclasses__())
    while pending:
        kind = pending.pop()
        pending.extend(kind.__subclasses__())
        if "reason" in vars(kind):
            reasons.add(vars(kind)["reason"])
    trailer = dict(error_mapping.internal_status("r").trailing_metadata)["grpc-status-details-bin"]
    info = error_details_pb2.ErrorInfo()
    assert status_pb2.Status.FromString(trailer).details[0].Unpack(info)
    reasons.add(info.reason)
    return reasons


def test_every_server_reason_has_a_constant_and_no_constant_is_stale() -> None:
    assert {reason.value for reason in Reason} == server_reasons()


def test_constants_compare_equal_to_the_strings_errors_carry() -> None:
    assert Reason.SELF_FOLLOW == "SELF_FOLLOW"
    assert error_mapping.DOMAIN == DOMAIN
