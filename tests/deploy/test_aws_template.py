"""The AWS CloudFormation stack (``deploy/aws/socialgraph.yaml``): cfn-lint and checkov pass, its tables
are exactly what ``socialgraph create-tables`` makes on DynamoDB Local, and what the comments promise
holds, checked against the program itself (its settings, its commands, its Lambda handlers, the
Kubernetes manifests that run the same processes). No AWS account: the template is read, not deployed.

The IAM roles are checked against the DynamoDB calls each component makes in
``tests/deploy/test_iam_roles.py``.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml  # type: ignore[import-untyped]  # types-PyYAML is not a dependency
from botocore.exceptions import ClientError
from socialgraph_devstack.install import CHECKOV_VERSION, ensure_checkov

from graph_service.dynamodb import tables
from graph_service.dynamodb.provisioning import ensure_tables
from graph_service.dynamodb.tables import FOLLOWERS, TWEETS, TableNames, table_specs
from graph_service.entrypoints import lambda_handler, relay_lambda
from graph_service.entrypoints.cli import COMMANDS, build_parser
from graph_service.settings import Settings, SettingsError
from tests.deploy.test_kubernetes import OVERDUE_SECONDS, SECRET_SETTINGS, SETTINGS
from tests.support.cfn_roles import load_template
from tests.support.cfn_roles import referenced_id as ref_name
from tests.support.commands import REPO, command_environment, socialgraph
from tests.support.servers import STREAMED_ENDPOINTS
from tests.support.tables import drop_tables

TEMPLATE = REPO / "deploy" / "aws" / "socialgraph.yaml"
CONTAINERFILE = REPO / "deploy" / "image" / "Containerfile"
KUBERNETES = REPO / "deploy" / "kubernetes" / "base"
FARGATE_MOST_STOP_TIMEOUT = 120
"""ECS on Fargate waits at most this long between SIGTERM and SIGKILL."""
URL_SETTINGS = {"SG_REDIS_URL", "SG_TIMELINE_REDIS_URL"}
"""Not secrets to ``Settings``, but a Redis URL may carry its password: they come from secrets too."""
OPERATOR_COMMANDS = ("create-tables", "create-topics", "import", "fsck", "reconcile")
"""What the operations task definition runs (``aws ecs run-task`` with a command override)."""

EXAMPLES = {
    "Image": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/platform/socialgraph:0.1.0",
    "VpcId": "vpc-0123456789abcdef0",
    "ServiceSubnetIds": "subnet-0123456789abcdef0,subnet-0fedcba9876543210",
    "LoadBalancerSubnetIds": "subnet-0123456789abcdef1,subnet-0fedcba9876543211",
    "CallerCidr": "10.0.0.0/8",
    "DependenciesCidr": "10.20.0.0/16",
    "CertificateArn": "arn:aws:acm:eu-west-1:123456789012:certificate/0b8a5c5e-1b4e-4e6f-9c39-2b6c5f2d1a01",
    "RedisUrlSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:socialgraph/redis-url-AbCdEf",
    "PageTokenSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:socialgraph/page-token-AbCdEf",
    "CallersFileSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:socialgraph/callers-AbCdEf",
    "KafkaBootstrapServers": "b-1.sg.abc123.c2.kafka.eu-west-1.amazonaws.com:9096,b-2.sg.abc123.kafka.aws:9096",
    "KafkaSaslUsername": "socialgraph",
    "KafkaSaslPasswordSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:socialgraph/kafka-AbCdEf",
}
"""A value each parameter without a usable default could be given: the required ones, and those a
SASL protocol (the default) requires."""
SECRET_VALUES = {
    "RedisUrlSecretArn": "rediss://:password@master.cache.abc123.euw1.cache.amazonaws.com:6379/0",
    "TimelineRedisUrlSecretArn": "rediss://:password@timelines.abc123.euw1.cache.amazonaws.com:6379/0",
    "PageTokenSecretArn": "0123456789abcdef0123456789abcdef",
    "KafkaSaslPasswordSecretArn": "kafka-password",
    "CallersFileSecretArn": '[[caller]]\nname = "feed"\n',
}
"""What each secret could hold, for the settings the processes would start with."""
PSEUDO = {"AWS::Region": "eu-west-1", "AWS::AccountId": "123456789012", "AWS::Partition": "aws", "AWS::StackName": "sg"}


# -- reading the template -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template(TEMPLATE)


def resources(template: Mapping[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: res for name, res in template["Resources"].items() if res["Type"] == kind}


@dataclass
class Evaluator:
    """Resolves the intrinsic functions the template uses, for one set of parameter values."""

    template: Mapping[str, Any]
    parameters: dict[str, str]

    @classmethod
    def with_examples(cls, template: Mapping[str, Any], **overrides: str) -> Evaluator:
        values = {name: str(spec.get("Default", "")) for name, spec in template["Parameters"].items()}
        return cls(template, {**values, **EXAMPLES, **overrides})

    def condition(self, name: str) -> bool:
        return bool(self.value(self.template["Conditions"][name]))

    def value(self, node: Any) -> Any:
        if isinstance(node, list):
            return [v for v in (self.value(item) for item in node) if v is not NO_VALUE]
        if not isinstance(node, Mapping):
            return node
        if len(node) != 1:
            return {k: v for k, v in ((k, self.value(item)) for k, item in node.items()) if v is not NO_VALUE}
        (function, argument), *_ = node.items()
        if function == "Ref":
            if argument == "AWS::NoValue":
                return NO_VALUE
            if argument in PSEUDO:
                return PSEUDO[argument]
            if argument in self.parameters:
                return self.parameters[argument]
            return f"<{argument}>"  # a resource
        if function == "Fn::If":
            name, then, otherwise = argument
            return self.value(then if self.condition(name) else otherwise)
        if function == "Fn::Equals":
            first, second = (self.value(a) for a in argument)
            return first == second
        if function == "Fn::Not":
            return not self.value(argument[0])
        if function == "Fn::Or":
            return any(self.value(a) for a in argument)
        if function == "Fn::And":
            return all(self.value(a) for a in argument)
        if function == "Condition":
            return self.condition(argument)
        if function == "Fn::Sub":
            return re.sub(r"\$\{([^}]+)\}", lambda m: str(self.value({"Ref": m[1]})), argument)
        if function == "Fn::GetAtt":
            return f"<{argument[0]}.{argument[1]}>"
        return {function: self.value(argument)}


NO_VALUE = object()


@dataclass(frozen=True)
class Component:
    """A container of a task definition, or a Lambda function: what it runs and its environment."""

    name: str
    command: str
    environment: Mapping[str, Any]
    """Variable -> its template value (unresolved)."""
    secrets: Mapping[str, Any]
    """Variable -> the ``ValueFrom`` of an ECS secret (both branches of an ``!If``)."""
    secret_entries: list[Any]
    """The ``Secrets`` as the template has them, to resolve for one set of parameters."""


def task_containers(template: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Container name -> its definition, over every task definition."""
    found = {}
    for task in resources(template, "AWS::ECS::TaskDefinition").values():
        for container in task["Properties"]["ContainerDefinitions"]:
            found[container["Name"]] = container
    return found


def conditional(entries: list[Any]) -> Iterator[Mapping[str, Any]]:
    """The entries of a list, each ``!If`` standing for both of its branches."""
    for entry in entries:
        if isinstance(entry, Mapping) and "Fn::If" in entry:
            yield from conditional([b for b in entry["Fn::If"][1:] if ref_name(b) != "AWS::NoValue"])
        else:
            yield entry


def components(template: Mapping[str, Any]) -> list[Component]:
    found = []
    for name, container in task_containers(template).items():
        if name == "callers-file":
            continue
        command = container["Command"][0]
        environment = {entry["Name"]: entry["Value"] for entry in container.get("Environment", [])}
        secrets = {entry["Name"]: entry["ValueFrom"] for entry in conditional(container.get("Secrets", []))}
        found.append(Component(name, command, environment, secrets, container.get("Secrets", [])))
    for name, function in resources(template, "AWS::Lambda::Function").items():
        handler = function["Properties"]["ImageConfig"]["Command"][0]
        command = {lambda_handler.__name__: "counters", relay_lambda.__name__: "relay"}[handler.rpartition(".")[0]]
        variables = function["Properties"]["Environment"]["Variables"]
        found.append(Component(name, command, dict(variables), {}, []))
    return found


def reads_of(component: Component) -> set[str]:
    """The settings (field names) the component's command reads; the operations task runs any
    operator command."""
    commands = OPERATOR_COMMANDS if component.command == "create-tables" else (component.command,)
    return {field for command in commands for field in COMMANDS[command].reads}


def environment_of(evaluator: Evaluator, component: Component) -> dict[str, str]:
    """The variables the component starts with, its secrets holding what ``SECRET_VALUES`` says."""
    env = {}
    for variable, value in component.environment.items():
        resolved = evaluator.value(value)
        if resolved is NO_VALUE:
            continue
        if "{{resolve:secretsmanager:" in str(resolved):
            parameter = next(
                p for p in SECRET_VALUES if evaluator.parameters[p] and evaluator.parameters[p] in resolved
            )
            resolved = SECRET_VALUES[parameter]
        env[variable] = str(resolved)
    for entry in evaluator.value(component.secret_entries):
        parameter = next(p for p in SECRET_VALUES if evaluator.parameters[p] == entry["ValueFrom"])
        env[entry["Name"]] = SECRET_VALUES[parameter]
    return env


# -- cfn-lint and checkov (started at once, in the background: they take most of this module's time) --


@dataclass
class Linters:
    cfn_lint: subprocess.Popen[str]
    checkov: subprocess.Popen[str]

    def wait(self, process: subprocess.Popen[str]) -> tuple[int, str, str]:
        out, err = process.communicate(timeout=240)
        return process.returncode, out, err


@pytest.fixture(scope="module", autouse=True)
def linters() -> Iterator[Linters]:
    """``cfn-lint`` and ``checkov`` on the template, running while the other tests do."""
    checkov = ensure_checkov()

    def start(*command: str) -> subprocess.Popen[str]:
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)

    started = Linters(
        start(str(Path(sys.executable).with_name("cfn-lint")), "--format", "parseable", str(TEMPLATE)),
        # --skip-download: nothing fetched from the vendor's platform (no account, no network).
        start(str(checkov), "-f", str(TEMPLATE), "--framework", "cloudformation", "--skip-download", "-o", "json"),
    )
    yield started
    for process in (started.cfn_lint, started.checkov):
        if process.poll() is None:
            process.kill()
            process.wait()


# -- the tables -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def made_by_create_tables(dynamodb_local: str) -> Iterator[tuple[Settings, dict[str, dict[str, Any]]]]:
    """``socialgraph create-tables`` run on DynamoDB Local, and how DynamoDB describes each table it made
    (``Table`` of DescribeTable, plus ``TimeToLive`` of DescribeTimeToLive)."""
    settings = Settings(dynamodb_endpoint=dynamodb_local, table_prefix=f"a{uuid.uuid4().hex[:10]}_")
    STREAMED_ENDPOINTS.add(dynamodb_local)  # the tables get streams
    env = command_environment(settings, SG_LOG_LEVEL="error")
    try:
        done = socialgraph(env, "create-tables")
        assert done.returncode == 0, done.stderr
        client = boto3.client("dynamodb", endpoint_url=dynamodb_local, region_name=settings.aws_region)
        described = {}
        for spec in table_specs(TableNames(settings.table_prefix)):
            name = spec["TableName"]
            table = client.describe_table(TableName=name)["Table"]
            table["TimeToLive"] = client.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
            described[name] = table
        yield settings, described
    finally:
        asyncio.run(drop_tables(settings))


def described_shape(table: Mapping[str, Any]) -> dict[str, Any]:
    """What a table is, as DescribeTable and DescribeTimeToLive say it (no name, no state)."""
    stream = table.get("StreamSpecification", {})
    ttl = table["TimeToLive"]
    return {
        "KeySchema": [dict(k) for k in table["KeySchema"]],
        "AttributeDefinitions": sorted((d["AttributeName"], d["AttributeType"]) for d in table["AttributeDefinitions"]),
        "BillingMode": table.get("BillingModeSummary", {}).get("BillingMode", "PROVISIONED"),
        "StreamViewType": stream.get("StreamViewType") if stream.get("StreamEnabled") else None,
        "TimeToLive": ttl.get("AttributeName") if ttl.get("TimeToLiveStatus") in {"ENABLED", "ENABLING"} else None,
        "Indexes": sorted(
            i["IndexName"] for i in [*table.get("GlobalSecondaryIndexes", []), *table.get("LocalSecondaryIndexes", [])]
        ),
        "DeletionProtectionEnabled": bool(table.get("DeletionProtectionEnabled")),
    }


def template_shape(properties: Mapping[str, Any]) -> dict[str, Any]:
    """The same, as the template's ``AWS::DynamoDB::Table`` declares it."""
    stream = properties.get("StreamSpecification")
    ttl = properties.get("TimeToLiveSpecification")
    return {
        "KeySchema": [dict(k) for k in properties["KeySchema"]],
        "AttributeDefinitions": sorted(
            (d["AttributeName"], d["AttributeType"]) for d in properties["AttributeDefinitions"]
        ),
        "BillingMode": properties.get("BillingMode", "PROVISIONED"),
        "StreamViewType": stream["StreamViewType"] if stream else None,
        "TimeToLive": ttl["AttributeName"] if ttl and ttl.get("Enabled") else None,
        "Indexes": sorted(
            i["IndexName"]
            for i in [*properties.get("GlobalSecondaryIndexes", []), *properties.get("LocalSecondaryIndexes", [])]
        ),
        "DeletionProtectionEnabled": bool(properties.get("DeletionProtectionEnabled")),
    }


def test_the_tables_are_what_create_tables_makes(
    template: dict[str, Any], made_by_create_tables: tuple[Settings, dict[str, dict[str, Any]]]
) -> None:
    """The same five tables (names from TablePrefix, one ``socialgraph:table`` each), and each the same
    on both sides: keys, attribute types, billing mode, stream view type, TTL attribute, no index,
    deletion protection. A change on either side fails here."""
    settings, described = made_by_create_tables
    evaluator = Evaluator.with_examples(template, TablePrefix=settings.table_prefix)
    declared = {}
    for logical_id, table in resources(template, "AWS::DynamoDB::Table").items():
        name = evaluator.value(table["Properties"]["TableName"])
        short = table.get("Metadata", {}).get("socialgraph:table")
        assert name == settings.table(str(short)), f"{logical_id}: {name} is not socialgraph:table {short}"
        declared[name] = template_shape(table["Properties"])
    assert set(declared) == set(described), "the template and create-tables make different tables"
    for name, table in described.items():
        assert template_shape_matches(declared[name], described_shape(table)), name


def template_shape_matches(declared: dict[str, Any], described: dict[str, Any]) -> bool:
    differences = {key: (declared[key], described[key]) for key in declared if declared[key] != described[key]}
    assert not differences, f"template != create-tables: {differences}"
    return True


def test_every_table_is_protected_and_kept(template: dict[str, Any]) -> None:
    """Point-in-time recovery on, deletion protection on, kept when the stack is deleted or would
    replace it, encrypted with KmsKeyArn when one is given (AWS owned key otherwise). DynamoDB Local
    has no point-in-time recovery, so this half is read from the template alone."""
    with_key = Evaluator.with_examples(template, KmsKeyArn="arn:aws:kms:eu-west-1:123456789012:key/" + "0" * 36)
    without = Evaluator.with_examples(template)
    for logical_id, table in resources(template, "AWS::DynamoDB::Table").items():
        properties = table["Properties"]
        assert table.get("DeletionPolicy") == "Retain", logical_id
        assert table.get("UpdateReplacePolicy") == "Retain", logical_id
        assert properties["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}, logical_id
        assert properties["DeletionProtectionEnabled"] is True, logical_id
        assert with_key.value(properties["SSESpecification"]) == {
            "SSEEnabled": True,
            "SSEType": "KMS",
            "KMSMasterKeyId": with_key.parameters["KmsKeyArn"],
        }
        assert without.value(properties["SSESpecification"]) == {"SSEEnabled": False}


def test_create_tables_protects_tables_that_exist(dynamodb_local: str) -> None:
    """Tables made unprotected (as the local stack and the tests make them) get deletion protection
    from ``socialgraph create-tables``, which changes nothing else of them and creates nothing; a
    second run finds nothing to do. (Point-in-time recovery: DynamoDB Local refuses the call as an
    unknown operation, and the command goes on without it.)"""
    settings = Settings(dynamodb_endpoint=dynamodb_local, table_prefix=f"b{uuid.uuid4().hex[:10]}_")
    STREAMED_ENDPOINTS.add(dynamodb_local)
    env = command_environment(settings, SG_LOG_LEVEL="error")
    client = boto3.client("dynamodb", endpoint_url=dynamodb_local, region_name=settings.aws_region)
    try:
        asyncio.run(ensure_tables(settings))
        names = [spec["TableName"] for spec in table_specs(TableNames(settings.table_prefix))]
        assert not any(client.describe_table(TableName=n)["Table"].get("DeletionProtectionEnabled") for n in names)
        for _ in range(2):
            done = socialgraph(env, "create-tables")
            assert done.returncode == 0, done.stderr
            assert "created: nothing (all tables exist)" in done.stdout
            assert all(client.describe_table(TableName=n)["Table"]["DeletionProtectionEnabled"] for n in names)
    finally:
        asyncio.run(drop_tables(settings))


def test_tables_that_exist_can_be_imported(template: dict[str, Any], tmp_path: Path) -> None:
    """``deploy/aws/tables_import.py`` writes an import change set's template, the five tables exactly
    as the stack declares them (each with its DeletionPolicy, which an import requires) with what they
    use and nothing else, and the name of each table to adopt for a given TablePrefix."""
    done = subprocess.run(
        [
            sys.executable,
            str(TEMPLATE.with_name("tables_import.py")),
            "--table-prefix",
            "prod_",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / "tables.json").read_text())
    declared = json.loads(json.dumps(resources(template, "AWS::DynamoDB::Table")))
    assert written["Resources"] == declared
    assert all(table["DeletionPolicy"] == "Retain" for table in written["Resources"].values())
    assert set(written["Parameters"]) == {"TablePrefix", "KmsKeyArn"}
    assert written["Parameters"]["TablePrefix"] == json.loads(json.dumps(template["Parameters"]["TablePrefix"]))
    assert set(written["Conditions"]) == {"HasKmsKey"}
    imports = json.loads((tmp_path / "resources-to-import.json").read_text())
    assert {(i["LogicalResourceId"], i["ResourceIdentifier"]["TableName"]) for i in imports} == {
        (logical_id, f"prod_{table['Metadata']['socialgraph:table']}") for logical_id, table in declared.items()
    }


class AwsLikeDynamo:
    """What ``create_tables`` calls, answered as DynamoDB on AWS would for tables that exist: the
    calls DynamoDB Local refuses (point-in-time recovery) succeed, the first one after a table's
    creation refused as DynamoDB refuses it while the table's backups are not ready yet."""

    def __init__(self, *, exists: bool) -> None:
        self.exists = exists
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.backups_refused: set[str] = set()

    async def call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        self.calls.append((operation, kwargs))
        name = kwargs.get("TableName", "")
        if operation == "create_table" and self.exists:
            raise ClientError({"Error": {"Code": "ResourceInUseException"}}, operation)
        if operation == "describe_table":
            return {"Table": {"TableStatus": "ACTIVE", "StreamSpecification": {"StreamEnabled": True}}}
        if operation == "update_continuous_backups" and name not in self.backups_refused:
            self.backups_refused.add(name)
            raise ClientError({"Error": {"Code": "ContinuousBackupsUnavailableException"}}, operation)
        if operation == "describe_time_to_live":
            return {"TimeToLiveDescription": {"TimeToLiveStatus": "ENABLED"}}
        return {}


@pytest.mark.parametrize("exists", [False, True])
def test_create_tables_asks_aws_for_protection(exists: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """What DynamoDB Local cannot show: on AWS the command turns point-in-time recovery on for every
    table (waiting while a new table's backups are not ready), creates tables with deletion
    protection and turns it on where an existing table lacks it; without ``protect`` (the local stack,
    the tests) it does neither."""
    monkeypatch.setattr(tables, "BACKUPS_RETRY_SECONDS", 0.0)
    deployment = TableNames(Settings().table_prefix)
    names = {spec["TableName"] for spec in table_specs(deployment)}
    fake = AwsLikeDynamo(exists=exists)
    asyncio.run(tables.create_tables(fake, deployment, protect=True))  # type: ignore[arg-type]  # a fake AsyncDynamo
    recovery = [k for op, k in fake.calls if op == "update_continuous_backups"]
    assert {k["TableName"] for k in recovery} == names
    assert len(recovery) == 2 * len(names)  # refused once each, then on
    assert all(k["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True} for k in recovery)
    assert all(k["DeletionProtectionEnabled"] is True for op, k in fake.calls if op == "create_table")
    protected = {k["TableName"] for op, k in fake.calls if op == "update_table" and k.get("DeletionProtectionEnabled")}
    assert protected == names  # the fake's tables never say they are protected
    unprotected = AwsLikeDynamo(exists=exists)
    asyncio.run(tables.create_tables(unprotected, deployment))  # type: ignore[arg-type]  # a fake AsyncDynamo
    assert not [
        op for op, k in unprotected.calls if op == "update_continuous_backups" or "DeletionProtectionEnabled" in k
    ]


# -- serve and fanout on ECS ------------------------------------------------------------------------


def test_draining_outlasts_the_shutdown_grace(template: dict[str, Any]) -> None:
    """serve and fanout: StopTimeout (SIGTERM to SIGKILL) exceeds the shutdown grace each is given
    plus the 2 s after which a process exits anyway, and stays within Fargate's 120 s; serve's target
    group keeps a deregistered task's calls longer than that grace too (ECS waits for it before the
    SIGTERM). Both set the grace explicitly."""
    containers = task_containers(template)
    evaluator = Evaluator.with_examples(template)
    for name in ("serve", "fanout"):
        container = containers[name]
        environment = {entry["Name"]: evaluator.value(entry["Value"]) for entry in container["Environment"]}
        assert "SG_SHUTDOWN_GRACE_SECONDS" in environment, f"{name} leaves the grace to the default"
        grace = Settings.from_env(environment).shutdown_grace_seconds
        assert grace + OVERDUE_SECONDS < container["StopTimeout"] <= FARGATE_MOST_STOP_TIMEOUT, name
    (group,) = resources(template, "AWS::ElasticLoadBalancingV2::TargetGroup").values()
    attributes = {a["Key"]: a["Value"] for a in group["Properties"]["TargetGroupAttributes"]}
    serve_grace = float(
        next(e["Value"] for e in containers["serve"]["Environment"] if e["Name"] == "SG_SHUTDOWN_GRACE_SECONDS")
    )
    assert int(attributes["deregistration_delay.timeout_seconds"]) > serve_grace + OVERDUE_SECONDS


def test_serve_is_behind_a_grpc_load_balancer(template: dict[str, Any]) -> None:
    """An HTTPS listener with the certificate parameter forwards to a gRPC target group, health-checked
    on the standard health service (code 0), on the port serve listens on (SG_GRPC_ADDRESS), which
    the service registers; the listener is TLS 1.2 or newer."""
    (listener,) = resources(template, "AWS::ElasticLoadBalancingV2::Listener").values()
    (group_id, group), *_ = resources(template, "AWS::ElasticLoadBalancingV2::TargetGroup").items()
    listener = listener["Properties"]
    assert (listener["Protocol"], listener["Port"]) == ("HTTPS", 443)
    assert [ref_name(c["CertificateArn"]) for c in listener["Certificates"]] == ["CertificateArn"]
    assert "TLS13-1-2" in listener["SslPolicy"]
    assert [ref_name(a["TargetGroupArn"]) for a in listener["DefaultActions"]] == [group_id]
    properties = group["Properties"]
    assert properties["ProtocolVersion"] == "GRPC"
    assert properties["HealthCheckPath"] == "/grpc.health.v1.Health/Check"
    assert properties["Matcher"] == {"GrpcCode": "0"}
    assert properties["TargetType"] == "ip"  # awsvpc tasks
    serve = task_containers(template)["serve"]
    listens = int(next(e["Value"] for e in serve["Environment"] if e["Name"] == "SG_GRPC_ADDRESS").rpartition(":")[2])
    assert properties["Port"] == listens
    assert listens in {m["ContainerPort"] for m in serve["PortMappings"]}
    (service,) = [s for s in resources(template, "AWS::ECS::Service").values() if "LoadBalancers" in s["Properties"]]
    (registered,) = service["Properties"]["LoadBalancers"]
    assert (registered["ContainerName"], registered["ContainerPort"], ref_name(registered["TargetGroupArn"])) == (
        "serve",
        listens,
        group_id,
    )


def test_services_run_real_commands_from_the_image(template: dict[str, Any]) -> None:
    """Every container and function runs the Image parameter; each container's command is one the
    real ``socialgraph`` parser takes, serve and fanout run their own; the health checks and the
    Lambda entry point use the image's own Python and health check (deploy/image), which exist there."""
    containers = task_containers(template)
    for name, container in containers.items():
        assert ref_name(container["Image"]) == "Image", name
        if name == "callers-file":
            continue
        try:
            build_parser(container["Command"]).parse_args(container["Command"])
        except SystemExit as exc:
            pytest.fail(f"{name}: socialgraph {' '.join(container['Command'])} is refused (exit {exc.code})")
        assert "EntryPoint" not in container, f"{name}: the image's entrypoint is socialgraph"
    assert containers["serve"]["Command"] == ["serve"]
    assert containers["fanout"]["Command"] == ["fanout"]
    image = CONTAINERFILE.read_text()
    assert 'ENTRYPOINT ["/opt/socialgraph/bin/socialgraph"]' in image
    assert "COPY healthcheck.py /opt/socialgraph/healthcheck.py" in image
    for name in ("serve", "fanout"):
        check = containers[name]["HealthCheck"]["Command"]
        assert check == ["CMD", "/opt/socialgraph/bin/python", "/opt/socialgraph/healthcheck.py", name]
    for name, function in resources(template, "AWS::Lambda::Function").items():
        properties = function["Properties"]
        assert properties["PackageType"] == "Image"
        assert ref_name(properties["Code"]["ImageUri"]) == "Image", name
        assert properties["ImageConfig"]["EntryPoint"] == ["/opt/socialgraph/bin/python", "-m", "awslambdaric"]
    assert importlib.util.find_spec("awslambdaric.__main__") is not None, "the runtime interface client is missing"


def test_each_handler_exists_and_answers_in_the_partial_batch_shape(
    template: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each function's handler is a function of the package, and it answers a batch it finished with
    ``{"batchItemFailures": []}``: the shape ReportBatchItemFailures reads (an empty list: nothing to
    retry; a failure raises, and the batch is retried, bisected)."""

    class Finished:
        def invoke(self, event: dict[str, Any]) -> dict[str, int]:
            return {}

    for function in resources(template, "AWS::Lambda::Function").values():
        module_name, _, attribute = function["Properties"]["ImageConfig"]["Command"][0].rpartition(".")
        module = importlib.import_module(module_name)
        handler = getattr(module, attribute)
        assert callable(handler)
        monkeypatch.setattr(module._container, "current", lambda *args: Finished())
        assert handler({"Records": []}, None) == {"batchItemFailures": []}


def test_the_triggers_read_the_streams_their_handlers_take(template: dict[str, Any]) -> None:
    """counters: the followers stream; relay: the tweets and followers streams, the tables
    ``relay_lambda.relay_sources`` converts (a record of another table fails the batch). Every mapping starts at the
    stream's oldest record, bisects a failing batch, reads partial batch responses, gives up after
    finite retries and record age, and then describes the batch on the failure queue, which the
    function's role may write to."""
    settings = Settings()
    tables = {ref: t["Metadata"]["socialgraph:table"] for ref, t in resources(template, "AWS::DynamoDB::Table").items()}
    relay_tables = set(relay_lambda.relay_sources(settings))
    wanted = {
        "counters": {FOLLOWERS},
        "relay": {name.removeprefix(settings.table_prefix) for name in relay_tables},
    }
    assert wanted["relay"] == {TWEETS, FOLLOWERS}
    functions = resources(template, "AWS::Lambda::Function")
    read: dict[str, set[str]] = {}
    for name, mapping in resources(template, "AWS::Lambda::EventSourceMapping").items():
        properties = mapping["Properties"]
        function = functions[str(ref_name(properties["FunctionName"]))]
        command = {lambda_handler.__name__: "counters", relay_lambda.__name__: "relay"}[
            function["Properties"]["ImageConfig"]["Command"][0].rpartition(".")[0]
        ]
        source = properties["EventSourceArn"]["Fn::GetAtt"]
        assert source[1] == "StreamArn", name
        read.setdefault(command, set()).add(tables[source[0]])
        assert properties["StartingPosition"] == "TRIM_HORIZON", name
        assert properties["BisectBatchOnFunctionError"] is True, name
        assert properties["FunctionResponseTypes"] == ["ReportBatchItemFailures"], name
        assert 0 <= properties["MaximumRetryAttempts"] <= 10_000, name
        assert 60 <= properties["MaximumRecordAgeInSeconds"] <= 86_400, name  # below the stream's 24 h
        assert 1 <= properties["BatchSize"] <= 10_000, name
        queue = ref_name(properties["DestinationConfig"]["OnFailure"]["Destination"])
        assert template["Resources"][queue]["Type"] == "AWS::SQS::Queue"
        role = template["Resources"][str(ref_name(function["Properties"]["Role"]))]
        sends = [
            statement
            for policy in role["Properties"]["Policies"]
            for statement in conditional(policy["PolicyDocument"]["Statement"])
            if statement.get("Action") == "sqs:SendMessage"
        ]
        assert [ref_name(s["Resource"]) for s in sends] == [queue], name
    assert read == wanted


def test_autoscaling_tracks_cpu_and_fanout_stays_within_the_partitions(template: dict[str, Any]) -> None:
    """serve and fanout scale on their average CPU (target tracking); fanout never beyond
    TopicPartitions, which is the SG_TOPIC_PARTITIONS it is given: an extra task would sit idle."""
    services = resources(template, "AWS::ECS::Service")
    targets = resources(template, "AWS::ApplicationAutoScaling::ScalableTarget")
    policies = resources(template, "AWS::ApplicationAutoScaling::ScalingPolicy")
    scaled = {}
    for target_id, target in targets.items():
        resource_id = target["Properties"]["ResourceId"]["Fn::Sub"]
        (service,) = [s for s in services if f"${{{s}.Name}}" in resource_id]
        scaled[service] = target["Properties"]
        (policy,) = [p for p in policies.values() if ref_name(p["Properties"]["ScalingTargetId"]) == target_id]
        tracking = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
        assert tracking["PredefinedMetricSpecification"]["PredefinedMetricType"] == "ECSServiceAverageCPUUtilization"
        assert "DesiredCount" not in services[service]["Properties"], f"{service}: an update would undo the scaling"
    assert set(scaled) == set(services)
    fanout = next(
        p for s, p in scaled.items() if "fanout" in ref_name(services[s]["Properties"]["TaskDefinition"]).lower()
    )
    assert ref_name(fanout["MaxCapacity"]) == "TopicPartitions"
    partitions = next(
        e for e in task_containers(template)["fanout"]["Environment"] if e["Name"] == "SG_TOPIC_PARTITIONS"
    )
    assert ref_name(partitions["Value"]) == "TopicPartitions"


# -- settings and secrets ----------------------------------------------------------------------------


def test_every_sg_variable_in_the_template_is_a_setting(template: dict[str, Any]) -> None:
    """Every ``SG_*`` name in the template is one ``Settings.from_env`` reads, and each component is
    given only settings its command reads (``socialgraph COMMAND --help``), besides the functions'
    secrets revision (a new one makes CloudFormation read their secrets again)."""
    named = set(re.findall(r"\bSG_[A-Z0-9_]+\b", TEMPLATE.read_text()))
    assert named, "no SG_* variable found"
    assert not named - SETTINGS.keys(), f"not settings: {sorted(named - SETTINGS.keys())}"
    for component in components(template):
        reads = {f"SG_{field.upper()}" for field in reads_of(component)}
        given = {v for v in [*component.environment, *component.secrets] if v.startswith("SG_")}
        others = set(component.environment) - given
        assert others <= {"SOCIALGRAPH_SECRETS_REVISION"}, f"{component.name}: {sorted(others)}"
        assert given <= reads, f"{component.name}: {component.command} does not read {sorted(given - reads)}"


@pytest.mark.parametrize("sasl", [True, False])
def test_each_component_starts_with_valid_settings(template: dict[str, Any], sasl: bool) -> None:
    """With the parameters filled in (and the secrets holding what they should), the settings of each
    container and function pass ``Settings.validate`` (and ``check_serving`` for serve), point at AWS,
    and name no loopback address; with SASL, every Kafka client has its password."""
    overrides = (
        {}
        if sasl
        else {
            "KafkaSecurityProtocol": "SSL",
            "KafkaSaslMechanism": "",
            "KafkaSaslUsername": "",
            "KafkaSaslPasswordSecretArn": "",
        }
    )
    evaluator = Evaluator.with_examples(template, **overrides)
    for component in components(template):
        env = environment_of(evaluator, component)
        try:
            settings = Settings.from_env(env)
            if component.command == "serve":
                settings.check_serving()
        except SettingsError as exc:
            pytest.fail(f"{component.name}: {exc}")
        assert settings.on_aws, component.name
        assert settings.aws_region == PSEUDO["AWS::Region"], component.name
        reads = reads_of(component)
        if "redis_url" in reads:
            assert settings.redis_url.startswith("rediss://"), component.name
        if "kafka_bootstrap_servers" in reads:
            assert settings.kafka_bootstrap_servers == EXAMPLES["KafkaBootstrapServers"], component.name
            assert bool(settings.kafka_sasl_password) == sasl, component.name
        if "metrics_address" in reads and component.name in {"serve", "fanout"}:
            assert settings.metrics_address.startswith("0.0.0.0:"), component.name


def test_no_secret_is_a_literal(template: dict[str, Any]) -> None:
    """The secret settings (and the Redis URLs, which may carry a password) reach ECS containers only
    as ``Secrets`` from a Secrets Manager ARN parameter, and Lambda functions only as a Secrets
    Manager dynamic reference to one; the callers file comes from its secret the same way. Each
    task's execution role may read exactly the secrets its containers name."""
    secret_like = SECRET_SETTINGS | URL_SETTINGS
    parameters = template["Parameters"]
    secret_parameters = {name for name in parameters if name.endswith("SecretArn")}
    for name in secret_parameters:
        assert ":secretsmanager:" in parameters[name]["AllowedPattern"], name
        assert parameters[name].get("Default", "") == "", name
    for component in components(template):
        for variable, value in component.environment.items():
            if variable not in secret_like:
                continue
            text = json.dumps(value)
            references = re.findall(r"\{\{resolve:secretsmanager:\$\{(\w+)\}:SecretString\}\}", text)
            assert references, f"{component.name}: {variable} is {text}"
            assert set(references) <= secret_parameters, f"{component.name}: {variable} is {text}"
        for variable, value_from in component.secrets.items():
            assert ref_name(value_from) in secret_parameters, f"{component.name}: {variable} from {value_from}"
        assert not secret_like & set(component.environment) or component.name in resources(
            template, "AWS::Lambda::Function"
        ), f"{component.name}: a secret in Environment"
    containers = task_containers(template)
    callers = containers["callers-file"]
    assert [ref_name(s["ValueFrom"]) for s in callers["Secrets"]] == ["CallersFileSecretArn"]
    for task_id, task in resources(template, "AWS::ECS::TaskDefinition").items():
        named = {
            ref_name(secret["ValueFrom"])
            for container in task["Properties"]["ContainerDefinitions"]
            for secret in conditional(container.get("Secrets", []))
        }
        role = template["Resources"][str(ref_name(task["Properties"]["ExecutionRoleArn"]))]
        readable = {
            ref_name(resource)
            for policy in role["Properties"]["Policies"]
            for statement in conditional(policy["PolicyDocument"]["Statement"])
            if statement.get("Action") == "secretsmanager:GetSecretValue"
            for resource in conditional(statement["Resource"])
        }
        assert readable == named, f"{task_id}: its execution role reads {readable}, its containers name {named}"
    serve = {
        variable for component in components(template) if component.name == "serve" for variable in component.secrets
    }
    assert {"SG_PAGE_TOKEN_SECRET", "SG_REDIS_URL"} <= serve


def test_each_required_parameter_refuses_an_empty_value(template: dict[str, Any]) -> None:
    """A parameter without a default fails at deploy time when left empty, with a constraint
    description saying what it wants; its example is accepted. An optional one accepts its empty
    default. With a SASL protocol, the rule refuses an empty mechanism, user or password secret."""
    parameters = template["Parameters"]
    for name, spec in parameters.items():
        pattern = spec.get("AllowedPattern")
        if "Default" not in spec:
            refuses_empty = (pattern is not None and not re.fullmatch(pattern, "")) or spec.get("MinLength", 0) >= 1
            assert refuses_empty, f"{name} accepts an empty value"
            assert spec.get("ConstraintDescription"), f"{name}: no ConstraintDescription"
            items = EXAMPLES[name].split(",") if spec["Type"] == "CommaDelimitedList" else [EXAMPLES[name]]
            assert all(re.fullmatch(pattern, item) for item in items), f"{name} refuses its example"
        elif pattern is not None:
            assert re.fullmatch(pattern, str(spec["Default"])), f"{name} refuses its own default"
            assert spec.get("ConstraintDescription"), f"{name}: no ConstraintDescription"
    assert not re.fullmatch(parameters["Image"]["AllowedPattern"], EXAMPLES["Image"].replace("0.1.0", "latest"))
    (rule,) = template["Rules"].values()
    for missing in ("KafkaSaslMechanism", "KafkaSaslUsername", "KafkaSaslPasswordSecretArn"):
        evaluator = Evaluator.with_examples(template, **{missing: ""})
        assert evaluator.value(rule["RuleCondition"])
        failed = [a["AssertDescription"] for a in rule["Assertions"] if not evaluator.value(a["Assert"])]
        assert len(failed) == 1, (missing, failed)
        assert missing in failed[0], (missing, failed)
    assert all(Evaluator.with_examples(template).value(a["Assert"]) for a in rule["Assertions"])
    plain = Evaluator.with_examples(template, KafkaSecurityProtocol="SSL", KafkaSaslUsername="")
    assert not plain.value(rule["RuleCondition"])


def test_the_containers_match_the_kubernetes_manifests(template: dict[str, Any]) -> None:
    """serve and fanout get the listen addresses, process count and shutdown grace that the
    Kubernetes Deployments give them, and the defaults of the table prefix and topic partitions are
    the Kubernetes base configuration's."""
    containers = task_containers(template)
    for name in ("serve", "fanout"):
        manifest = next(
            yaml.safe_load_all((KUBERNETES / f"{name}{'-deployment' if name == 'serve' else ''}.yaml").read_text())
        )
        (pod,) = manifest["spec"]["template"]["spec"]["containers"]
        kubernetes = {e["name"]: e["value"] for e in pod["env"] if "value" in e}
        ecs = {e["Name"]: e["Value"] for e in containers[name]["Environment"]}
        for variable in ("SG_GRPC_ADDRESS", "SG_METRICS_ADDRESS", "SG_SERVE_PROCESSES", "SG_SHUTDOWN_GRACE_SECONDS"):
            assert kubernetes.get(variable) == ecs.get(variable), f"{name}: {variable}"
        secret_refs = {e["name"] for e in pod["env"] if "secretKeyRef" in e.get("valueFrom", {})}
        assert secret_refs <= {s["Name"] for s in conditional(containers[name].get("Secrets", []))}, name
        assert {p["containerPort"] for p in pod["ports"]} == {
            m["ContainerPort"] for m in containers[name]["PortMappings"]
        }
    shared = dict(
        line.split("=", 1)
        for line in (KUBERNETES / "socialgraph.env").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    parameters = template["Parameters"]
    assert str(parameters["TablePrefix"]["Default"]) == shared["SG_TABLE_PREFIX"]
    assert str(parameters["TopicPartitions"]["Default"]) == shared["SG_TOPIC_PARTITIONS"]
    assert str(parameters["LogLevel"]["Default"]) == shared["SG_LOG_LEVEL"]


# -- the linters (last: they ran meanwhile) --------------------------------------------------------


def test_cfn_lint_passes(linters: Linters) -> None:
    """cfn-lint (the CloudFormation resource specification, and its best practices) finds nothing."""
    code, out, err = linters.wait(linters.cfn_lint)
    assert code == 0, out + err


def test_checkov_passes_and_every_suppression_says_why(template: dict[str, Any], linters: Linters) -> None:
    """checkov's CloudFormation checks pass; each check skipped is skipped in the template's Metadata
    with the reason, and no skip is left over from a check that no longer applies."""
    code, out, err = linters.wait(linters.checkov)
    report = json.loads(out)
    assert report["summary"]["checkov_version"] == CHECKOV_VERSION
    failed = [f"{c['check_id']} {c['resource']}: {c['check_name']}" for c in report["results"]["failed_checks"]]
    assert not failed, "\n".join(failed)
    assert code == 0, err
    assert report["summary"]["parsing_errors"] == 0
    skipped = report["results"]["skipped_checks"]
    for check in skipped:
        assert len(check["check_result"].get("suppress_comment", "")) > 20, f"{check['check_id']}: no reason"
    declared = [
        (skip["id"], logical_id)
        for logical_id, res in template["Resources"].items()
        for skip in (res.get("Metadata") or {}).get("checkov", {}).get("skip", [])
    ]
    assert sorted(declared) == sorted((c["check_id"], c["resource"].rpartition(".")[2]) for c in skipped)
    assert "checkov:skip=" not in TEMPLATE.read_text(), "suppress in Metadata, with the reason, not in a comment"
