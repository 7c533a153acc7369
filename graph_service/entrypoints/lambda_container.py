"""What every Lambda handler of the project keeps between invocations: one runtime per container.

A container runs one invocation at a time on one thread; the runtime (its clients and the event
loop they live on) is built at the first invocation and reused, and built again only when the
configuration read from the environment changes. It is kept per thread, so a process that calls a
handler from several threads at once (the tests, standing for several containers) works too. A bad
configuration is logged as JSON, like every other line, and fails the invocation.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

import structlog

from graph_service.settings import Settings, SettingsError

__all__ = ["ContainerRuntime", "LambdaContainer"]


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
