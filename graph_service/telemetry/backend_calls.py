"""DynamoDB and Redis call metrics: latency and failures by operation, so an outage shows as the
calls that failed, not only as ``Unavailable`` RPCs.

- ``socialgraph_dynamodb_call_seconds{operation}`` (histogram) and
  ``socialgraph_dynamodb_call_errors_total{operation, error}``: ``operation`` is the API's name
  (``TransactWriteItems``, ``Query``, ``GetRecords``); ``error`` the error code DynamoDB answered
  (``ConditionalCheckFailedException``, ``TransactionCanceledException``,
  ``ProvisionedThroughputExceededException``, ...), or the class of a failure that got no answer
  (``EndpointConnectionError``, ``ReadTimeoutError``). A call is one boto3 call, its retries
  included (``graph_service/dynamodb/client.py``). Conditional writes that find their condition
  false are errors to DynamoDB and are counted so: an alert on errors should leave out
  ``ConditionalCheckFailedException`` and ``TransactionCanceledException``.
- ``socialgraph_redis_call_seconds{operation}`` and ``socialgraph_redis_call_errors_total{operation,
  error}``: ``operation`` is the command (``GET``, ``EVALSHA``, ``SCRIPT LOAD``), or ``PIPELINE`` /
  ``MULTI`` for a pipeline (several commands, one round trip); ``error`` the exception's class
  (``ConnectionError``, ``TimeoutError``, ``NoScriptError``, ``ResponseError``). Counted by the
  clients ``graph_service/redis_client/observed.py`` builds, the near cache's invalidation link
  excepted (its fences are counted in ``socialgraph_near_cache_fences``).

Both are counted whether tracing is on or off.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from graph_service.telemetry.rpc import BUCKETS

__all__ = ["BUCKETS", "CallMetrics", "DynamoCallMetrics", "RedisCallMetrics"]

# The RPCs' buckets (seconds): a Redis call takes a fraction of a millisecond, a DynamoDB one a few,
# retries take seconds.


class CallMetrics:
    """Calls of one backend (``dynamodb``, ``redis``): how long each took, and which failed how."""

    def __init__(self, backend: str, what: str, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self._seconds = Histogram(
            f"socialgraph_{backend}_call_seconds",
            f"{what} calls' duration in seconds (retries included), by operation.",
            ["operation"],
            buckets=BUCKETS,
            registry=registry,
        )
        self._errors = Counter(
            f"socialgraph_{backend}_call_errors",
            f"{what} calls that failed, by operation and error.",
            ["operation", "error"],
            registry=registry,
        )
        self._timers: dict[str, Histogram] = {}
        """The histogram's child of each operation seen, so a call costs a dict lookup, not ``labels()``."""

    def observe(self, operation: str, seconds: float) -> None:
        timer = self._timers.get(operation)
        if timer is None:
            timer = self._timers[operation] = self._seconds.labels(operation)
        timer.observe(seconds)

    def failed(self, operation: str, error: str) -> None:
        self._errors.labels(operation, error).inc()


class DynamoCallMetrics(CallMetrics):
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__("dynamodb", "DynamoDB", registry)


class RedisCallMetrics(CallMetrics):
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__("redis", "Redis", registry)
