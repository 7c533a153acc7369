"""What every Lambda handler of the project keeps between invocations: one runtime per container.

A container runs one invocation at a time on one thread; the runtime (its clients and the event
loop they live on) is built at the first invocation and reused, and built again only when the
configuration read from the environment changes. It is kept per thread, so a process that calls a
handler from several threads at once (the tests, standing for several containers) works too. A bad
configuration is logged as JSON, like every other line, and fails the invocation.

Each invocation's figures are written as one CloudWatch Embedded Metric Format line
(``lambda_invocation``; ``graph_service/telemetry/lambda_invocations.py``), failed invocations included.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

import structlog

from graph_service.settings import Settings, SettingsError
from graph_service.telemetry.lambda_invocations import LambdaInvocation

__all__ = ["ContainerRuntime", "LambdaContainer", "lambda_invocation"]


def lambda_invocation(event: Mapping[str, Any], context: Any, component: str) -> LambdaInvocation:
    """The metrics of one invocation of ``component`` (``counters``, ``relay``), under the function's
    name: the Lambda context's, else ``AWS_LAMBDA_FUNCTION_NAME``, else ``component``."""
    name = getattr(context, "function_name", None) or os.environ.get("AWS_LAMBDA_FUNCTION_NAME") or component
    request_id = getattr(context, "aws_request_id", None) or ""
    return LambdaInvocation(str(name), component, event, request_id=str(request_id))


class ContainerRuntime(Protocol):
    @property
    def settings(self) -> Settings: ...

    def close(self) -> None:
        """Release the clients and close the loop."""
        ...


R = TypeVar("R", bound=ContainerRuntime)


class LambdaContainer(threading.local, Generic[R]):
    runtime: R | None = None

    def current(self, build: Callable[[Settings], R], configure_logging: Callable[[str], None]) -> R:
        """The container's runtime for the configuration in the environment now, built if needed
        (``configure_logging`` first, so its lines are JSON too)."""
        try:
            settings = Settings.from_env()
        except SettingsError as exc:  # before any runtime: log it as JSON too, then fail the invocation
            configure_logging("info")
            structlog.get_logger(__name__).error("bad_configuration", error=str(exc))
            raise
        runtime = self.runtime
        if runtime is not None and runtime.settings == settings:
            return runtime
        if runtime is not None:
            self.runtime = None  # a close that fails must not leave it to the next invocation
            runtime.close()
        configure_logging(settings.log_level)  # JSON lines, as every other process (the runtime's handler goes)
        runtime = self.runtime = build(settings)
        return runtime
