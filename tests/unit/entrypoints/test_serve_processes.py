"""The SG_SERVE_PROCESSES parent: the port check, each worker's environment, the setting's rules."""

from __future__ import annotations

import socket

import pytest

from graph_service.domain.listening import PortInUse
from graph_service.entrypoints.serve_processes import check_port_free, worker_environment
from graph_service.settings import Settings, SettingsError


def test_a_port_anyone_listens_on_is_refused_before_any_worker_starts() -> None:
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)  # even one that would share
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(PortInUse, match=f"127.0.0.1:{port}"):
            check_port_free(f"127.0.0.1:{port}")
    check_port_free(f"127.0.0.1:{port}")  # free again once closed


def test_each_worker_gets_its_own_metrics_port_and_serves_alone() -> None:
    settings = Settings(grpc_address="127.0.0.1:6000", serve_processes=3, metrics_address="0.0.0.0:9700")
    envs = [worker_environment(settings, i, {"SG_SERVE_PROCESSES": "3", "X": "y"}) for i in range(3)]
    assert [env["SG_METRICS_ADDRESS"] for env in envs] == ["0.0.0.0:9700", "0.0.0.0:9701", "0.0.0.0:9702"]
    assert {env["SG_SERVE_PROCESSES"] for env in envs} == {"1"}
    assert envs[2]["X"] == "y"
    free = Settings(grpc_address="127.0.0.1:6000", serve_processes=2, metrics_address="127.0.0.1:0")
    assert worker_environment(free, 1, {})["SG_METRICS_ADDRESS"] == "127.0.0.1:0"
    default = Settings(grpc_address="127.0.0.1:6000", serve_processes=2)
    assert worker_environment(default, 1, {})["SG_METRICS_ADDRESS"] == "127.0.0.1:9465"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SG_SERVE_PROCESSES": "0"}, "1 to 64"),
        ({"SG_SERVE_PROCESSES": "65"}, "1 to 64"),
        ({"SG_SERVE_PROCESSES": "2", "SG_GRPC_ADDRESS": "127.0.0.1:0"}, "fixed port"),
    ],
)
def test_bad_process_counts_are_configuration_errors(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings.from_env(env)
