"""Which failure is which exit code: the root cause decides, the outermost words explain."""

from __future__ import annotations

import pytest
from aiokafka.errors import KafkaConnectionError
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError
from redis.exceptions import ConnectionError as RedisConnectionError

from graph_service.domain.errors import InvalidTweet, Unavailable
from graph_service.domain.listening import PortInUse
from graph_service.entrypoints.exits import Exit, classify
from graph_service.settings import SettingsError


def client_error(code: str, operation: str = "Query") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, operation)


def wrapped(outer: BaseException, inner: BaseException) -> BaseException:
    """``outer`` as raised ``from inner``."""
    try:
        try:
            raise inner
        except BaseException as caught:
            raise outer from caught
    except BaseException as raised:
        return raised


def test_throttling_past_the_retries_is_an_outage_not_configuration() -> None:
    failure = wrapped(Unavailable("DynamoDB query: ThrottlingException"), client_error("ThrottlingException"))
    assert classify(failure) == (Exit.UNREACHABLE, "a dependency is unreachable: DynamoDB query: ThrottlingException")


def test_missing_credentials_under_an_unavailable_dynamodb_are_configuration() -> None:
    failure = wrapped(Unavailable("DynamoDB query: Unable to locate credentials"), NoCredentialsError())
    assert classify(failure) == (Exit.CONFIGURATION, "bad configuration: Unable to locate credentials")


def test_a_refused_connection_keeps_the_words_of_the_operation() -> None:
    failure = wrapped(Unavailable("DynamoDB query: could not connect"), EndpointConnectionError(endpoint_url="x"))
    assert classify(failure) == (Exit.UNREACHABLE, "a dependency is unreachable: DynamoDB query: could not connect")


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (client_error("ResourceNotFoundException"), Exit.CONFIGURATION),
        (client_error("UnrecognizedClientException"), Exit.CONFIGURATION),
        (SettingsError("SG_X must be a whole number"), Exit.CONFIGURATION),
        (PortInUse("cannot listen on 127.0.0.1:1"), Exit.CONFIGURATION),
        (InvalidTweet("too long"), Exit.CONFIGURATION),
        (RedisConnectionError("Error 111 connecting to 127.0.0.1:1."), Exit.UNREACHABLE),
        (KafkaConnectionError("Unable to bootstrap"), Exit.UNREACHABLE),
        (ConnectionRefusedError(111, "refused"), Exit.UNREACHABLE),
    ],
)
def test_each_kind_of_failure_has_its_code(failure: BaseException, expected: Exit) -> None:
    verdict = classify(failure)
    assert verdict is not None
    assert verdict[0] == expected


def test_redis_and_kafka_failures_name_their_dependency() -> None:
    assert classify(RedisConnectionError("Error 111 connecting to h:1.")) == (
        Exit.UNREACHABLE,
        "a dependency is unreachable: Redis: Error 111 connecting to h:1.",
    )


@pytest.mark.parametrize(
    "failure",
    [
        client_error("ValidationException"),  # a request we built wrong
        KeyError("oops"),
        TimeoutError(),  # an asyncio.wait_for of ours, not a dependency
    ],
)
def test_a_bug_is_not_classified_so_it_keeps_its_traceback(failure: BaseException) -> None:
    assert classify(failure) is None


def test_a_bug_raised_while_handling_a_dynamodb_refusal_stays_a_bug() -> None:
    """Raised in an ``except`` block (``__context__``), not ``from`` it: the refusal does not explain it."""

    def handle() -> None:
        try:
            raise client_error("TransactionCanceledException", "TransactWriteItems")
        except ClientError as refusal:
            raise KeyError(refusal.response["CancellationReasons"])  # noqa: B904 - the bug under test

    with pytest.raises(KeyError) as bug:
        handle()
    assert isinstance(bug.value.__context__, ClientError)
    assert classify(bug.value) is None
