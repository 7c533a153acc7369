"""What a DynamoDB stream ARN names."""

from __future__ import annotations

__all__ = ["table_of_stream"]


def table_of_stream(arn: str) -> str | None:
    """The table name of a stream ARN (``arn:aws:dynamodb:REGION:ACCOUNT:table/NAME/stream/LABEL``),
    or None if it is not one."""
    _, found, rest = arn.partition(":table/")
    name, stream, _ = rest.partition("/stream/")
    return name if found and stream and name else None
