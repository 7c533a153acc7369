"""The alerts and the dashboard (``deploy/prometheus``, ``deploy/grafana``): promtool checks the rules
and runs their unit tests; every alert is documented and tested firing and silent; and a real
Prometheus scraping a running serve, counters, relay and fanout evaluates every dashboard query and
every rule, so that none names a metric or a label the processes do not export."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml  # type: ignore[import-untyped]  # types-PyYAML is not a dependency
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph_devstack.processes import ManagedProcess, free_port, spawn

from graph_service.api.callers import caller_entry, mint_token
from graph_service.dynamodb.tables import FOLLOWERS, TWEETS
from graph_service.entrypoints.cli import package_version
from graph_service.entrypoints.counters import build_counters
from graph_service.entrypoints.fanout import build_fanout
from graph_service.entrypoints.relay import build_relay
from graph_service.settings import Settings
from tests.support.graph_calls import rejected
from tests.support.polling import eventually
from tests.support.runtimes import run_built, running_server, stub_for
from tests.support.scrape import Scrape, scrape
from tests.support.tables import require_streams

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "rules.yaml"
RULE_TESTS = REPO / "deploy" / "prometheus" / "rules_test.yaml"
DASHBOARD = REPO / "deploy" / "grafana" / "socialgraph.json"
OPERATING = REPO / "docs" / "operating.md"
JOBS = ("serve", "counters", "relay", "fanout")
BACKEND_CALLS_BY_JOB = (
    "sum by (job) (socialgraph_dynamodb_call_seconds_count) or sum by (job) (socialgraph_redis_call_seconds_count)"
)
"""The job names the rules expect (the PodMonitor's, deploy/kubernetes/components/prometheus-operator)."""
REMEDY = "install Debian's prometheus package: ./scripts/test does (socialgraph_devstack.install.ensure_test_tools)"
GRAFANA_VARIABLES = re.compile(r"\$\{?(__rate_interval|__interval|__range)\}?")
CONCRETE = {"__rate_interval": "1m", "__interval": "15s", "__range": "1h"}
"""What Grafana would put there (a rate interval of at least four scrapes; this test's calls are
seconds old, scraped every second)."""
ONLY_WHEN_WRONG = "grpc_code"
"""The one label whose wanted values exist only when something is wrong: the fault codes. A
selector matching them is checked without that matcher (the metric, with the label, must exist)."""


def tool(name: str) -> str:
    found = shutil.which(name)
    assert found, f"{name} is missing: {REMEDY}"
    return found


def rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def panels() -> Iterator[dict[str, Any]]:
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        yield panel
        yield from panel.get("panels", [])  # a collapsed row holds its panels


def anchors(markdown: Path) -> set[str]:
    """GitHub's anchors of the headings of ``markdown`` (outside code blocks)."""
    text = re.sub(r"^```.*?^```", "", markdown.read_text(), flags=re.MULTILINE | re.DOTALL)
    headings = re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_promtool_checks_the_rules_and_runs_their_unit_tests() -> None:
    """``promtool check rules`` (syntax, types, templates) and ``promtool test rules`` pass."""
    promtool = tool("promtool")
    for command in (["check", "rules", str(RULES)], ["test", "rules", str(RULE_TESTS)]):
        result = subprocess.run([promtool, *command], capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 0, f"promtool {' '.join(command)}:\n{result.stdout}{result.stderr}"


def test_every_alert_is_documented_and_tested_firing_and_silent() -> None:
    """Each alert has a severity, a summary, a description and a runbook that is a section of
    docs/operating.md; rules_test.yaml has a case where it fires and one where it stays silent."""
    cases = {
        (case["alertname"], bool(case.get("exp_alerts")))
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test.get("alert_rule_test", [])
    }
    sections = anchors(OPERATING)
    alerts = [rule for rule in rules() if "alert" in rule]
    for alert in alerts:
        name, annotations = alert["alert"], alert.get("annotations", {})
        assert alert.get("labels", {}).get("severity") in {"critical", "warning"}, name
        assert {"summary", "description", "runbook"} <= annotations.keys(), name
        page, _, anchor = annotations["runbook"].partition("#")
        assert page == "docs/operating.md", f"{name}: the runbook is not a section of docs/operating.md"
        assert anchor in sections, f"{name}: docs/operating.md has no section #{anchor}"
        assert (name, True) in cases, f"{name}: no case in rules_test.yaml where it fires"
        assert (name, False) in cases, f"{name}: no case in rules_test.yaml where it stays silent"
    assert {name for name, _ in cases} <= {alert["alert"] for alert in alerts}, "a test names no alert"


def test_the_dashboard_reads_the_datasource_its_variable_names() -> None:
    """A ``datasource`` variable of Prometheus data sources, and every panel and query reading it."""
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {variable["name"]: variable for variable in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    wanted = {"type": "prometheus", "uid": "${datasource}"}
    for panel in panels():
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == wanted, panel["title"]
        assert panel["targets"], panel["title"]
        assert all(target["datasource"] == wanted for target in panel["targets"]), panel["title"]


# --- PromQL, as far as this test needs it ------------------------------------------------------

TOKEN = re.compile(r""""(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|\[[^\]]*\]|\d[\w.]*|[A-Za-z_:][\w:]*|[=!]~|!=|\S""")
NAME = re.compile(r"[A-Za-z_:][\w:]*")
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS = GROUPING | {"and", "or", "unless", "bool", "offset", "inf", "nan"}
KEYWORDS |= {"sum", "min", "max", "avg", "count", "group", "stddev", "stdvar", "topk", "bottomk", "quantile"}


@dataclass(frozen=True)
class Selector:
    name: str
    matchers: tuple[str, ...]

    @property
    def text(self) -> str:
        return f"{self.name}{{{', '.join(self.matchers)}}}" if self.matchers else self.name

    @property
    def labels(self) -> set[str]:
        return {label_of(matcher) for matcher in self.matchers}

    def without(self, label: str) -> Selector:
        return Selector(self.name, tuple(m for m in self.matchers if label_of(m) != label))


def label_of(matcher: str) -> str:
    """``grpc_code!~"OK"`` -> ``grpc_code``."""
    return re.split(r"[=!]", matcher, maxsplit=1)[0]


def parts(expr: str) -> tuple[list[Selector], set[str]]:
    """The vector selectors of ``expr`` and the labels its ``by``/``without``/``on``/... clauses name.
    Enough of PromQL's lexis for these rules and panels: a name taken for a selector that is not
    one fails as a query below, never silently."""
    tokens = TOKEN.findall(expr)
    selectors: list[Selector] = []
    grouping: set[str] = set()
    i = 0
    while i < len(tokens):
        token, following = tokens[i], tokens[i + 1] if i + 1 < len(tokens) else ""
        if token in GROUPING and following == "(":
            end = tokens.index(")", i)
            grouping.update(label for label in tokens[i + 2 : end] if label != ",")
            i = end + 1
        elif NAME.fullmatch(token) and following != "(" and token not in KEYWORDS:
            end = tokens.index("}", i) if following == "{" else i
            matchers = "".join(tokens[i + 2 : end]).split(",") if end > i else []
            selectors.append(Selector(token, tuple(m for m in matchers if m)))
            i = end + 1
        else:
            i += 1
    return selectors, grouping


# --- a real Prometheus ---------------------------------------------------------------------------


@dataclass
class Prometheus:
    managed: ManagedProcess

    @property
    def port(self) -> int:
        return self.managed.port

    def get(self, path: str, **params: str) -> Any:
        """The ``data`` of an API answer; AssertionError with Prometheus's own message otherwise."""
        url = f"http://127.0.0.1:{self.port}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                body = json.load(answer)
        except urllib.error.HTTPError as error:
            body = json.load(error)
        assert body["status"] == "success", f"{body.get('errorType')}: {body.get('error')}"
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.get("/api/v1/query", query=expr)
        assert data["resultType"] == "vector", f"{expr} is a {data['resultType']}"
        result: list[dict[str, Any]] = data["result"]
        return result

    def ready(self) -> bool:
        process, log = self.managed.process, self.managed.log_path
        assert process.poll() is None, f"prometheus exited:\n{log.read_text()[-3000:]}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def targets(self) -> dict[str, tuple[str, float, str]]:
        """job -> (health, last scrape in epoch seconds, last error)."""
        return {
            target["labels"]["job"]: (
                target["health"],
                datetime.fromisoformat(target["lastScrape"]).timestamp(),
                target["lastError"],
            )
            for target in self.get("/api/v1/targets")["activeTargets"]
        }

    def rule_groups(self) -> list[dict[str, Any]]:
        groups: list[dict[str, Any]] = self.get("/api/v1/rules")["groups"]
        return groups


def start_prometheus(ports: dict[str, int], folder: Path) -> Prometheus:
    """Prometheus scraping each job's metrics port every second, with the rules loaded, its data in ``folder``."""
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]} for job, port in ports.items()
        ],
    }
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    command = [
        tool("prometheus"),
        f"--config.file={folder / 'prometheus.yml'}",
        f"--storage.tsdb.path={folder / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    return Prometheus(spawn("prometheus", command, port, folder))


@contextlib.asynccontextmanager
async def prometheus(ports: dict[str, int], folder: Path) -> AsyncIterator[Prometheus]:
    """``start_prometheus``, ready to answer; stopped at the end."""
    server = start_prometheus(ports, folder)
    try:
        await eventually(lambda: asyncio.to_thread(server.ready), bool)
        yield server
    finally:
        server.managed.stop()


def concrete(expr: str) -> str:
    """A panel's query with Grafana's interval variables replaced; another variable fails the test."""
    expr = GRAFANA_VARIABLES.sub(lambda found: CONCRETE[found.group(1)], expr)
    assert "$" not in expr, f"a template variable this test cannot fill in: {expr}"
    return expr


def problems_of(server: Prometheus, where: str, expr: str, *, whole: bool, legend: str = "") -> list[str]:
    """What is wrong with ``expr``: it does not parse; (``whole``) it returns nothing; a selector of
    it returns no series; a label its ``by``/``on``/... clauses or its ``legend`` name is on none."""
    try:
        result = server.query(expr)
    except AssertionError as error:
        return [f"{where}: {error}"]
    found = [f"{where}: no data for {expr}"] if whole and not result else []
    selectors, grouping = parts(expr)
    if not selectors:
        found.append(f"{where}: no selector found in {expr}")
    seen: set[str] = set()
    for selector in selectors:
        series = [item["metric"] for item in server.query(selector.text)]
        if not series and ONLY_WHEN_WRONG in selector.labels:
            relaxed = server.query(selector.without(ONLY_WHEN_WRONG).text)
            series = [item["metric"] for item in relaxed if ONLY_WHEN_WRONG in item["metric"]]
        if not series:
            found.append(f"{where}: no series for {selector.text}")
        seen.update(*(labels.keys() for labels in series))
    found += [f"{where}: no series has the label {label}" for label in sorted(grouping - seen)]
    shown = {label for item in result for label in item["metric"]}
    if result:
        named = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend))
        found += [f"{where}: the legend names {label}, no result has it" for label in sorted(named - shown)]
    return found


def every_problem(server: Prometheus) -> list[str]:
    """Recording rules and panel queries must return data; an alert's condition holds only when
    something is wrong, so it must parse and each of its selectors return series."""
    found = [
        f"rule {rule['name']}: {rule['health']} {rule.get('lastError', '')}"
        for group in server.rule_groups()
        for rule in group["rules"]
        if rule["health"] != "ok"
    ]
    for rule in rules():
        where = f"record {rule['record']}" if "record" in rule else f"alert {rule['alert']}"
        found += problems_of(server, where, rule["expr"], whole="record" in rule)
    for panel in panels():
        for target in panel.get("targets", []):
            where = f"panel {panel['title']!r} {target['refId']}"
            expr = concrete(target["expr"])
            found += problems_of(server, where, expr, whole=True, legend=target.get("legendFormat", ""))
    return found


async def drive_traffic(stub: Any, token: str, follower: int) -> None:
    """One round of calls: two follows, a third over the rate limit, an invalid one, and reads."""
    auth = (("authorization", f"Bearer {token}"),)
    for followee in (2, 3):
        await stub.Follow(pb.FollowRequest(follower_id=follower, followee_id=followee), metadata=auth)
    over = stub.Follow(pb.FollowRequest(follower_id=follower, followee_id=4), metadata=auth)
    await rejected(over, grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED")
    with pytest.raises(grpc.aio.AioRpcError):
        await stub.Follow(pb.FollowRequest(follower_id=0, followee_id=1), metadata=auth)
    for _ in range(3):
        await stub.IsFollowing(pb.IsFollowingRequest(follower_id=follower, followee_id=2), metadata=auth)
        await stub.GetCounts(pb.GetCountsRequest(user_id=2), metadata=auth)


async def scraped_after(server: Prometheus, moment: float) -> None:
    """Until Prometheus has scraped every job, each up, after ``moment`` (epoch seconds)."""

    def done(targets: dict[str, tuple[str, float, str]]) -> bool:
        return set(targets) == set(JOBS) and all(health == "up" and at > moment for health, at, _ in targets.values())

    await eventually(lambda: asyncio.to_thread(server.targets), done)


def fanout_applied_every_follow(metrics: Scrape) -> bool:
    """The four follows applied, and the lag of the partitions it fetched from exported."""
    applied = metrics.value("socialgraph_fanout_events_total", kind="follow") == 4
    return applied and bool(metrics.values("socialgraph_fanout_kafka_lag"))


def evaluated_after(groups: list[dict[str, Any]], moment: float) -> bool:
    return all(datetime.fromisoformat(group["lastEvaluation"]).timestamp() > moment for group in groups)


async def test_every_dashboard_query_and_rule_reads_what_the_processes_export(
    event_settings: Settings, tmp_path: Path
) -> None:
    """serve (with auth: calls have a caller), counters, relay and fanout run; a round of calls is
    made, scraped, and made again (counters' series appear at their first value: a rate needs a
    second); once Prometheus has scraped the four after the fanout applied the follows and
    evaluated the rules since, every panel query and recording rule returns data, every selector
    of every expression returns series, every label named exists, and every rule evaluates. Each of
    the four jobs reports the build it runs (``socialgraph_build_info``) and its DynamoDB and Redis calls."""
    token = mint_token()
    callers = tmp_path / "callers.toml"
    callers.write_text(caller_entry("app", ["read", "write"], token), encoding="utf-8")
    # SG_FOLLOW_RATE_LIMIT=2: each round's third follow is refused, for the refusals' series.
    settings = replace(event_settings, auth_tokens_file=str(callers), follow_rate_limit=2)
    await require_streams(settings, FOLLOWERS)
    await require_streams(settings, TWEETS)
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(running_server(settings))
        stub = await stack.enter_async_context(stub_for(server.port))
        ports = {"serve": server.metrics_port}
        for job, build in (("counters", build_counters), ("relay", build_relay), ("fanout", build_fanout)):
            runtime = await build(settings)
            await stack.enter_async_context(run_built(runtime))
            ports[job] = runtime.metrics_port
        metrics = await stack.enter_async_context(prometheus(ports, tmp_path))
        for follower in (10, 11):
            await drive_traffic(stub, token, follower)
            await scraped_after(metrics, time.time())
        await eventually(lambda: scrape(ports["fanout"]), fanout_applied_every_follow)  # joining takes seconds
        await scraped_after(metrics, time.time())
        scraped = time.time()
        await eventually(
            lambda: asyncio.to_thread(metrics.rule_groups), lambda groups: evaluated_after(groups, scraped)
        )
        problems = await asyncio.to_thread(every_problem, metrics)
        builds = await asyncio.to_thread(metrics.query, "socialgraph_build_info")
        backend_calls = await asyncio.to_thread(metrics.query, BACKEND_CALLS_BY_JOB)
    assert not problems, "\n".join(problems)
    assert sorted(item["metric"]["job"] for item in builds) == sorted(JOBS)
    # Every process counts its DynamoDB and Redis calls where its endpoint serves them.
    assert sorted(item["metric"]["job"] for item in backend_calls if float(item["value"][1]) > 0) == sorted(JOBS)
    assert {(item["metric"]["version"], item["value"][1]) for item in builds} == {(package_version(), "1")}
