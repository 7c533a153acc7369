"""The failure of a process to listen where it was told: not a caller's error (``errors.py``), and
raised by the gRPC edge and the metrics endpoint alike, so it sits beneath both."""

from __future__ import annotations

__all__ = ["PortInUse"]


class PortInUse(RuntimeError):
    """A listen address from the settings (gRPC, metrics) could not be bound."""
