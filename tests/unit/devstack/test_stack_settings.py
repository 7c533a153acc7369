"""The local stack's settings: defaults, every variable read, and a bad value named in one error."""

from __future__ import annotations

from pathlib import Path

import pytest
from socialgraph_devstack.settings import VARIABLES, StackSettings

from graph_service.settings import SettingsError


def test_defaults_are_the_documented_ones(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    settings = StackSettings.from_env({})
    assert settings == StackSettings(tmp_path.resolve() / ".local", 8000, 6379, 9092, 4568)
    names = ("SG_DYNAMODB_LOCAL_PORT", "SG_REDIS_PORT", "SG_KAFKA_PORT", "SG_BROKER_STORE_PORT")
    assert [VARIABLES[n][0] for n in names] == ["8000", "6379", "9092", "4568"]


def test_every_variable_is_read(tmp_path: Path) -> None:
    env = {
        "SG_LOCAL_DIR": str(tmp_path),
        "SG_DYNAMODB_LOCAL_PORT": "1",
        "SG_REDIS_PORT": "2",
        "SG_KAFKA_PORT": "3",
        "SG_BROKER_STORE_PORT": "4",
    }
    assert StackSettings.from_env(env) == StackSettings(tmp_path.resolve(), 1, 2, 3, 4)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SG_REDIS_PORT": "redis"}, "SG_REDIS_PORT must be a port number"),
        ({"SG_KAFKA_PORT": "0"}, "SG_KAFKA_PORT must be a port number"),
        ({"SG_DYNAMODB_LOCAL_PORT": "70000"}, "SG_DYNAMODB_LOCAL_PORT must be a port number"),
        ({"SG_REDIS_PORT": "9092"}, "the local stack's ports must differ"),
        ({"SG_BROKER_STORE_PORT": "8000"}, "the local stack's ports must differ"),
    ],
)
def test_a_bad_value_names_its_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        StackSettings.from_env(env)


def test_help_lists_every_variable_with_its_default() -> None:
    shown = "\n".join(StackSettings.help_lines())
    for name, (default, _) in VARIABLES.items():
        assert f"  {name} (default: {default})" in shown
