"""The client package (``clients/python``) built as a release is: its sdist, then the wheel built from
that sdist (a file the sdist leaves out is missing from the wheel too)."""

from __future__ import annotations

import email.parser
import email.policy
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from email.message import Message
from pathlib import Path

__all__ = ["CLIENT", "Built", "build_client", "wheel_metadata"]

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "python"


@dataclass(frozen=True)
class Built:
    sdist: Path
    wheel: Path

    def wheel_names(self) -> set[str]:
        with zipfile.ZipFile(self.wheel) as archive:
            return set(archive.namelist())

    def sdist_names(self) -> set[str]:
        """The sdist's files, without its top folder (``socialgraph_client-1.3.0/``)."""
        with tarfile.open(self.sdist) as archive:
            return {name.partition("/")[2] for name in archive.getnames() if "/" in name}


def build_client(out: Path) -> Built:
    """Build into ``out`` from a copy of the package without build leftovers (a stale ``build/`` or
    ``*.egg-info`` in the checkout would put deleted modules back). ``uv build`` without build
    isolation, with this environment's setuptools (pinned, 77 or later for the licence fields):
    about 2 s, where an isolated build fetches setuptools and takes about 10."""
    source = out / "source"
    shutil.copytree(CLIENT, source, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"))
    dist = out / "dist"
    uv = Path(sys.executable).parent / "uv"
    subprocess.run(
        [str(uv), "build", "--quiet", "--no-build-isolation", "--python", sys.executable, "-o", str(dist), str(source)],
        check=True,
        timeout=300,
    )
    (sdist,) = dist.glob("socialgraph_client-*.tar.gz")
    (wheel,) = dist.glob("socialgraph_client-*.whl")
    return Built(sdist, wheel)


def wheel_metadata(wheel: Path) -> Message:
    """The wheel's ``METADATA`` (core metadata: an email-style header block, the README as body)."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        text = archive.read(name).decode()
    return email.parser.Parser(policy=email.policy.compat32).parsestr(text)
