"""The README's two scripts answer ``--help`` and refuse what they do not take, before they install
or start anything (a mistyped option once started the whole stack for 11 minutes)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run(script: str, *arguments: str, installable: bool = False) -> subprocess.CompletedProcess[str]:
    """``scripts/<script> ARGUMENTS``; unless ``installable``, with a ``PYTHON`` that makes
    ``scripts/bootstrap.sh`` (the first step of installing) fail at once, so a script that went on
    to install would exit 1 saying so."""
    env = dict(os.environ)
    if not installable:
        env["PYTHON"] = "/bin/false"
    return subprocess.run(
        [str(REPO / "scripts" / script), *arguments], env=env, capture_output=True, text=True, timeout=60, cwd=REPO
    )


def test_stack_help_prints_the_usage_and_starts_nothing() -> None:
    for flag in ("--help", "-h"):
        done = run("stack", flag)
        assert (done.returncode, done.stderr) == (0, ""), done.stderr
        assert done.stdout.startswith("usage: ./scripts/stack [-h | --help]\n")
        assert "socialgraph up" in done.stdout


def test_stack_refuses_any_argument() -> None:
    done = run("stack", "--port", "9000")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        "scripts/stack: unknown argument '--port' (it takes none; settings are SG_* environment variables)\n"
        "usage: ./scripts/stack [-h | --help]\n"
    )


def test_test_help_prints_the_usage_and_installs_nothing() -> None:
    done = run("test", "-k", "x", "--help")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.startswith("usage: ./scripts/test [-h | --help] [PYTEST_ARGUMENT ...]\n")
    assert "goes to pytest" in done.stdout
    assert "SG_TEST_WORKERS" in done.stdout
    assert "== install" not in done.stdout


def test_test_refuses_an_option_pytest_does_not_take_before_the_long_phases() -> None:
    """After the install (a no-op here: what the tests run on is installed), pytest's own parser
    judges the arguments; nothing else runs."""
    done = run("test", "tests/unit", "--no-such-option", installable=True)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "unrecognized arguments: --no-such-option" in done.stderr
    assert done.stderr.endswith(
        "scripts/test: pytest does not take these arguments: tests/unit --no-such-option\n"
        "usage: ./scripts/test [-h | --help] [PYTEST_ARGUMENT ...]\n"
    )
    assert "== generated code is current" not in done.stdout


def test_the_stack_header_says_what_it_starts() -> None:
    """Its first comment names each server with its default port and each process ``up`` starts."""
    from socialgraph_devstack.settings import VARIABLES
    from socialgraph_devstack.stack import COMPONENTS

    header = " ".join(
        line.lstrip("# ") for line in (REPO / "scripts" / "stack").read_text().splitlines()[1:] if line.startswith("#")
    )
    for server, variable in (
        ("DynamoDB Local", "SG_DYNAMODB_LOCAL_PORT"),
        ("Redis", "SG_REDIS_PORT"),
        ("broker", "SG_KAFKA_PORT"),
        ("object store", "SG_BROKER_STORE_PORT"),
    ):
        assert f"{server} ({VARIABLES[variable][0]}" in header, server
    assert all(process in header for process in COMPONENTS)


def fake_python(folder: Path, version: tuple[int, int, int]) -> Path:
    """A ``python`` that reports ``version`` (to ``--version`` and to code run with ``-c``)."""
    path = folder / f"python{version[0]}.{version[1]}"
    path.write_text(
        "#!/bin/sh\n"
        f'[ "$1" = --version ] && {{ echo "Python {".".join(map(str, version))}"; exit 0; }}\n'
        f'exec {sys.executable} -c "import sys; sys.version_info = {version}; exec(sys.argv[1])" "$2"\n'
    )
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(("version", "accepted"), [((3, 10, 13), False), ((3, 11, 2), True), ((3, 13, 0), True)])
def test_bootstrap_takes_python_3_11_and_newer(tmp_path: Path, version: tuple[int, int, int], accepted: bool) -> None:
    """In a copy whose .venv is installed already (its stamp current), so that nothing is installed."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "bootstrap.sh", tmp_path / "scripts")
    inputs = [
        "pyproject.toml",
        "clients/python/pyproject.toml",
        "devstack/pyproject.toml",
        "requirements/constraints.txt",
    ]
    for name in inputs:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(f"{name}\n")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to(sys.executable)
    stamp = hashlib.sha256("".join(f"{name}\n" for name in inputs).encode()).hexdigest()
    (tmp_path / ".venv" / ".socialgraph-installed").write_text(f"{stamp}\n")
    python = fake_python(tmp_path, version)
    done = subprocess.run(
        ["bash", "scripts/bootstrap.sh"],
        env={**os.environ, "PYTHON": str(python)},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    if accepted:
        assert (done.returncode, done.stderr) == (0, "")
    else:
        assert done.returncode == 1
        assert done.stderr.startswith("socialgraph needs Python 3.11 or newer (found: Python 3.10.13;")
