"""socialgraph: the follow graph service and its stream consumers.

Layers (docs/architecture.md, enforced by import-linter): ``domain`` and ``settings`` at the bottom,
the DynamoDB and Redis plumbing over them (``dynamodb``, ``redis_client``), the adapters over that
(``store``, ``cache``, ``timelines``, ``tweets``, ``streams``, ``events``, ``limits``), the service
layer's ``rules`` over the adapters' role interfaces, the processes side by side (``api``, the gRPC
edge, and ``operations`` here; ``counters``, ``relay`` and ``fanout`` beside this package), and
``entrypoints`` on top.
"""
