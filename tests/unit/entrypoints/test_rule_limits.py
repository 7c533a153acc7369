"""The rules' limits are the settings' values of the same names."""

from __future__ import annotations

from dataclasses import fields

from graph_service.entrypoints.rule_limits import rule_limits
from graph_service.rules.limits import RuleLimits
from graph_service.settings import Settings


def test_every_limit_is_the_setting_of_its_name() -> None:
    """A field added to RuleLimits must be read from the setting of the same name (the page-token
    keys from the parsed list): a setting changed in the environment reaches the rules."""
    settings = Settings(
        page_token_secret="new,old",
        default_page_size=7,
        max_page_size=70,
        max_batch_size=17,
        max_following=11,
        follow_rate_limit=13,
        follow_rate_window_seconds=19,
        intersection_candidate_limit=23,
        suggest_followee_sample=29,
        suggest_per_followee=31,
        suggest_cache_ttl_seconds=37,
        celebrity_refresh_seconds=4.5,
    )
    limits = rule_limits(settings)
    for field in fields(RuleLimits):
        assert getattr(limits, field.name) == getattr(settings, field.name), field.name
    assert limits.page_token_secrets == ("new", "old")


def test_the_defaults_are_the_settings_defaults() -> None:
    """A RuleLimits built without the settings (a test, another process) has the values a server
    started with no SG_* variables would have."""
    defaults = Settings(page_token_secret="k")
    assert RuleLimits(page_token_secrets=("k",)) == rule_limits(defaults)
