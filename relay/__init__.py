"""The relay: committed table changes (DynamoDB Streams) -> Kafka events, at least once."""
