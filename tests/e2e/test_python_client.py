"""The Python client package: installable on its own, and a typed client over a real server."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import grpc
import pytest
from socialgraph_client import SocialGraphClient, SocialGraphError

from graph_service.server import RunningServer

REPO = Path(__file__).resolve().parents[2]


def test_client_package_builds_and_imports_on_its_own(tmp_path: Path) -> None:
    """`pip` builds a wheel of clients/python that carries the stubs, their type stubs and the client."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "-w",
            str(tmp_path),
            str(REPO / "clients" / "python"),
        ],
        check=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("socialgraph_client-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for wanted in (
        "socialgraph/v1/social_graph_pb2.py",
        "socialgraph/v1/social_graph_pb2.pyi",
        "socialgraph/v1/social_graph_pb2_grpc.py",
        "socialgraph_client/client.py",
        "socialgraph_client/py.typed",
    ):
        assert wanted in names, wanted
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        timeout=300,
    )
    probe = "import socialgraph_client, socialgraph.v1.social_graph_pb2 as pb; print(socialgraph_client.__file__)"
    out = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); {probe}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.startswith(str(target))


async def test_client_follows_pages_and_raises_typed_errors(server: RunningServer) -> None:
    """The client hides page tokens, returns plain values, and raises SocialGraphError with the reason."""
    async with await SocialGraphClient.connect(f"127.0.0.1:{server.port}") as graph:
        for follower in range(10, 15):
            assert await graph.follow(follower, 1)
        assert await graph.is_following(10, 1)
        walked = [entry.user_id async for entry in graph.iter_followers(1, page_size=2)]
        assert walked == [14, 13, 12, 11, 10]
        assert [entry.user_id async for entry in graph.iter_following(10)] == [1]
        counts = await graph.batch_get_counts([1, 10])
        assert [c.user_id for c in counts] == [1, 10]
        with pytest.raises(SocialGraphError) as raised:
            await graph.follow(3, 3)
        assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT
        assert raised.value.reason == "SELF_FOLLOW"
        assert raised.value.metadata == {"user_id": "3"}
