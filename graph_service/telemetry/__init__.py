"""Prometheus metrics of every process (SPEC §7.4): the metric objects, shared by the layers that count.

Every metric group (one class per module: ``AccountJobMetrics``, ``CacheMetrics`` with
``NearCacheMetrics`` and ``LeaseMetrics``, ``CountersMetrics``, ``FanoutMetrics``, ``LimitMetrics``,
``RelayMetrics``, ``RpcMetrics``, ``StreamMetrics``, ``TopicMetrics``, and ``DynamoCallMetrics`` and
``RedisCallMetrics``, the ``CallMetrics`` of each backend) is exported here, with
``FailureLog`` (rate-limited failure lines), ``BuildInfo`` (``socialgraph_build_info``, in every
process registry), for the Lambda handlers ``LambdaInvocation`` (one CloudWatch Embedded Metric
Format line per invocation, made of ``emf.py``'s ``Figure``s), and for the operator commands'
``--metrics-file`` the ``RunMetrics`` of ``import``, ``fsck`` and ``reconcile`` (a registry of
their own, written as a node_exporter text file).

Each process (each runtime: ``serve``, ``counters``, ``relay``, ``fanout``) owns one
``CollectorRegistry`` made by ``process_registry()`` and hands the metric groups built on it to the
components that count; the process's ``/metrics`` endpoint serves that registry alone. Nothing is
registered on ``prometheus_client``'s global default registry, so several runtimes built one after
another (or side by side) in one test process each report exactly their own calls.

A component built without a metric group (unit tests, tools) counts into a private registry that
nobody reads: the counting code has no "metrics off" branch.
"""

from graph_service.telemetry.account_jobs import AccountJobMetrics
from graph_service.telemetry.backend_calls import CallMetrics, DynamoCallMetrics, RedisCallMetrics
from graph_service.telemetry.build_info import BuildInfo, build_info
from graph_service.telemetry.cache import CacheMetrics, LeaseMetrics, NearCacheMetrics
from graph_service.telemetry.counters import CountersMetrics
from graph_service.telemetry.emf import Figure
from graph_service.telemetry.failures import FailureLog
from graph_service.telemetry.fanout import FanoutMetrics
from graph_service.telemetry.lambda_invocations import LambdaInvocation
from graph_service.telemetry.limits import LimitMetrics
from graph_service.telemetry.operator_runs import FsckRunMetrics, ImportRunMetrics, ReconcileRunMetrics, RunMetrics
from graph_service.telemetry.readiness import Heartbeat
from graph_service.telemetry.registry import process_registry
from graph_service.telemetry.relay import RelayMetrics
from graph_service.telemetry.rpc import MethodMetrics, RpcMetrics
from graph_service.telemetry.streams import ConsumerMetrics, StreamMetrics
from graph_service.telemetry.topics import TopicMetrics
from graph_service.telemetry.tracing import TracingConfigError

__all__ = [
    "AccountJobMetrics",
    "BuildInfo",
    "CacheMetrics",
    "CallMetrics",
    "ConsumerMetrics",
    "CountersMetrics",
    "DynamoCallMetrics",
    "FailureLog",
    "FanoutMetrics",
    "Figure",
    "FsckRunMetrics",
    "Heartbeat",
    "ImportRunMetrics",
    "LambdaInvocation",
    "LeaseMetrics",
    "LimitMetrics",
    "MethodMetrics",
    "NearCacheMetrics",
    "ReconcileRunMetrics",
    "RedisCallMetrics",
    "RelayMetrics",
    "RpcMetrics",
    "RunMetrics",
    "StreamMetrics",
    "TopicMetrics",
    "TracingConfigError",
    "build_info",
    "process_registry",
]
