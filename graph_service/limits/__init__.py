"""Abuse limits kept outside the edge store: the follow rate limit's ledger in Redis."""
