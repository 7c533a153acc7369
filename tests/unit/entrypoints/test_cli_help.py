"""What an operator sees of the ``socialgraph`` command: ``--version``, each subcommand's help with
the ``SG_*`` variables it reads, and one line with the right exit code for a bad setting."""

from __future__ import annotations

import re
from dataclasses import fields
from typing import Any, ClassVar

import pytest
from socialgraph_devstack.settings import VARIABLES

from graph_service.dynamodb import client as dynamodb_client
from graph_service.entrypoints import cli
from graph_service.entrypoints.settings_help import field_docs, settings_epilog
from graph_service.settings import Settings


@pytest.fixture(autouse=True)
def _session_logging_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "configure_logging", lambda *args, **kwargs: None)


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        cli.main(["--version"])
    assert ended.value.code == 0
    assert capsys.readouterr().out.strip() == f"socialgraph {cli.package_version()}"
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", cli.package_version())


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_every_subcommand_help_says_what_it_does_and_lists_its_variables(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        cli.main([name, "--help"])
    assert ended.value.code == 0
    shown = capsys.readouterr().out
    command = cli.COMMANDS[name]
    assert " ".join(command.description.split()[:6]) in " ".join(shown.split())
    assert "environment (SG_* variables this command reads):" in shown
    listed = re.findall(r"^  (SG_[A-Z0-9_]+) \(default: ", shown, flags=re.MULTILINE)
    local_stack = list(VARIABLES) if name == "up" else []  # where the local servers live
    assert listed == [f"SG_{r.upper()}" for r in dict.fromkeys(command.reads)] + local_stack
    assert "SG_LOG_LEVEL" in listed or name == "token"


def listed_in_help(name: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    with pytest.raises(SystemExit):
        cli.main([name, "--help"])
    return re.findall(r"^  (SG_[A-Z0-9_]+) \(default: ", capsys.readouterr().out, flags=re.MULTILINE)


def test_help_lists_what_the_builders_read_and_no_more(capsys: pytest.CaptureFixture[str]) -> None:
    """The lists come from the code each command runs: the Redis and cache variables the fanout reads
    through its builders, serve's near cache; not the near cache for the fanout (only serve builds
    one), nor the celebrity threshold for serve (only the fanout applies it)."""
    fanout = listed_in_help("fanout", capsys)
    redis_and_cache = ["REDIS_URL", "REDIS_CLUSTER", "REDIS_TIMEOUT_SECONDS", "REDIS_MAX_CONNECTIONS"]
    redis_and_cache += ["CACHE_TTL_SECONDS", "ADJACENCY_CACHE_LIMIT", "TIMELINE_REDIS_URL"]
    assert {f"SG_{name}" for name in redis_and_cache} <= set(fanout)
    assert {"SG_KAFKA_SASL_PASSWORD", "SG_KAFKA_SSL_CAFILE", "SG_CELEBRITY_THRESHOLD"} <= set(fanout)
    assert "SG_NEAR_CACHE_ENTRIES" not in fanout
    serve = listed_in_help("serve", capsys)
    assert {"SG_NEAR_CACHE_ENTRIES", "SG_PAGE_TOKEN_SECRET", "SG_AUTH_DISABLED", "SG_MAX_FOLLOWING"} <= set(serve)
    assert "SG_CELEBRITY_THRESHOLD" not in serve
    imported = listed_in_help("import", capsys)
    assert "SG_MAX_FOLLOWING" in imported  # a command in a module of its own
    assert "SG_REDIS_URL" not in imported  # import never touches the cache
    assert listed_in_help("token", capsys) == ["SG_AUTH_TOKENS_FILE", "SG_LOG_LEVEL"]  # in Settings order


class Recording(Settings):
    """Settings that note each field read: a builder takes it for the real thing."""

    read: ClassVar[set[str]] = set()

    def __getattribute__(self, name: str) -> Any:
        if name in FIELDS:
            Recording.read.add(name)
        return super().__getattribute__(name)


FIELDS = frozenset(f.name for f in fields(Settings))


async def test_what_the_fanout_builders_read_when_run_is_in_its_help() -> None:
    """The builders the fanout runs, run with a recording settings object (every branch that reads
    more taken: SASL over TLS, timelines on a Redis of their own): nothing read is missing from
    its help, which is found without running anything."""
    from graph_service.dynamodb.client import AsyncDynamo
    from graph_service.entrypoints.components import build_graph_cache, build_timelines
    from graph_service.entrypoints.fanout import fanout_config
    from graph_service.entrypoints.metrics_http import metrics_address
    from graph_service.events.kafka import client_options, topic_check

    Recording.read = set()
    settings = Recording(
        kafka_security_protocol="SASL_SSL",
        kafka_sasl_mechanism="PLAIN",
        timeline_redis_url="redis://127.0.0.1:1/0",
    )
    fanout_config(settings)
    topic_check(settings).client_options()
    client_options(settings)
    metrics_address(settings, "fanout")
    AsyncDynamo.build(settings).close()
    for made in (build_graph_cache(settings), build_timelines(settings)):
        assert made is not None
        await made.aclose()
    assert {"redis_url", "timeline_redis_url", "kafka_sasl_password", "fanout_batch_size"} <= Recording.read
    assert Recording.read <= set(cli.COMMANDS["fanout"].reads)


def test_process_commands_point_to_the_tracing_variables(capsys: pytest.CaptureFixture[str]) -> None:
    for name in cli.COMMANDS:
        with pytest.raises(SystemExit):
            cli.main([name, "--help"])
        traced = cli.TRACING in capsys.readouterr().out
        assert traced == (name in {"serve", "counters", "relay", "fanout"}), name


def test_every_setting_has_a_description_for_the_help() -> None:
    documented = field_docs()
    assert set(documented) == {f.name for f in fields(Settings)}
    assert all(documented.values())


def test_secrets_never_show_their_value_in_help() -> None:
    shown = settings_epilog(["page_token_secret", "kafka_sasl_password", "redis_url", "redis_cluster"])
    assert "SG_PAGE_TOKEN_SECRET (default: (empty))" in shown
    assert "SG_KAFKA_SASL_PASSWORD (default: (empty))" in shown
    assert "SG_REDIS_URL (default: redis://127.0.0.1:6379/0)" in shown
    assert "SG_REDIS_CLUSTER (default: false)" in shown


def test_a_command_listing_an_unknown_setting_is_caught() -> None:
    with pytest.raises(ValueError, match="not a setting: no_such_thing"):
        settings_epilog(["log_level", "no_such_thing"])


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SG_LOG_LEVEL": "chatty"}, "SG_LOG_LEVEL must be one of"),
        ({"SG_MAX_PAGE_SIZE": "many"}, "SG_MAX_PAGE_SIZE"),
        ({"SG_METRICS_ADDRESS": "nowhere"}, "SG_METRICS_ADDRESS must be host:port"),
    ],
)
def test_a_bad_setting_is_one_line_and_exit_2(
    env: dict[str, str], message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["create-tables"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("socialgraph create-tables: bad configuration: ")
    assert message in err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["no-such-command"], ["post", "--author", "x"], []):
        with pytest.raises(SystemExit) as ended:
            cli.main(argv)
        assert ended.value.code == 2
    assert "usage: socialgraph" in capsys.readouterr().err


def test_an_unreachable_dynamodb_is_exit_3_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Port 1 on loopback refuses at once: the one line names what could not be reached."""
    monkeypatch.setenv("SG_DYNAMODB_ENDPOINT", "http://127.0.0.1:1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
    assert cli.main(["create-tables"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "socialgraph create-tables: a dependency is unreachable: DynamoDB create_table: Could not connect" in err


def test_an_unreachable_kafka_is_exit_3_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SG_KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    assert cli.main(["create-topics"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "socialgraph create-topics: a dependency is unreachable: Kafka at 127.0.0.1:1: " in err


def test_missing_aws_credentials_are_configuration_not_an_outage(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setattr(dynamodb_client, "_session", None)  # the process's session keeps found credentials
    monkeypatch.setenv("SG_DYNAMODB_ENDPOINT", "http://127.0.0.1:1")
    assert cli.main(["create-tables"]) == 2
    assert "bad configuration: Unable to locate credentials" in capsys.readouterr().err


def test_a_bug_is_exit_70_with_its_traceback_logged(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(settings: Settings, args: object) -> int:
        raise KeyError("oops")

    monkeypatch.setitem(cli.COMMANDS, "create-tables", cli.COMMANDS["create-tables"].__class__("s", "d", broken))
    from structlog.testing import capture_logs

    with capture_logs() as logs:
        assert cli.main(["create-tables"]) == 70
    assert "internal error: KeyError('oops')" in capsys.readouterr().err
    assert [(e["event"], e["log_level"], e["exc_info"]) for e in logs] == [("internal_error", "critical", True)]


def test_a_process_command_imports_no_operator_command_to_start() -> None:
    """``serve`` and the consumers build only their own arguments: the operator commands and the
    dev stack stay unimported (less to load at every start, and no dev package needed)."""
    import subprocess
    import sys

    script = (
        "import sys; from graph_service.entrypoints import cli;"
        " cli.build_parser(['counters']).parse_args(['counters']);"
        " print(sorted(m for m in sys.modules if m.startswith(('graph_service.operations',"
        " 'socialgraph_devstack', 'graph_service.entrypoints.importer'))))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
