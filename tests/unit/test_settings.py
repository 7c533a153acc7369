"""Settings: documented defaults, one SG_* variable per field, and clear errors for unusable values."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields

import pytest

from graph_service.settings import DEV_PAGE_TOKEN_SECRET, Settings, SettingsError


def test_defaults_need_no_environment() -> None:
    """With no SG_* variables, the settings are the documented defaults and valid."""
    settings = Settings.from_env({})
    assert settings == Settings()
    assert settings.grpc_address == "[::]:50051"
    assert settings.default_page_size == 50
    assert settings.max_page_size == 1000
    assert settings.max_batch_size == 100
    assert settings.adjacency_cache_limit == 50_000
    assert settings.redis_cluster is False
    settings.validate()


def test_every_field_can_be_set_from_its_env_var() -> None:
    """Each field can be set through SG_<FIELD NAME> and the value arrives with the field's type."""
    samples = {bool: ("true", True), int: ("700", 700), float: ("0.5", 0.5), str: ("custom-value", "custom-value")}
    enumerated = {  # fields that take one of a few values, or a shape
        "kafka_security_protocol": ("SSL", "SSL"),
        "log_level": ("WARNING", "WARNING"),
        "metrics_address": ("0.0.0.0:9999", "0.0.0.0:9999"),
        "grpc_address": ("127.0.0.1:6000", "127.0.0.1:6000"),
        "dynamodb_endpoint": ("http://dynamodb.local:8000", "http://dynamodb.local:8000"),
        "redis_url": ("rediss://cache.internal:6380/0", "rediss://cache.internal:6380/0"),
        "timeline_redis_url": ("redis://timelines:6379", "redis://timelines:6379"),
        "kafka_bootstrap_servers": ("b-1:9094, b-2:9094", "b-1:9094, b-2:9094"),
        "lease_seconds": ("2.5", 2.5),  # at least 1
        "serve_processes": ("3", 3),  # 1 to 64
        "account_job_lease_seconds": ("2.5", 2.5),  # at least 1
    }
    tls = {"SG_TLS_CERT_FILE": "c.pem", "SG_TLS_KEY_FILE": "k.pem"}  # fields that need their companions
    companions = {"tls_cert_file": tls, "tls_key_file": tls, "tls_client_ca_file": tls}
    for field in fields(Settings):
        kind = type(field.default)
        raw, expected = enumerated.get(field.name, samples[kind])
        settings = Settings.from_env({**companions.get(field.name, {}), f"SG_{field.name.upper()}": raw})
        assert getattr(settings, field.name) == expected, field.name
        assert type(getattr(settings, field.name)) is kind, field.name


def test_values_are_read_from_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without an explicit mapping, from_env reads os.environ."""
    monkeypatch.setenv("SG_GRPC_ADDRESS", "127.0.0.1:6000")
    monkeypatch.setenv("SG_MAX_BATCH_SIZE", "42")
    settings = Settings.from_env()
    assert settings.grpc_address == "127.0.0.1:6000"
    assert settings.max_batch_size == 42


def test_unknown_and_unprefixed_variables_are_ignored() -> None:
    """Variables that name no field, or lack the SG_ prefix, change nothing."""
    settings = Settings.from_env({"SG_NO_SUCH_SETTING": "x", "GRPC_ADDRESS": "1.2.3.4:5", "sg_grpc_address": "x"})
    assert settings == Settings()


@pytest.mark.parametrize("raw", ["1", "true", "TRUE", "yes", "on", " True "])
def test_true_spellings(raw: str) -> None:
    """The usual spellings of true enable a boolean setting."""
    assert Settings.from_env({"SG_REDIS_CLUSTER": raw}).redis_cluster is True


@pytest.mark.parametrize("raw", ["0", "false", "False", "no", "off", ""])
def test_false_spellings(raw: str) -> None:
    """The usual spellings of false (and empty) disable a boolean setting."""
    assert Settings.from_env({"SG_REDIS_CLUSTER": raw}).redis_cluster is False


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("SG_REDIS_CLUSTER", "maybe"),
        ("SG_REDIS_CLUSTER", "2"),
        ("SG_MAX_PAGE_SIZE", "lots"),
        ("SG_MAX_PAGE_SIZE", "1.5"),
        ("SG_DEFAULT_PAGE_SIZE", ""),
        ("SG_REDIS_TIMEOUT_SECONDS", "fast"),
        ("SG_CACHE_TTL_SECONDS", "1e3"),
    ],
)
def test_unparseable_value_is_a_settings_error_naming_the_variable(name: str, raw: str) -> None:
    """A value of the wrong type fails with SettingsError that names the variable."""
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({name: raw})


@pytest.mark.parametrize(
    "env",
    [
        {"SG_DEFAULT_PAGE_SIZE": "0"},
        {"SG_DEFAULT_PAGE_SIZE": "-5"},
        {"SG_DEFAULT_PAGE_SIZE": "1001"},
        {"SG_DEFAULT_PAGE_SIZE": "60", "SG_MAX_PAGE_SIZE": "50"},
        {"SG_MAX_PAGE_SIZE": "0"},
        {"SG_MAX_BATCH_SIZE": "0"},
        {"SG_ADJACENCY_CACHE_LIMIT": "-1"},
        {"SG_CACHE_TTL_SECONDS": "0"},
        {"SG_TABLE_PREFIX": "p" * 201},
        {"SG_REDIS_MAX_CONNECTIONS": "0"},
        {"SG_SUGGEST_FOLLOWEE_SAMPLE": "0"},
        {"SG_SUGGEST_PER_FOLLOWEE": "0"},
        {"SG_SUGGEST_CACHE_TTL_SECONDS": "0"},
        {"SG_INTERSECTION_CANDIDATE_LIMIT": "-1"},
    ],
    ids=[
        "default page 0",
        "default page negative",
        "default page above max",
        "max below default",
        "max page 0",
        "batch 0",
        "cache limit negative",
        "ttl 0",
        "prefix too long",
        "redis pool 0",
        "suggestion sample 0",
        "suggestions per followee 0",
        "suggestion ttl 0",
        "candidate limit negative",
    ],
)
def test_out_of_range_values_are_refused(env: dict[str, str]) -> None:
    """Values that would make the service misbehave are refused at start-up with SettingsError."""
    with pytest.raises(SettingsError):
        Settings.from_env(env)


def test_edge_values_are_accepted() -> None:
    """The boundaries of the valid ranges are accepted."""
    settings = Settings.from_env(
        {
            "SG_DEFAULT_PAGE_SIZE": "1",
            "SG_MAX_PAGE_SIZE": "1",
            "SG_MAX_BATCH_SIZE": "1",
            "SG_ADJACENCY_CACHE_LIMIT": "0",
            "SG_CACHE_TTL_SECONDS": "1",
            "SG_TABLE_PREFIX": "p" * 200,
            "SG_REDIS_URL": "",
            "SG_REDIS_MAX_CONNECTIONS": "1",
            "SG_SUGGEST_FOLLOWEE_SAMPLE": "1",
            "SG_SUGGEST_PER_FOLLOWEE": "1",
            "SG_SUGGEST_CACHE_TTL_SECONDS": "1",
            "SG_INTERSECTION_CANDIDATE_LIMIT": "0",
        }
    )
    assert (settings.default_page_size, settings.max_page_size, settings.adjacency_cache_limit) == (1, 1, 0)
    assert settings.redis_url == ""


def test_settings_error_is_a_value_error() -> None:
    """SettingsError can be caught as ValueError."""
    assert issubclass(SettingsError, ValueError)


def test_table_names_carry_the_prefix() -> None:
    """Every table name is the configured prefix followed by the table's name."""
    assert Settings().table("followers") == "sg_followers"
    assert Settings.from_env({"SG_TABLE_PREFIX": "prod_eu_"}).table("users") == "prod_eu_users"


def test_settings_are_immutable() -> None:
    """A settings object cannot be changed after it is built."""
    settings = Settings()
    with pytest.raises(FrozenInstanceError):
        settings.max_page_size = 5  # type: ignore[misc]  # refused on purpose: frozen


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SG_KAFKA_SECURITY_PROTOCOL": "TLS"}, "SG_KAFKA_SECURITY_PROTOCOL"),
        ({"SG_KAFKA_SECURITY_PROTOCOL": "SASL_SSL"}, "SG_KAFKA_SASL_MECHANISM"),
        ({"SG_CELEBRITY_THRESHOLD": "0"}, "SG_CELEBRITY_THRESHOLD"),
        ({"SG_TIMELINE_CAP": "0"}, "SG_TIMELINE_CAP"),
        ({"SG_FANOUT_BATCH_SIZE": "0"}, "SG_FANOUT_BATCH_SIZE"),
        ({"SG_TOPIC_PARTITIONS": "0"}, "SG_TOPIC_PARTITIONS"),
    ],
)
def test_unusable_event_and_timeline_settings_are_refused(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings.from_env(env)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SG_TLS_CERT_FILE": "c.pem"}, "SG_TLS_KEY_FILE"),
        ({"SG_TLS_KEY_FILE": "k.pem"}, "SG_TLS_CERT_FILE"),
        ({"SG_TLS_CLIENT_CA_FILE": "ca.pem"}, "SG_TLS_CERT_FILE"),
        ({"SG_FOLLOW_RATE_LIMIT": "-1"}, "SG_FOLLOW_RATE_LIMIT"),
        ({"SG_MAX_FOLLOWING": "-1"}, "SG_MAX_FOLLOWING"),
        ({"SG_FOLLOW_RATE_WINDOW_SECONDS": "0"}, "SG_FOLLOW_RATE_WINDOW_SECONDS"),
        ({"SG_AUTH_RELOAD_SECONDS": "0"}, "SG_AUTH_RELOAD_SECONDS"),
    ],
)
def test_unusable_security_and_limit_settings_are_refused(env: dict[str, str], message: str) -> None:
    """Half a TLS configuration, or a negative limit, is refused at start naming the variable."""
    with pytest.raises(SettingsError, match=message):
        Settings.from_env(env)


def test_limits_default_to_the_spec_and_zero_turns_them_off() -> None:
    """400 follows a day and 7,500 followings by default (SPEC §7.2); 0 is accepted as "no limit"."""
    assert (Settings().follow_rate_limit, Settings().follow_rate_window_seconds) == (400, 86_400)
    assert Settings().max_following == 7_500
    off = Settings.from_env({"SG_FOLLOW_RATE_LIMIT": "0", "SG_MAX_FOLLOWING": "0"})
    assert (off.follow_rate_limit, off.max_following) == (0, 0)


def test_page_token_secrets_are_a_list_with_the_signing_key_first() -> None:
    """SG_PAGE_TOKEN_SECRET=new,old signs with new and accepts both; blanks around commas are ignored;
    with none set the development key is used, and it is never printed."""
    assert Settings(page_token_secret=" new , old ,").page_token_secrets == ("new", "old")
    assert Settings().page_token_secrets == (DEV_PAGE_TOKEN_SECRET,)
    assert "new" not in repr(Settings(page_token_secret="new"))


AWS = {"SG_DYNAMODB_ENDPOINT": ""}


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({**AWS, "SG_PAGE_TOKEN_SECRET": "s"}, "SG_AUTH_TOKENS_FILE"),
        ({**AWS, "SG_AUTH_TOKENS_FILE": "callers.toml"}, "SG_PAGE_TOKEN_SECRET"),
        ({**AWS, "SG_AUTH_DISABLED": "true"}, "SG_PAGE_TOKEN_SECRET"),
        ({**AWS, "SG_AUTH_TOKENS_FILE": "c.toml", "SG_PAGE_TOKEN_SECRET": DEV_PAGE_TOKEN_SECRET}, "SG_PAGE_TOKEN"),
        ({"SG_DYNAMODB_ENDPOINT": "https://dynamodb-fips.us-east-1.amazonaws.com"}, "SG_AUTH_TOKENS_FILE"),
        (
            {"SG_DYNAMODB_ENDPOINT": "https://vpce-0a1b.dynamodb.eu-west-1.vpce.amazonaws.com:443"},
            "SG_AUTH_TOKENS_FILE",
        ),
        ({"SG_DYNAMODB_ENDPOINT": "https://dynamodb.us-east-1.amazonaws.com."}, "SG_AUTH_TOKENS_FILE"),
        ({"SG_DYNAMODB_ENDPOINT": "https://dynamodb.corp.example:8443"}, "SG_AUTH_TOKENS_FILE"),
        ({"SG_DYNAMODB_ENDPOINT": "http://10.0.0.5:8000"}, "SG_AUTH_TOKENS_FILE"),
    ],
    ids=[
        "auth off",
        "no secret",
        "auth disabled on purpose but no secret",
        "the development secret",
        "fips endpoint",
        "vpc endpoint",
        "trailing dot",
        "a proxy",
        "another host",
    ],
)
def test_serving_aws_tables_insecurely_is_refused(env: dict[str, str], message: str) -> None:
    """Against AWS (no endpoint) the server needs callers (or SG_AUTH_DISABLED=true) and a real page-token key."""
    with pytest.raises(SettingsError, match=message):
        Settings.from_env(env).check_serving()


@pytest.mark.parametrize(
    "env",
    [
        {"SG_DYNAMODB_ENDPOINT": "http://127.0.0.1:8000"},
        {"SG_DYNAMODB_ENDPOINT": "http://localhost:8000"},
        {"SG_DYNAMODB_ENDPOINT": "http://[::1]:8000"},
        {**AWS, "SG_AUTH_TOKENS_FILE": "callers.toml", "SG_PAGE_TOKEN_SECRET": "s"},
        {**AWS, "SG_AUTH_DISABLED": "true", "SG_PAGE_TOKEN_SECRET": "s"},
    ],
    ids=["local stack, no setup", "localhost", "ipv6 loopback", "aws with callers and a secret", "aws open on purpose"],
)
def test_serving_is_allowed_locally_and_when_secured(env: dict[str, str]) -> None:
    """The local stack needs no setup; AWS with auth (or auth disabled on purpose) and a secret starts."""
    Settings.from_env(env).check_serving()


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("SG_LOG_LEVEL", "loud", "SG_LOG_LEVEL must be one of debug, info, warning, error, critical"),
        ("SG_LOG_LEVEL", "", "SG_LOG_LEVEL must be one of"),
        ("SG_METRICS_ADDRESS", "9464", "SG_METRICS_ADDRESS must be host:port"),
        ("SG_METRICS_ADDRESS", "127.0.0.1:http", "SG_METRICS_ADDRESS must be host:port"),
        ("SG_METRICS_ADDRESS", "127.0.0.1:70000", "SG_METRICS_ADDRESS must be host:port"),
        ("SG_METRICS_BASE_PORT", "65534", "SG_METRICS_BASE_PORT must be a port with three more after it"),
        ("SG_METRICS_BASE_PORT", "0", "SG_METRICS_BASE_PORT must be a port"),
        ("SG_REDIS_URL", "notaurl", "SG_REDIS_URL must start with redis:// or rediss:// or unix://"),
        ("SG_REDIS_URL", "redis://h:notaport", "SG_REDIS_URL: not a usable URL"),
        ("SG_TIMELINE_REDIS_URL", "http://h:6379", "SG_TIMELINE_REDIS_URL must start with redis://"),
        ("SG_REDIS_URL", "redis://:6379/0", "SG_REDIS_URL names no host"),
        ("SG_DYNAMODB_ENDPOINT", "not a url", "SG_DYNAMODB_ENDPOINT must start with http:// or https://"),
        ("SG_DYNAMODB_ENDPOINT", "http://localhost:99999", "SG_DYNAMODB_ENDPOINT: not a usable URL"),
        ("SG_KAFKA_BOOTSTRAP_SERVERS", "broker", "SG_KAFKA_BOOTSTRAP_SERVERS must be host:port"),
        ("SG_KAFKA_BOOTSTRAP_SERVERS", "b-1:9092,", "SG_KAFKA_BOOTSTRAP_SERVERS must be host:port"),
        ("SG_GRPC_ADDRESS", "50051", "SG_GRPC_ADDRESS must be host:port"),
    ],
)
def test_levels_addresses_and_urls_are_checked_at_start(variable: str, value: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings.from_env({variable: value})


@pytest.mark.parametrize(
    ("variable", "raw"),
    [("SG_LEASE_SECONDS", "0.5"), ("SG_LEASE_SECONDS", "-3"), ("SG_TOPIC_CHECK_SECONDS", "0")],
)
def test_lease_and_topic_check_periods_must_be_sensible(variable: str, raw: str) -> None:
    with pytest.raises(SettingsError, match="SG_LEASE_SECONDS must be at least 1 and SG_TOPIC_CHECK_SECONDS positive"):
        Settings.from_env({variable: raw})
