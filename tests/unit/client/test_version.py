"""The client's version follows the API, and the server depends on exactly this client."""

from __future__ import annotations

import hashlib
import tomllib
from importlib.metadata import version
from pathlib import Path

import socialgraph_client
from socialgraph.v1 import social_graph_pb2

REPO = Path(__file__).resolve().parents[3]


def test_major_version_is_the_api_version() -> None:
    assert social_graph_pb2.DESCRIPTOR.package == socialgraph_client.API_PACKAGE
    api_major = socialgraph_client.API_PACKAGE.rsplit(".v", 1)[1]
    assert socialgraph_client.__version__.split(".")[0] == api_major


def test_version_was_cut_from_these_protos() -> None:
    """A change to protos/ fails here until the version is raised with the new fingerprint."""
    digest = hashlib.sha256()
    root = REPO / "protos"
    for path in sorted(root.rglob("*.proto")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    fingerprint = digest.hexdigest()[:16]
    assert fingerprint == socialgraph_client.API_FINGERPRINT, (
        f"protos/ changed: raise the minor version in clients/python/src/socialgraph_client/_version.py "
        f"(and the server's pin of it) and set API_FINGERPRINT = {fingerprint!r}"
    )


def test_installed_metadata_carries_the_same_version() -> None:
    assert version("socialgraph-client") == socialgraph_client.__version__


def test_server_pins_the_client_of_this_checkout() -> None:
    """Never an unpinned name that a public index could answer with someone else's package."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = [dep for dep in project["dependencies"] if dep.startswith("socialgraph-client")]
    assert pins == [f"socialgraph-client=={socialgraph_client.__version__}"]
