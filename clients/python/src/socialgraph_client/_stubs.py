"""The generated modules of ``socialgraph.v1``, imported for the whole package before any of its
modules uses them, without the one warning some protobuf runtimes give about them.

The stubs are protobuf gencode 5.27.2 (protoc of grpcio-tools 1.66.2), so that the client installs
beside a protobuf a year old (README, "Install"). protobuf 6.30 and 6.31 warn at the import of each
(``UserWarning: Protobuf gencode version 5.27.2 is exactly one major version older than the runtime
version 6.31.1 at socialgraph/v1/social_graph.proto ...``): the code is supported there, and 6.32
dropped the warning, but a program run with ``-W error`` fails to import. Exactly that warning is
ignored, for these imports only. ``events_pb2``, which the client does not use, is imported here too,
so that a consumer of the events that imports the client first gets no warning either.
"""

from __future__ import annotations

import re
import warnings

__all__ = ["GENCODE_VERSION", "events_pb2", "social_graph_pb2", "timeline_pb2"]

GENCODE_VERSION = "5.27.2"
"""The protobuf version the committed stubs were generated as (a unit test reads it in each stub)."""

with warnings.catch_warnings():
    warnings.filterwarnings(
        "ignore",
        message=rf"Protobuf gencode version {re.escape(GENCODE_VERSION)} is exactly one major version older than"
        r" the runtime version 6\.[0-9]+\.[0-9]+\S* at socialgraph/v1/",
        category=UserWarning,
    )
    from socialgraph.v1 import events_pb2, social_graph_pb2, timeline_pb2
