"""The Kafka events: every kind of event once (``kinds``), their records (``records``: protobuf value
and headers), the Kafka client options and the topic checks."""
