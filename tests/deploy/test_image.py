"""The container image (``deploy/image``, built by ``scripts/image`` without a registry, on a base made
from Debian's packages). Its containers run as Kubernetes runs them: read-only root filesystem with
a tmpfs on /tmp, UID 65532, no capabilities. The test runs ``--version``, a clear usage with no command,
and ``serve`` against the test DynamoDB Local and Redis, called with grpcurl (health, a Follow, an
IsFollowing). The counters consumer from the same image keeps the count and answers its liveness,
and the image's own health check probes both. The image holds nothing of the build: no compiler,
no pip, no wheel, no cache.

The first build on a machine takes about 80 s on an idle machine (the base, then the image).
``scripts/image`` then reuses the image for as long as its inputs are unchanged, and this module
takes about 15 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import importlib.util
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from socialgraph_devstack.processes import ManagedProcess, free_port

from graph_service.entrypoints.cli import package_version
from tests.support.grpcurl import grpcurl_binary
from tests.support.polling import wait_until
from tests.support.runtimes import drop_tables, make_settings
from tests.support.tables import create_tables

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "image"
REMEDY = "./scripts/test installs podman, runc and mmdebstrap (socialgraph_devstack.install.ensure_test_tools)"
SERVICE = "socialgraph.v1.SocialGraphService"
USER = "65532:65532"
AS_KUBERNETES_RUNS_IT = (
    *("--read-only", "--tmpfs", "/tmp", "--user", USER),  # noqa: S108 - the container's /tmp, as Kubernetes mounts it
    *("--cap-drop", "all", "--security-opt", "no-new-privileges"),
)
"""deploy/kubernetes's securityContext: readOnlyRootFilesystem with an emptyDir on /tmp, runAsUser,
capabilities dropped, no privilege escalation."""
MAX_IMAGE_BYTES = 260_000_000
"""About 195 MB today (the base about 110 MB, the virtualenv about 85 MB), with room to grow."""

pytestmark = pytest.mark.timeout(900)  # a first build on a loaded machine included


def podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """podman with the storage and flags of ``scripts/image``."""
    return subprocess.run(
        [str(SCRIPT), "podman", *args], capture_output=True, text=True, timeout=timeout, check=False, cwd=REPO
    )


@dataclass(frozen=True)
class Image:
    name: str
    config: dict[str, Any]
    """``podman image inspect``'s answer."""
    build_seconds: float

    @property
    def env(self) -> dict[str, str]:
        return dict(entry.split("=", 1) for entry in self.config["Config"]["Env"])


@pytest.fixture(scope="module")
def image() -> Image:
    """``scripts/image --local-base``: built, or the image of the same inputs found."""
    for tool in ("podman", "runc", "mmdebstrap"):
        assert shutil.which(tool), f"{tool} is missing: {REMEDY}"
    started = time.monotonic()
    built = subprocess.run(
        [str(SCRIPT), "--local-base"], capture_output=True, text=True, timeout=840, check=False, cwd=REPO
    )
    seconds = time.monotonic() - started
    # Without pip's warnings about this machine's configured local indexes that do not exist.
    said = "\n".join(line for line in built.stderr.splitlines() if not line.startswith("WARNING: Location"))
    assert built.returncode == 0, f"scripts/image failed:\n{said[-6000:]}"
    name = built.stdout.strip().splitlines()[-1]
    inspected = podman("image", "inspect", name)
    assert inspected.returncode == 0, inspected.stderr
    return Image(name, json.loads(inspected.stdout)[0], seconds)


@dataclass
class Container:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> int:
        """SIGTERM, as Kubernetes stops a pod (SIGKILL after 20 s); the process's exit code."""
        podman("stop", "--time", "20", self.name, timeout=60)
        return self.process.wait(timeout=30)


@contextlib.contextmanager
def container(image: Image, log_path: Path, *args: str, env: dict[str, str]) -> Iterator[Container]:
    """``podman run`` of ``image`` with ``args`` on the host's network, as Kubernetes runs it; its
    output goes to ``log_path``. Removed when the block ends, whatever happened."""
    name = f"socialgraph-test-{uuid.uuid4().hex[:12]}"
    variables = [f"--env={key}={value}" for key, value in env.items()]
    command = [str(SCRIPT), "podman", "run", "--rm", "--name", name, *AS_KUBERNETES_RUNS_IT, *variables, image.name]
    with log_path.open("wb") as log:
        process = subprocess.Popen([*command, *args], stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        yield Container(name, process, log_path)
    finally:
        podman("rm", "--force", "--ignore", "--time", "0", name, timeout=60)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=30)
        if process.poll() is None:
            process.kill()


def http_status(port: int, path: str) -> int | None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        connection.request("GET", path)
        return connection.getresponse().status
    except OSError:
        return None
    finally:
        connection.close()


def grpcurl(address: str, method: str, data: Mapping[str, object] | None = None) -> dict[str, Any]:
    command = [grpcurl_binary(), "-plaintext"]
    if data is not None:
        command += ["-d", json.dumps(data)]
    result = subprocess.run([*command, address, method], capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, f"grpcurl {method}: {result.stderr}"
    reply: dict[str, Any] = json.loads(result.stdout)
    return reply


def grpcurl_answers(address: str) -> bool:
    command = [grpcurl_binary(), "-plaintext", "-max-time", "2", address, "grpc.health.v1.Health/Check"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    return result.returncode == 0 and json.loads(result.stdout) == {"status": "SERVING"}


def with_port(address: str, port: int) -> str:
    """The image's default listen address (its host: every interface) on another port."""
    host, _, _ = address.rpartition(":")
    return f"{host}:{port}"


@dataclass
class Running:
    serve: Container
    grpc_address: str
    """Where grpcurl reaches the container's serve."""
    counters: Container
    counters_metrics_port: int


@pytest.fixture(scope="module")
def running(
    image: Image, dynamodb_local: str, redis_node: ManagedProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Running]:
    """``serve`` and ``counters`` from the image, against tables of their own in the test DynamoDB
    Local and the test Redis, with the host's network and free ports; both stop with SIGTERM and
    exit 0 at the end."""
    settings = make_settings(dynamodb_local, f"redis://127.0.0.1:{redis_node.port}/0")
    asyncio.run(create_tables(settings, streams=True))  # streams: the counters consumer reads one
    logs = tmp_path_factory.mktemp("image")
    env = {
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "SG_DYNAMODB_ENDPOINT": settings.dynamodb_endpoint,
        "SG_TABLE_PREFIX": settings.table_prefix,
        "SG_REDIS_URL": settings.redis_url,
        "SG_STREAM_POLL_SECONDS": "0.2",
        "SG_SHUTDOWN_GRACE_SECONDS": "5",
    }
    grpc_port, serve_metrics, counters_metrics = free_port(), free_port(), free_port()
    defaults = image.env
    serve_env = {
        **env,
        "SG_GRPC_ADDRESS": with_port(defaults["SG_GRPC_ADDRESS"], grpc_port),
        "SG_METRICS_ADDRESS": with_port(defaults["SG_METRICS_ADDRESS"], serve_metrics),
    }
    counters_env = {**env, "SG_METRICS_ADDRESS": with_port(defaults["SG_METRICS_ADDRESS"], counters_metrics)}
    try:
        with (
            container(image, logs / "serve.log", "serve", env=serve_env) as serve,
            container(image, logs / "counters.log", "counters", env=counters_env) as counters,
        ):
            address = f"127.0.0.1:{grpc_port}"

            def serving() -> bool:
                assert serve.running(), f"serve exited with {serve.process.returncode}:\n{serve.log()}"
                return grpcurl_answers(address)

            def live() -> bool:
                assert counters.running(), f"counters exited with {counters.process.returncode}:\n{counters.log()}"
                return http_status(counters_metrics, "/healthz") == 200

            wait_until(serving, timeout=90, what="serve in its container answering SERVING")
            wait_until(live, timeout=90, what="counters in its container answering /healthz")
            yield Running(serve, address, counters, counters_metrics)
            for stopped in (serve, counters):
                code = stopped.stop()
                assert code == 0, f"{stopped.name} exited with {code} after SIGTERM:\n{stopped.log()}"
    finally:
        asyncio.run(drop_tables(settings))


def test_the_image_is_one_non_root_image_for_every_command(image: Image, record_property: Any) -> None:
    """Entrypoint ``socialgraph`` with no command of its own (none inherited from the base either),
    UID 65532, listening on every interface, the HEALTHCHECK kept; small. Size and build time are
    recorded (``--junitxml``)."""
    config = image.config["Config"]
    assert config["Entrypoint"] == ["/opt/socialgraph/bin/socialgraph"]
    assert not config.get("Cmd")
    assert config["User"] == USER
    assert image.env["SG_GRPC_ADDRESS"] == "[::]:50051"
    assert image.env["SG_METRICS_ADDRESS"] == "0.0.0.0:9464"
    assert image.env["PATH"].startswith("/opt/socialgraph/bin:")
    healthcheck = ["CMD", "/opt/socialgraph/bin/python", "/opt/socialgraph/healthcheck.py"]
    assert image.config["Healthcheck"]["Test"] == healthcheck
    size = int(image.config["Size"])
    record_property("image_bytes", size)
    record_property("scripts_image_seconds", round(image.build_seconds, 1))
    assert size < MAX_IMAGE_BYTES, f"the image grew to {size / 1e6:.0f} MB"


def test_version_and_no_command(image: Image, tmp_path: Path) -> None:
    """``--version`` says the project's version; with no command, the usage and exit 2, no traceback."""
    version = podman("run", "--rm", *AS_KUBERNETES_RUNS_IT, image.name, "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"socialgraph {package_version()}"
    bare = podman("run", "--rm", *AS_KUBERNETES_RUNS_IT, image.name)
    assert bare.returncode == 2, bare.stdout + bare.stderr
    assert "usage: socialgraph" in bare.stderr
    assert "the following arguments are required: COMMAND" in bare.stderr
    assert "Traceback" not in bare.stdout + bare.stderr


EXTENSIONS = """
import importlib, pathlib, sysconfig
site = pathlib.Path(sysconfig.get_paths()["purelib"])
failed = []
for path in sorted(site.rglob("*.so")):
    if ".cpython-311-" not in path.name and not path.name.endswith(".abi3.so"):
        continue  # a library vendored by a wheel, loaded by the module that needs it
    parts = path.relative_to(site).parts
    name = ".".join((*parts[:-1], parts[-1].split(".")[0]))
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {exc!r}")
print("\\n".join(failed))
raise SystemExit(1 if failed else 0)
"""


def test_every_extension_module_loads(image: Image) -> None:
    """Each compiled module of the installed wheels imports: the base has every system library they
    link to (libstdc++ for grpcio and awslambdaric, for one)."""
    python = ("--entrypoint", "/opt/socialgraph/bin/python")
    loaded = podman("run", "--rm", *AS_KUBERNETES_RUNS_IT, *python, image.name, "-c", EXTENSIONS)
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr


def test_nothing_of_the_build_is_left_in_the_image(image: Image) -> None:
    """No compiler, no pip (in the virtualenv or on PATH), no wheel, no pip or build cache; the code
    belongs to root, and its bytecode was compiled from these very sources and is used without a
    check (nothing is compiled again at each start on a read-only root filesystem)."""
    mounted = podman("image", "mount", image.name)
    assert mounted.returncode == 0, mounted.stderr
    root = Path(mounted.stdout.strip())
    try:
        binaries = [root / "usr/bin", root / "usr/local/bin", root / "opt/socialgraph/bin"]
        compilers = [
            path.name
            for folder in binaries
            for path in folder.iterdir()
            if path.name in {"cc", "c++", "gcc", "g++", "clang", "tcc", "make"} or "-gcc" in path.name
        ]
        assert compilers == []
        assert list(root.glob("usr/lib/gcc/*/*/cc1")) == []
        assert not [path.name for path in binaries[2].iterdir() if path.name.startswith("pip")]
        site = root / "opt/socialgraph/lib/python3.11/site-packages"
        assert not list(site.glob("pip*"))
        assert not list(site.glob("setuptools*"))
        leftovers = [root / "root/.cache", root / "tmp/wheels", *root.glob("home/*/.cache")]
        assert [str(path) for path in leftovers if path.exists()] == []
        assert [str(path) for folder in ("opt", "tmp", "root") for path in (root / folder).rglob("*.whl")] == []
        assert os.stat(root / "opt/socialgraph").st_uid == 0
        stale = []
        for source in (site / "graph_service").rglob("*.py"):
            compiled = source.parent / "__pycache__" / f"{source.stem}.cpython-311.pyc"
            header = compiled.read_bytes()[:16] if compiled.exists() else b""
            unchecked_hash = int.from_bytes(header[4:8], "little") == 0b01  # PEP 552: hash-based, not checked
            if not unchecked_hash or header[8:16] != importlib.util.source_hash(source.read_bytes()):
                stale.append(str(source.relative_to(site)))
        assert stale == []
    finally:
        podman("image", "unmount", image.name)


def test_serve_from_the_image_answers_grpcurl(running: Running) -> None:
    """grpcurl through reflection: health SERVING, a Follow, then IsFollowing true."""
    assert grpcurl(running.grpc_address, "grpc.health.v1.Health/Check") == {"status": "SERVING"}
    follow = {"follower_id": 8101, "followee_id": 8102}
    assert grpcurl(running.grpc_address, f"{SERVICE}/Follow", follow) == {"state": "FOLLOW_STATE_FOLLOWING"}
    assert grpcurl(running.grpc_address, f"{SERVICE}/IsFollowing", follow) == {"following": True}


def test_counters_from_the_image_keeps_the_count_and_answers_liveness(running: Running) -> None:
    """The counters consumer reads the stream from its container: the followee's count becomes 1, its
    ``/healthz`` answers 200 and its ``/readyz`` 200 (it is reading)."""
    follow = {"follower_id": 8201, "followee_id": 8202}
    assert grpcurl(running.grpc_address, f"{SERVICE}/Follow", follow) == {"state": "FOLLOW_STATE_FOLLOWING"}

    def counted() -> bool:
        assert running.counters.running(), running.counters.log()
        reply = grpcurl(running.grpc_address, f"{SERVICE}/GetCounts", {"user_id": 8202})
        return str(reply.get("followers_count", "0")) == "1"

    wait_until(counted, timeout=60, what="the followee's followers_count at 1")
    assert http_status(running.counters_metrics_port, "/healthz") == 200
    wait_until(lambda: http_status(running.counters_metrics_port, "/readyz") == 200, timeout=60, what="/readyz 200")


def test_the_image_health_check_probes_serve_and_counters(running: Running) -> None:
    """``podman healthcheck run`` (the image's HEALTHCHECK) finds each container's command and says healthy."""
    for target in (running.serve, running.counters):
        checked = podman("healthcheck", "run", target.name)
        assert checked.returncode == 0, f"{target.name}: {checked.stdout}{checked.stderr}\n{target.log()}"


def test_the_image_names_the_commit_it_was_built_from_and_its_processes_report_it(
    image: Image, running: Running
) -> None:
    """``SG_BUILD_COMMIT`` and the revision label are this checkout's HEAD (``-dirty`` when the
    packaged sources have changes not committed); the counters process in its container reports
    that build in ``socialgraph_build_info``."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
    commit = image.env["SG_BUILD_COMMIT"]
    assert commit in {head.stdout.strip(), f"{head.stdout.strip()}-dirty"}
    assert image.config["Config"]["Labels"]["org.opencontainers.image.revision"] == commit
    connection = http.client.HTTPConnection("127.0.0.1", running.counters_metrics_port, timeout=5)
    try:
        connection.request("GET", "/metrics")
        scraped = connection.getresponse().read().decode()
    finally:
        connection.close()
    assert f'socialgraph_build_info{{commit="{commit}",version="{package_version()}"}} 1.0' in scraped
