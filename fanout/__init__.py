"""The fanout worker: ``TweetCreated`` -> followers' home timelines; ``FollowEvent`` -> backfill and purge."""
