"""The rules' limits, read from the settings (the one place the two meet)."""

from __future__ import annotations

from graph_service.rules.limits import RuleLimits
from graph_service.settings import Settings

__all__ = ["rule_limits"]


def rule_limits(settings: Settings) -> RuleLimits:
    return RuleLimits(
        page_token_secrets=settings.page_token_secrets,
        default_page_size=settings.default_page_size,
        max_page_size=settings.max_page_size,
        max_batch_size=settings.max_batch_size,
        max_following=settings.max_following,
        follow_rate_limit=settings.follow_rate_limit,
        follow_rate_window_seconds=settings.follow_rate_window_seconds,
        intersection_candidate_limit=settings.intersection_candidate_limit,
        suggest_followee_sample=settings.suggest_followee_sample,
        suggest_per_followee=settings.suggest_per_followee,
        suggest_cache_ttl_seconds=settings.suggest_cache_ttl_seconds,
        celebrity_refresh_seconds=settings.celebrity_refresh_seconds,
    )
