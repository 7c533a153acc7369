"""The Kafka events: their records (protobuf value and headers) and the Kafka client options."""
