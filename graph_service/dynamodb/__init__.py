"""DynamoDB plumbing shared by every adapter on it: the async client, the retry loops, the tables."""
