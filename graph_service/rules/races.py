"""How long a write keeps deciding afresh when concurrent writes refuse its conditions.

Each write is tried as one conditional write; when a condition refuses it (another write between
the two accounts came first), the pair is read again as one snapshot and the decision is made
afresh, so concurrent writes serialise in the store. Past ``RACE_ATTEMPTS`` the call gives up as
``Unavailable`` (the caller retries).
"""

from __future__ import annotations

__all__ = ["RACE_ATTEMPTS"]

RACE_ATTEMPTS = 8
"""Times one write reads the pair again and decides afresh before giving up as ``Unavailable``."""
