"""The telemetry package exports every metric group its modules define, like any other group."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import graph_service.telemetry as telemetry


def test_every_metric_group_of_every_module_is_exported_by_the_package() -> None:
    groups = set()
    for module_info in pkgutil.iter_modules(telemetry.__path__):
        module = importlib.import_module(f"{telemetry.__name__}.{module_info.name}")
        groups |= {
            name
            for name, value in vars(module).items()
            if inspect.isclass(value) and value.__module__ == module.__name__ and name in getattr(module, "__all__", ())
        }
    assert {"CountersMetrics", "RelayMetrics", "StreamMetrics", "FanoutMetrics"} <= groups
    assert groups - set(telemetry.__all__) == set()
    assert all(getattr(telemetry, name) is not None for name in telemetry.__all__)
