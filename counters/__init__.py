"""The counts consumer: DynamoDB Stream of the followers table -> users' counters (+ Redis)."""
