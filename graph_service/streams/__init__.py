"""DynamoDB Streams reading and per-shard checkpoints, shared by the counters consumer and the relay."""
