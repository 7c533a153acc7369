"""Each IAM role of the CloudFormation template (``deploy/aws/socialgraph.yaml``) allows the DynamoDB
actions its component is seen calling, and no others (SPEC §7.5).

Seen on the wire: every component talks to DynamoDB Local through a recording proxy of its own
(``tests/support/dynamodb_recorder.py``), which forwards each request unchanged and notes the
operation and every table the request names. The components run for real: ``serve``, ``counters``,
``relay`` and ``fanout`` as ``socialgraph`` processes, the counters and relay Lambda handlers in
this process on stream events, and the operator commands as an operator runs them:
``create-tables`` (on tables an older version left without streams, deletion protection or TTL),
``import``, ``fsck --all --repair-cache`` and ``fsck`` of some users, ``reconcile --fix`` of one
user and of all. The work makes each reach every DynamoDB call it has
(``tests/support/component_workloads.py``). ``socialgraph post``, the local stand-in for the tweet
service, is no operator command of a deployment (the tweet service writes the tweets table): the
test writes its tweet as that service would, unrecorded.

From an operation to the IAM action it needs (AWS Service Authorization Reference, "Actions,
resources, and condition keys for Amazon DynamoDB", and the developer guide's "Using IAM with
DynamoDB transactions"):

- an item, table or Streams operation needs the action of the same name: ``GetItem`` needs
  ``dynamodb:GetItem``, ``Query`` ``dynamodb:Query``, ``DescribeTable``, ``CreateTable``,
  ``UpdateTimeToLive``..., on the table's ARN (a ``Query``/``Scan`` with ``IndexName`` on the
  index's, ``table/T/index/I``);
- ``BatchGetItem`` and ``BatchWriteItem`` are actions of their own (``dynamodb:BatchGetItem``,
  ``dynamodb:BatchWriteItem``), needed on each table in ``RequestItems``;
- ``TransactWriteItems`` and ``TransactGetItems`` are not: each item is authorized as the
  operation it stands for, on its own table: ``Put`` as ``dynamodb:PutItem``, ``Update`` as
  ``dynamodb:UpdateItem``, ``Delete`` as ``dynamodb:DeleteItem``, ``ConditionCheck`` as
  ``dynamodb:ConditionCheckItem``, and a transactional ``Get`` as ``dynamodb:GetItem``;
- DynamoDB Streams operations (``DescribeStream``, ``GetShardIterator``, ``GetRecords``,
  ``ListStreams``; target prefix ``DynamoDBStreams_20120810.``) need the ``dynamodb:`` action of
  the same name on the stream's ARN (``table/T/stream/LABEL``);
- a call DynamoDB refuses (a ``CreateTable`` of a table that exists, a failed condition, the
  ``UpdateContinuousBackups`` DynamoDB Local does not implement) is authorized before it is
  refused: it counts.

A Lambda function's event source mapping reads its stream with the function's execution role
(``DescribeStream``, ``GetShardIterator``, ``GetRecords``, ``ListStreams``: the Lambda developer
guide's execution role permissions for DynamoDB, and the managed ``AWSLambdaDynamoDBExecutionRole``),
so a function's role needs those on the streams of its mappings on top of what its handler calls;
and those streams must be the ones the long-running process of the same consumer reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import redis
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc
from socialgraph_devstack.processes import ManagedProcess

from graph_service.domain.models import Counts, Edge
from graph_service.domain.times import now_us
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import FOLLOWING
from graph_service.settings import Settings
from graph_service.store import items as it
from tests.support.cfn_roles import Grant, TemplateShapeError, load_template, role_grants, stream_triggers
from tests.support.children import Child, child_process, kafka_environment, serve_process
from tests.support.commands import REPO
from tests.support.component_workloads import (
    drive_graph_api,
    drive_home_timeline,
    fanout_environment,
    invoke_counters_lambda,
    invoke_relay_lambda,
    operator_command,
)
from tests.support.drift import plant_counts, plant_n
from tests.support.dynamodb_recorder import Access, RecordingProxy, accesses_of, recording_proxy
from tests.support.graph_calls import counts
from tests.support.polling import eventually
from tests.support.runtimes import drop_tables, make_settings, on_topics_of_its_own, stub_for
from tests.support.servers import STREAMED_ENDPOINTS, trust_as_reset
from tests.support.tables import create_tables
from tests.support.timeline_calls import timeline_stub_for, tweet_store

TEMPLATE = REPO / "deploy" / "aws" / "socialgraph.yaml"
STREAM = "arn:aws:dynamodb:ddblocal:000000000000:table/p_followers/stream/2025-01-01T00:00:00.000"
"""A stream ARN as DynamoDB Local hands it out (for the mapping's own test)."""

ROLES = {
    "ServeTaskRole": "serve",
    "FanoutTaskRole": "fanout",
    "CountersFunctionRole": "counters-lambda",
    "RelayFunctionRole": "relay-lambda",
    "OperationsRole": "operations",
}
"""Each role of the template and the component that runs with it (the recording's name)."""
PROCESS_OF_FUNCTION = {"CountersFunctionRole": "counters", "RelayFunctionRole": "relay"}
"""The long-running process doing a Lambda function's work elsewhere (Kubernetes, a VM)."""
COMPONENTS = ("serve", "counters", "relay", "fanout", "counters-lambda", "relay-lambda", "operations")

TRANSACTION_ITEM_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}
EVENT_SOURCE_MAPPING_READS = ("DescribeStream", "GetRecords", "GetShardIterator", "ListStreams")

UNOBSERVED: dict[str, dict[Grant, str]] = {role: {} for role in ROLES}
"""Grants a role needs that no test can make its component call, each with the reason. Keep it short:
a grant here is one the recording cannot vouch for."""


def grant_of(access: Access, prefix: str) -> Grant:
    """The IAM action, table (short name) and resource kind one recorded access needs."""
    if access.operation in ("TransactWriteItems", "TransactGetItems"):
        action = TRANSACTION_ITEM_ACTIONS[access.part]
    else:
        action = access.operation
    table = access.table.removeprefix(prefix) if access.table.startswith(prefix) else f"<{access.table or '*'}>"
    resource = "stream" if access.stream else "index" if access.index else "table"
    return Grant(f"dynamodb:{action}", table, resource)


@dataclass(frozen=True)
class Observed:
    prefix: str
    accesses: dict[str, set[Access]]
    """Component -> what its proxy recorded."""

    def grants(self, component: str) -> set[Grant]:
        return {grant_of(a, self.prefix) for a in self.accesses[component]}

    def table(self) -> str:
        """Every component's grants, one line each, for failure messages and the docs."""
        return "\n".join(
            f"{component}: " + ", ".join(str(g) for g in sorted(self.grants(component))) for component in COMPONENTS
        )


# -- the recording ------------------------------------------------------------------------------


async def _observe(base: Settings, broker: str, work: Path) -> dict[str, set[Access]]:
    """Every component's work, each through a recording proxy of its own; what each proxy saw."""
    proxies: dict[str, RecordingProxy] = {}
    with contextlib.ExitStack() as stack:
        for name in COMPONENTS:
            proxies[name] = stack.enter_context(recording_proxy(base.dynamodb_endpoint, name))

        def through(name: str) -> Settings:
            return replace(base, dynamodb_endpoint=proxies[name].endpoint)

        # The tables as an older create-tables left them (no streams, no deletion protection, no
        # TTL): this one turns each on, after a CreateTable that finds each there (the calls of a
        # run on finished tables, which the template's are, are a subset).
        await create_tables(base, streams=False)
        await operator_command(through("operations"), "create-tables")
        settings = await on_topics_of_its_own(base, broker, base.table_prefix, partitions=1)
        await _run_components(settings, through, work)
        await invoke_counters_lambda(through("counters-lambda"))
        await invoke_relay_lambda(replace(settings, dynamodb_endpoint=proxies["relay-lambda"].endpoint))
        return {name: proxy.accesses() for name, proxy in proxies.items()}


async def _run_components(settings: Settings, through: Callable[[str], Settings], work: Path) -> None:
    """The four processes and ``import``; the RPCs; then a tweet through the pipeline, and the other
    operator commands. Only ``serve`` is waited for: the consumers read their streams from the start
    whenever they are ready, and the fanout's group from the earliest offset (it takes seconds to
    join); a process that fails to start fails the task group, which cancels the rest."""
    async with contextlib.AsyncExitStack() as stack, asyncio.TaskGroup() as group:  # a failure cancels the rest

        def start(name: str, **extra: str) -> asyncio.Task[Child]:
            if name == "serve":
                return group.create_task(stack.enter_async_context(serve_process(through(name), work / name)))
            return group.create_task(
                stack.enter_async_context(child_process(through(name), name, work / name, **extra))
            )

        serving = start("serve")
        start("counters")
        start("relay", **kafka_environment(settings))
        start("fanout", **fanout_environment(settings))
        operations = through("operations")
        source = work / "edges.csv"
        source.write_text("follower_id,followee_id\n20,21\n22,21\n20,20\nx,21\n")  # users of its own
        imported = group.create_task(operator_command(operations, "import", str(source)))
        serve = await serving
        stub = await stack.enter_async_context(stub_for(serve.port))
        timelines = await stack.enter_async_context(timeline_stub_for(serve.port))
        tweets = await stack.enter_async_context(tweet_store(settings))  # the tweet service's writes

        async def post(author: int, text: str) -> int:
            return (await tweets.post(author, text)).tweet_id

        await drive_graph_api(stub, settings.redis_url)
        await imported
        await asyncio.gather(  # apart: the pipeline writes no follow, the commands no tweet
            drive_home_timeline(timelines, settings, post),
            _operator_commands(settings, operations, stub),
        )


async def _operator_commands(settings: Settings, operations: Settings, stub: pb_grpc.SocialGraphServiceStub) -> None:
    """Once the counters consumer has counted the import, drift planted in the tables: a follow in
    the following table alone, wrong counters, a wrong following cap's count. Then at once: ``fsck``
    of every partition, which finds the planted follow and confirms it by a snapshot of both tables,
    ``fsck`` of two users, which finds nothing, and ``reconcile --fix`` of one user; and last
    ``reconcile --all --fix``, which fixes the rest."""
    await eventually(lambda: counts(stub, 21), lambda found: found == (2, 0), timeout=30)
    dynamo = AsyncDynamo.build(settings)
    try:
        made = Edge(41, now_us())  # 40 -> 41 in the following table only (no stream there: nothing counts it)
        for item in (it.item(it.key(it.EDGE, 40, 41), made), it.item(it.order_key(it.EDGE_ORDER, 40, made), made)):
            await dynamo.call("put_item", TableName=settings.table(FOLLOWING), Item=item)
        await plant_counts(dynamo, settings, {2: Counts(9, 1, 1), 21: Counts(7, 0, 1)})
        await plant_n(dynamo, settings, {20: 5})
    finally:
        dynamo.close()
    everything, users, _ = await asyncio.gather(
        operator_command(operations, "fsck", "--all", "--repair-cache", "--settle-seconds", "0", expect=1),
        operator_command(operations, "fsck", "1", "5", "--settle-seconds", "0"),
        operator_command(operations, "reconcile", "2", "--fix", "--settle-seconds", "0.05"),
    )
    assert "edge_one_sided user=40 other=41" in everything, everything
    assert users.splitlines()[-1].startswith("fsck: no violation"), users
    await operator_command(operations, "reconcile", "--all", "--fix", "--settle-seconds", "0.05")


@pytest.fixture(scope="module")
def template() -> dict[str, object]:
    assert TEMPLATE.exists(), f"{TEMPLATE.relative_to(REPO)} is missing"
    return load_template(TEMPLATE)


@pytest.fixture(scope="module")
def observed(
    dynamodb_local: str, redis_node: ManagedProcess, kafka_broker: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Observed]:
    """What each component called, recorded once for the module."""
    client = redis.Redis(port=redis_node.port)
    client.flushall()
    trust_as_reset(client)
    client.close()
    base = make_settings(dynamodb_local, f"redis://127.0.0.1:{redis_node.port}/0")
    STREAMED_ENDPOINTS.add(dynamodb_local)  # create-tables makes the tables with their streams
    try:
        accesses = asyncio.run(_observe(base, kafka_broker, tmp_path_factory.mktemp("iam")))
        yield Observed(base.table_prefix, accesses)
    finally:
        asyncio.run(drop_tables(base))


# -- the checks ---------------------------------------------------------------------------------


def needed(role: str, template: dict[str, object], observed: Observed) -> dict[Grant, str]:
    """Every grant the role needs, with who needs it (its component, or its event source mapping)."""
    found = {grant: ROLES[role] for grant in observed.grants(ROLES[role])}
    for table in stream_triggers(template).get(role, set()):
        for action in EVENT_SOURCE_MAPPING_READS:
            found.setdefault(Grant(f"dynamodb:{action}", table, "stream"), "its event source mapping")
    return found


@pytest.mark.parametrize("role", sorted(ROLES))
def test_the_role_allows_what_its_component_calls_and_nothing_else(
    role: str, template: dict[str, object], observed: Observed
) -> None:
    """Every (action, table) its component was seen calling is granted, and nothing else is."""
    wanted = needed(role, template, observed)
    granted = role_grants(template, role)
    excused = UNOBSERVED[role]
    problems = [
        *(f"  missing: {g} (called by {wanted[g]})" for g in sorted(set(wanted) - granted)),
        *(
            f"  never called: {g} (remove it, or list it in UNOBSERVED with why)"
            for g in sorted(granted - set(wanted) - set(excused))
        ),
        *(
            f"  UNOBSERVED lists {g}, which is called or not granted: drop it"
            for g in sorted(g for g in excused if g in wanted or g not in granted)
        ),
    ]
    assert not problems, "\n".join(
        [f"{role} in {TEMPLATE.relative_to(REPO)}:", *problems, "what each component called:", observed.table()]
    )


@pytest.mark.parametrize("role", sorted(PROCESS_OF_FUNCTION))
def test_a_function_is_triggered_by_the_streams_its_process_reads(
    role: str, template: dict[str, object], observed: Observed
) -> None:
    """The function's event source mappings are on the streams its long-running process reads."""
    process = PROCESS_OF_FUNCTION[role]
    read = {g.table for g in observed.grants(process) if g.action == "dynamodb:GetRecords"}
    assert read, f"the {process} process read no stream"
    assert stream_triggers(template).get(role, set()) == read


def test_each_operation_maps_to_the_actions_iam_checks() -> None:
    """The mapping above, on requests as botocore sends them (no server needed)."""
    prefix = "p_"
    transaction = {
        "TransactItems": [
            {"Put": {"TableName": "p_followers", "Item": {}}},
            {"Update": {"TableName": "p_users", "Key": {}}},
            {"Delete": {"TableName": "p_following", "Key": {}}},
            {"ConditionCheck": {"TableName": "p_followers", "Key": {}, "ConditionExpression": "x"}},
        ]
    }
    iterators = {"it-1": "p_followers"}
    cases = {
        ("DynamoDB_20120810.TransactWriteItems", json.dumps(transaction)): {
            Grant("dynamodb:PutItem", "followers", "table"),
            Grant("dynamodb:UpdateItem", "users", "table"),
            Grant("dynamodb:DeleteItem", "following", "table"),
            Grant("dynamodb:ConditionCheckItem", "followers", "table"),
        },
        ("DynamoDB_20120810.TransactGetItems", '{"TransactItems": [{"Get": {"TableName": "p_users", "Key": {}}}]}'): {
            Grant("dynamodb:GetItem", "users", "table")
        },
        ("DynamoDB_20120810.BatchGetItem", '{"RequestItems": {"p_users": {"Keys": []}, "p_tweets": {"Keys": []}}}'): {
            Grant("dynamodb:BatchGetItem", "users", "table"),
            Grant("dynamodb:BatchGetItem", "tweets", "table"),
        },
        ("DynamoDB_20120810.BatchWriteItem", '{"RequestItems": {"p_users": [{"PutRequest": {"Item": {}}}]}}'): {
            Grant("dynamodb:BatchWriteItem", "users", "table")
        },
        ("DynamoDB_20120810.Query", '{"TableName": "p_followers", "IndexName": "by_at"}'): {
            Grant("dynamodb:Query", "followers", "index")
        },
        ("DynamoDB_20120810.CreateTable", '{"TableName": "p_users"}'): {
            Grant("dynamodb:CreateTable", "users", "table")
        },
        ("DynamoDBStreams_20120810.DescribeStream", json.dumps({"StreamArn": STREAM})): {
            Grant("dynamodb:DescribeStream", "followers", "stream")
        },
        ("DynamoDBStreams_20120810.GetRecords", '{"ShardIterator": "it-1"}'): {
            Grant("dynamodb:GetRecords", "followers", "stream")
        },
        ("DynamoDBStreams_20120810.GetRecords", '{"ShardIterator": "never-handed-out"}'): {
            Grant("dynamodb:GetRecords", "<?>", "stream")
        },
    }
    for (target, body), expected in cases.items():
        found = {grant_of(a, prefix) for a in accesses_of(target, json.loads(body), iterators)}
        assert found == expected, target


ALLOW = {"Effect": "Allow"}


@pytest.mark.parametrize(
    ("statement", "refusal"),
    [
        (ALLOW | {"Action": "dynamodb:Get*", "Resource": {"Fn::GetAtt": ["Users", "Arn"]}}, "wildcard actions"),
        (ALLOW | {"Action": "dynamodb:GetItem", "Resource": "*"}, "cannot read"),
        (ALLOW | {"Action": "dynamodb:GetItem", "Resource": {"Fn::Sub": "${Users.Arn}*"}}, "cannot read"),
        (ALLOW | {"NotAction": "dynamodb:DeleteTable", "Resource": "*"}, "NotAction"),
        (ALLOW | {"Action": "*", "Resource": "*"}, "wildcard actions"),
        (
            {"Fn::If": ["Kms", ALLOW | {"Action": "dynamodb:Scan", "Resource": "*"}, {"Ref": "AWS::NoValue"}]},
            "cannot read",
        ),
    ],
)
def test_a_grant_the_check_cannot_read_is_refused_not_skipped(statement: dict[str, object], refusal: str) -> None:
    """A statement that might allow more than it names fails the check instead of passing unread."""
    template = {
        "Resources": {
            "Users": {"Type": "AWS::DynamoDB::Table", "Metadata": {"socialgraph:table": "users"}},
            "Role": {
                "Type": "AWS::IAM::Role",
                "Properties": {"Policies": [{"PolicyName": "p", "PolicyDocument": {"Statement": [statement]}}]},
            },
        }
    }
    with pytest.raises(TemplateShapeError, match=refusal):
        role_grants(template, "Role")
