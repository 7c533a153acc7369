"""The fanout worker (TweetCreated -> home timelines) lives here; see docs/architecture.md."""
