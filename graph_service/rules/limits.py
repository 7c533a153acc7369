"""The values the rules read, gathered in one frozen object built by the entry point from
``Settings`` (``entrypoints/rule_limits.py``): a test or another process builds this, not the
whole settings object. The defaults are the settings' defaults (a unit test holds them equal)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RuleLimits"]


@dataclass(frozen=True, slots=True)
class RuleLimits:
    page_token_secrets: tuple[str, ...]
    """Page-token keys, the signing key first (``page_tokens.py``)."""
    default_page_size: int = 50
    """Page size of a request that says 0 (AIP-158)."""
    max_page_size: int = 1000
    """Larger page sizes are clamped to this."""
    max_batch_size: int = 100
    """Most IDs a batch RPC accepts."""
    max_following: int = 7_500
    """Most follows plus pending requests of one account (SPEC §7.2); 0: no cap."""
    follow_rate_limit: int = 400
    """Follows one actor may make per window (SPEC §7.2); 0: no limit."""
    follow_rate_window_seconds: int = 86_400
    """The sliding window of ``follow_rate_limit``."""
    intersection_candidate_limit: int = 10_000
    """Known followers and mutuals load the viewer's followees into memory only below this."""
    suggest_followee_sample: int = 200
    """SuggestFollows looks at this many of the user's most recent followees."""
    suggest_per_followee: int = 200
    """... and at this many of each one's most recent followees."""
    suggest_cache_ttl_seconds: int = 300
    """How long a ranking is kept (a write of the user drops it at once)."""
    celebrity_refresh_seconds: float = 2.0
    """How long a timeline reader keeps its copy of the celebrity registry."""
