"""Runs blocking boto3 calls on a thread pool so the event loop never waits on DynamoDB."""

from __future__ import annotations

import asyncio
import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from graph_service.domain.errors import Unavailable
from graph_service.dynamodb.observed import CallObserver
from graph_service.settings import Settings
from graph_service.telemetry import tracing
from graph_service.telemetry.backend_calls import DynamoCallMetrics

__all__ = ["AsyncDynamo", "cancellation_codes", "error_code"]

RETRYABLE_STORE_ERRORS = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
}


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def cancellation_codes(exc: ClientError) -> list[str]:
    """Per-item reasons of a cancelled transaction ('None' for items that were fine)."""
    return [str(r.get("Code", "None")) for r in exc.response.get("CancellationReasons", [])]


_session: boto3.session.Session | None = None
_session_lock = threading.Lock()


def _client(service: str, **kwargs: Any) -> Any:
    """A client of the process's one boto3 session: a second client reuses the service model the
    session has loaded (about 15 ms instead of 75 ms a client). Sessions are not thread-safe, so
    clients are made under a lock."""
    global _session
    with _session_lock:
        if _session is None:
            _session = boto3.session.Session()
        return _session.client(service, **kwargs)  # type: ignore[call-overload]  # the stubs want a literal service name


def boto_kwargs(settings: Settings) -> dict[str, Any]:
    """Client arguments shared by the DynamoDB and Streams clients; credentials from the AWS chain."""
    kwargs: dict[str, Any] = {
        "region_name": settings.aws_region,
        "config": Config(
            retries={"mode": "standard", "max_attempts": 5},
            # Every request is built by this code and DynamoDB validates it again: botocore's
            # client-side check of each one against the model cost about a fifth of a call's CPU.
            parameter_validation=False,
            max_pool_connections=max(10, settings.dynamodb_max_workers),
            connect_timeout=2,
            read_timeout=10,
        ),
    }
    if settings.dynamodb_endpoint:
        kwargs["endpoint_url"] = settings.dynamodb_endpoint
    return kwargs


class AsyncDynamo:
    """``await dynamo.call("get_item", ...)`` for the DynamoDB (or Streams) API; each call timed
    and counted by operation, and a span of its own when tracing is on (``observed.py``)."""

    def __init__(self, client: Any, executor: ThreadPoolExecutor, observer: CallObserver | None = None) -> None:
        self.client = client
        self._executor = executor
        self._observer = observer if observer is not None else CallObserver(client, DynamoCallMetrics())

    @classmethod
    def build(
        cls, settings: Settings, service: str = "dynamodb", *, metrics: DynamoCallMetrics | None = None
    ) -> AsyncDynamo:
        """``metrics``: where the calls are counted (the process's registry; default: a private one).
        Its calls are traced if this process's tracing is on (``telemetry/tracing.py``) when built."""
        client = _client(service, **boto_kwargs(settings))
        executor = ThreadPoolExecutor(settings.dynamodb_max_workers, thread_name_prefix=f"boto-{service}")
        tracer = tracing.tracer(__name__) if tracing.enabled() else None
        observer = CallObserver(client, metrics if metrics is not None else DynamoCallMetrics(), tracer)
        return cls(client, executor, observer)

    async def call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        """Run one API call; connection failures and exhausted throttling become ``Unavailable``."""
        method = getattr(self.client, operation)
        loop = asyncio.get_running_loop()
        observed = self._observer.bind(operation, functools.partial(method, **kwargs), kwargs)
        try:
            result: dict[str, Any] = await loop.run_in_executor(self._executor, observed)
        except ClientError as exc:
            if error_code(exc) in RETRYABLE_STORE_ERRORS:
                raise Unavailable(f"DynamoDB {operation}: {error_code(exc)}") from exc
            raise
        except BotoCoreError as exc:
            raise Unavailable(f"DynamoDB {operation}: {exc}") from exc
        return result

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self.client.close()
