"""The local stack: installs and runs DynamoDB Local and Redis for `socialgraph up` and the tests."""
