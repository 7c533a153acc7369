"""The local development stack: installs and runs DynamoDB Local, Redis (single node and Cluster)
and the Kafka-protocol broker for ``socialgraph up``, the tests and the benchmarks.

A distribution of its own (``devstack/``), so a production install of the service never carries
installers or process supervision. It may import the service's core (tables, topics, settings);
nothing of the service imports it, except the ``up`` command, which asks for it when run.
"""
