"""The README's two scripts answer ``--help`` and refuse what they do not take, before they install
or start anything (a mistyped option once started the whole stack for 11 minutes)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

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
