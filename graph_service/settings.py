"""One typed settings object, read from the environment once per process.

Every field has a documented default (see the README's configuration table), so the
local stack needs no configuration and production differs only by environment.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from urllib.parse import urlsplit

__all__ = ["LOG_LEVELS", "Settings", "SettingsError"]

DEV_PAGE_TOKEN_SECRET = "socialgraph-local-development-secret"  # noqa: S105 - the documented local default


LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


class SettingsError(ValueError):
    """An environment variable holds a value that cannot be used."""


def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off", ""}:
        return False
    raise SettingsError(f"not a boolean: {raw!r}")


def _check_url(variable: str, url: str, schemes: set[str]) -> None:
    """A URL the clients can use: one of ``schemes``, a host, a numeric port if any."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as exc:
        raise SettingsError(f"{variable}: not a usable URL ({exc}): {url!r}") from exc
    if parts.scheme not in schemes:
        raise SettingsError(f"{variable} must start with {' or '.join(sorted(f'{s}://' for s in schemes))}: {url!r}")
    if parts.scheme != "unix" and not parts.hostname:
        raise SettingsError(f"{variable} names no host: {url!r}")


def _is_host_port(address: str) -> bool:
    host, sep, port = address.rpartition(":")
    return bool(sep and host) and port.isdigit() and 0 <= int(port) <= 65_535


@dataclass(frozen=True, slots=True)
class Settings:
    """Configuration of the service and the consumers; env var = ``SG_`` + upper-cased field name."""

    grpc_address: str = "[::]:50051"
    """Where the gRPC server listens (host:port)."""
    serve_processes: int = 1
    """``serve``: how many serving processes share the gRPC port (SO_REUSEPORT; the kernel spreads
    connections among them); more than 1 needs a fixed port, and process ``i`` serves its metrics on
    the metrics port plus ``i``."""
    dynamodb_endpoint: str = ""
    """DynamoDB endpoint URL; empty means the AWS default for the region (credentials: standard chain)."""
    aws_region: str = "us-east-1"
    """AWS region of the tables and streams."""
    table_prefix: str = "sg_"
    """Prefix of every table name, so several deployments can share an account."""
    redis_url: str = "redis://127.0.0.1:6379/0"
    """Redis URL (rediss:// for TLS); empty disables caching."""
    redis_cluster: bool = False
    """Treat SG_REDIS_URL as a seed node of a Redis Cluster."""
    redis_timeout_seconds: float = 0.25
    """Socket timeout of Redis calls; past it a read falls back to DynamoDB."""
    redis_max_connections: int = 256
    """Most Redis calls in flight per process (and connections per Redis node); more wait their turn."""
    near_cache_entries: int = 100_000
    """``serve``: keys of follow states, counts, first list pages and relationships kept in the process, trusted
    through Redis's invalidation messages and a read fence (docs/performance.md); 0: off. Off with
    Redis Cluster."""
    cache_ttl_seconds: int = 86_400
    """Lifetime of cached follow states, lists, counts, relationships and privacy flags."""
    adjacency_cache_limit: int = 50_000
    """Lists longer than this are never cached whole (SPEC §6)."""
    default_page_size: int = 50
    """Page size used when a request says 0."""
    max_page_size: int = 1000
    """Larger page sizes are clamped to this."""
    max_batch_size: int = 100
    """Most IDs accepted by batch RPCs."""
    suggest_followee_sample: int = 200
    """SuggestFollows looks at the user's most recent followees, at most this many."""
    suggest_per_followee: int = 200
    """... and at each of those followees' most recent followees, at most this many."""
    suggest_cache_ttl_seconds: int = 300
    """How long computed suggestions are kept (a follow change of the user drops them at once)."""
    intersection_candidate_limit: int = 10_000
    """ListKnownFollowers/ListMutualFollows load the viewer's followees into memory only below this."""
    page_token_secret: str = field(default="", repr=False)
    """Comma-separated HMAC keys of page tokens, shared by all replicas: tokens are signed with the first
    and accepted with any (rotation). Empty: a development key, allowed only with an SG_DYNAMODB_ENDPOINT
    on this machine (localhost or a loopback address)."""
    auth_tokens_file: str = ""
    """TOML file of the callers and their scopes (SPEC §7.1); empty: no authentication (the local stack)."""
    caller_token: str = field(default="", repr=False)
    """``account``: the bearer token it sends to the service, of a caller with the admin scope (and read,
    to wait for the job or ask the status); empty: none, for a service with authentication off."""
    caller_ca_file: str = ""
    """``account``: PEM CA bundle to verify the service's TLS certificate against; empty: plaintext."""
    auth_disabled: bool = False
    """Say on purpose that a server against real tables (any SG_DYNAMODB_ENDPOINT not on this machine)
    runs without SG_AUTH_TOKENS_FILE."""
    auth_reload_seconds: float = 1.0
    """How often the callers file is checked for changes (SIGHUP re-reads it at once)."""
    tls_cert_file: str = ""
    """PEM certificate chain of the gRPC server; with SG_TLS_KEY_FILE it serves TLS only. Re-read when it changes."""
    tls_key_file: str = ""
    """PEM private key of SG_TLS_CERT_FILE."""
    tls_client_ca_file: str = ""
    """PEM CA bundle: clients must present a certificate it signed (mTLS). Needs SG_TLS_CERT_FILE."""
    follow_rate_limit: int = 400
    """Follows (new edges or requests) one actor may make per window (SPEC §7.2); 0: no limit."""
    follow_rate_window_seconds: int = 86_400
    """The sliding window of SG_FOLLOW_RATE_LIMIT."""
    max_following: int = 7_500
    """Most follows plus pending requests one account may have (SPEC §7.2); 0: no cap."""
    account_jobs: int = 2
    """Account lifecycle jobs (SPEC §3b: archive, restore, delete) each serving process runs at once,
    taken from the jobs' registry under a lease; 0: this process runs none."""
    account_job_lease_seconds: float = 30.0
    """A job whose process died is taken over by another within this long."""
    account_job_poll_seconds: float = 1.0
    """How often a serving process looks for jobs to run."""
    dynamodb_max_workers: int = 32
    """Threads that run blocking boto3 calls off the event loop."""
    shutdown_grace_seconds: float = 10.0
    """How long SIGTERM waits for in-flight calls before cancelling them."""
    log_level: str = "info"
    """Minimum log level: debug, info, warning, error or critical (any case)."""
    metrics_address: str = ""
    """Where the process serves Prometheus metrics, ``/healthz`` and ``/readyz`` (host:port; port 0 picks a
    free one). Empty: 127.0.0.1 and the process's own port: serve 9464, counters 9465, relay 9466, fanout 9467."""
    metrics_base_port: int = 9464
    """``socialgraph up`` puts the metrics of serve, counters, relay and fanout on this port and the next three."""
    stream_poll_seconds: float = 0.25
    """Idle wait of a stream consumer between empty GetRecords calls."""
    shard_refresh_seconds: float = 5.0
    """How often a stream consumer looks for new shards."""
    counters_consumer_name: str = "counters"
    """Checkpoint namespace of the counters consumer."""
    relay_consumer_name: str = "relay"
    """Checkpoint namespace of the relay (one per stream: ``relay:tweets``, ``relay:followers``)."""
    lease_seconds: float = 10.0
    """Stream consumers (counters, relay) own shards through leases in DynamoDB: a second instance
    takes over the shards of one that died within this long."""
    topic_check_seconds: float = 5.0
    """How often the relay and the fanout check that both topics exist with SG_TOPIC_PARTITIONS
    partitions (and the relay that no partition's log went backwards); at once after a Kafka error."""
    kafka_bootstrap_servers: str = "127.0.0.1:9092"
    """Comma-separated Kafka bootstrap servers (host:port)."""
    kafka_security_protocol: str = "PLAINTEXT"
    """PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (MSK with TLS: SSL or SASL_SSL)."""
    kafka_sasl_mechanism: str = ""
    """PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 when the protocol is SASL_*."""
    kafka_sasl_username: str = ""
    """SASL user name."""
    kafka_sasl_password: str = field(default="", repr=False)
    """SASL password."""
    kafka_ssl_cafile: str = ""
    """CA bundle for TLS to the brokers; empty uses the system's trusted CAs."""
    kafka_client_id: str = "socialgraph"
    """Client ID the relay and fanout present to the brokers."""
    tweets_topic: str = "tweet-events"
    """Topic of ``TweetCreated`` events (key: tweet ID)."""
    graph_events_topic: str = "graph-events"
    """Topic of ``FollowEvent``s (key: followee ID)."""
    topic_partitions: int = 6
    """Partitions of each topic created by ``create-topics`` and ``up``."""
    topic_replication_factor: int = 1
    """Replication factor of the topics created (3 on a production cluster)."""
    fanout_group: str = "socialgraph-fanout"
    """Kafka consumer group of the fanout workers."""
    fanout_batch_size: int = 1000
    """Followers read per page and timelines written per pipelined Redis batch."""
    celebrity_threshold: int = 10_000
    """Authors with at least this many followers are not fanned out; their tweets are pulled at read time."""
    timeline_redis_url: str = ""
    """Redis (or Cluster seed) of the timelines, when they have a Redis of their own; empty: SG_REDIS_URL."""
    timeline_redis_cluster: bool = False
    """Treat SG_TIMELINE_REDIS_URL as a seed node of a Redis Cluster (unused when that URL is empty)."""
    timeline_cap: int = 800
    """Entries kept per home timeline (``home_timeline:{user_id}``)."""
    recent_tweets_cap: int = 200
    """Tweets kept per author for pull and for the backfill of a new follow (``user_tweets:{user_id}``)."""
    tweet_author_ttl_seconds: int = 2_592_000
    """Lifetime of a cached tweet -> author entry (misses read the tweets table)."""
    celebrity_refresh_seconds: float = 2.0
    """How long a timeline reader keeps its copy of the celebrity registry."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Build settings from ``SG_*`` variables; unknown variables are ignored."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for spec in fields(cls):
            raw = env.get(f"SG_{spec.name.upper()}")
            if raw is None:
                continue
            kind: type = type(spec.default)
            try:
                if kind is bool:
                    values[spec.name] = _bool(raw)
                elif kind is int:
                    values[spec.name] = int(raw)
                elif kind is float:
                    values[spec.name] = float(raw)
                else:
                    values[spec.name] = raw
            except ValueError as exc:
                wanted = {bool: "true or false", int: "a whole number", float: "a number"}.get(kind, "valid")
                raise SettingsError(f"SG_{spec.name.upper()} must be {wanted}, not {raw!r}") from exc
        settings = cls(**values)  # type: ignore[arg-type]  # each value parsed to its field's type above
        settings.validate()
        return settings

    def validate(self) -> None:
        if not 1 <= self.default_page_size <= self.max_page_size:
            raise SettingsError("SG_DEFAULT_PAGE_SIZE must be between 1 and SG_MAX_PAGE_SIZE")
        if self.max_batch_size < 1 or self.adjacency_cache_limit < 0 or self.cache_ttl_seconds < 1:
            raise SettingsError("batch size, cache limit and TTL must be positive")
        at_least_one = {
            "SG_REDIS_MAX_CONNECTIONS": self.redis_max_connections,
            "SG_SUGGEST_FOLLOWEE_SAMPLE": self.suggest_followee_sample,
            "SG_SUGGEST_PER_FOLLOWEE": self.suggest_per_followee,
            "SG_SUGGEST_CACHE_TTL_SECONDS": self.suggest_cache_ttl_seconds,
            "SG_TOPIC_PARTITIONS": self.topic_partitions,
            "SG_TOPIC_REPLICATION_FACTOR": self.topic_replication_factor,
            "SG_FANOUT_BATCH_SIZE": self.fanout_batch_size,
            "SG_CELEBRITY_THRESHOLD": self.celebrity_threshold,
            "SG_TIMELINE_CAP": self.timeline_cap,
            "SG_RECENT_TWEETS_CAP": self.recent_tweets_cap,
            "SG_TWEET_AUTHOR_TTL_SECONDS": self.tweet_author_ttl_seconds,
        }
        for name, value in at_least_one.items():
            if value < 1:
                raise SettingsError(f"{name} must be at least 1")
        if self.intersection_candidate_limit < 0:
            raise SettingsError("SG_INTERSECTION_CANDIDATE_LIMIT must not be negative")
        if self.kafka_security_protocol not in {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}:
            raise SettingsError("SG_KAFKA_SECURITY_PROTOCOL must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
        if self.kafka_security_protocol.startswith("SASL") and not self.kafka_sasl_mechanism:
            raise SettingsError("SG_KAFKA_SASL_MECHANISM is required with a SASL_* security protocol")
        if len(self.table_prefix) > 200:
            raise SettingsError("SG_TABLE_PREFIX is too long")
        if self.follow_rate_limit < 0 or self.max_following < 0:
            raise SettingsError("SG_FOLLOW_RATE_LIMIT and SG_MAX_FOLLOWING must not be negative (0 turns them off)")
        if self.account_jobs < 0 or self.account_job_lease_seconds < 1 or self.account_job_poll_seconds <= 0:
            raise SettingsError(
                "SG_ACCOUNT_JOBS must not be negative, SG_ACCOUNT_JOB_LEASE_SECONDS must be at least 1"
                " and SG_ACCOUNT_JOB_POLL_SECONDS positive"
            )
        if self.follow_rate_window_seconds < 1:
            raise SettingsError("SG_FOLLOW_RATE_WINDOW_SECONDS must be at least 1")
        if self.dynamodb_endpoint:
            _check_url("SG_DYNAMODB_ENDPOINT", self.dynamodb_endpoint, {"http", "https"})
        for variable, url in (("SG_REDIS_URL", self.redis_url), ("SG_TIMELINE_REDIS_URL", self.timeline_redis_url)):
            if url:
                _check_url(variable, url, {"redis", "rediss", "unix"})
        servers = [part.strip() for part in self.kafka_bootstrap_servers.split(",")]
        if not all(_is_host_port(server) for server in servers):
            raise SettingsError(
                f"SG_KAFKA_BOOTSTRAP_SERVERS must be host:port[,host:port...]: {self.kafka_bootstrap_servers!r}"
            )
        if not _is_host_port(self.grpc_address):
            raise SettingsError(f"SG_GRPC_ADDRESS must be host:port: {self.grpc_address!r}")
        if self.near_cache_entries < 0:
            raise SettingsError(f"SG_NEAR_CACHE_ENTRIES must be 0 or more, not {self.near_cache_entries}")
        if not 1 <= self.serve_processes <= 64:
            raise SettingsError(f"SG_SERVE_PROCESSES must be 1 to 64, not {self.serve_processes}")
        if self.serve_processes > 1 and self.grpc_address.rsplit(":", 1)[1] == "0":
            raise SettingsError("SG_SERVE_PROCESSES above 1 needs a fixed port in SG_GRPC_ADDRESS, not port 0")
        if self.log_level.strip().lower() not in LOG_LEVELS:
            raise SettingsError(f"SG_LOG_LEVEL must be one of {', '.join(LOG_LEVELS)} (not {self.log_level!r})")
        if not 1 <= self.metrics_base_port <= 65_532:
            raise SettingsError("SG_METRICS_BASE_PORT must be a port with three more after it (1-65532)")
        if self.metrics_address and not _is_host_port(self.metrics_address):
            raise SettingsError(f"SG_METRICS_ADDRESS must be host:port (not {self.metrics_address!r})")
        if self.lease_seconds < 1 or self.topic_check_seconds <= 0:
            raise SettingsError("SG_LEASE_SECONDS must be at least 1 and SG_TOPIC_CHECK_SECONDS positive")
        if self.auth_reload_seconds <= 0:
            raise SettingsError("SG_AUTH_RELOAD_SECONDS must be positive")
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise SettingsError("SG_TLS_CERT_FILE and SG_TLS_KEY_FILE go together: set both or neither")
        if self.tls_client_ca_file and not self.tls_cert_file:
            raise SettingsError("SG_TLS_CLIENT_CA_FILE (mTLS) needs SG_TLS_CERT_FILE and SG_TLS_KEY_FILE")

    @property
    def on_aws(self) -> bool:
        """Whether this may be a real deployment: only an endpoint on this machine (DynamoDB Local
        of the local stack and the tests: ``localhost`` or a loopback address) counts as local;
        no endpoint, an AWS endpoint URL, or any other host (a proxy, an alias) counts as AWS."""
        host = (urlsplit(self.dynamodb_endpoint).hostname or "").rstrip(".").lower()
        if host == "localhost" or host.endswith(".localhost"):
            return False
        try:
            return not ipaddress.ip_address(host).is_loopback
        except ValueError:
            return True

    @property
    def page_token_secrets(self) -> tuple[str, ...]:
        """The page-token keys, signing key first; the development key when none is set."""
        secrets = tuple(part.strip() for part in self.page_token_secret.split(",") if part.strip())
        return secrets or (DEV_PAGE_TOKEN_SECRET,)

    def check_serving(self) -> None:
        """Refuse to serve AWS tables with no caller authentication or a guessable page-token key.

        The local stack (SG_DYNAMODB_ENDPOINT on this machine) keeps working with no setup."""
        if not self.on_aws:
            return
        if not self.auth_tokens_file and not self.auth_disabled:
            raise SettingsError(
                "serving AWS tables without caller authentication: set SG_AUTH_TOKENS_FILE"
                " (or SG_AUTH_DISABLED=true to run open on purpose)"
            )
        if DEV_PAGE_TOKEN_SECRET in self.page_token_secrets:
            raise SettingsError("serving AWS tables needs SG_PAGE_TOKEN_SECRET, the same on every replica")

    def table(self, name: str) -> str:
        """The full name of one of the project's tables."""
        return f"{self.table_prefix}{name}"
