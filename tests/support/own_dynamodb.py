"""A DynamoDB Local of one test alone, which the test may pause (SIGSTOP) and resume: a hung
store, which the session's DynamoDB Local, shared by other tests, must never be. Starting one
costs about 2 s. (A store that is unreachable rather than hung: ``tests/support/tcp_cut.py``.)
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from socialgraph_devstack.processes import ManagedProcess, free_port, start_dynamodb_local

__all__ = ["OwnDynamoDB", "own_dynamodb"]


@dataclass
class OwnDynamoDB:
    port: int
    process: ManagedProcess
    paused: bool = False

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def pause(self) -> None:
        """SIGSTOP: connections are accepted by the kernel but nothing is answered (a hung store)."""
        os.kill(self.process.process.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        if self.paused:
            os.kill(self.process.process.pid, signal.SIGCONT)
            self.paused = False

    @contextlib.contextmanager
    def pausing(self) -> Iterator[None]:
        """Paused until the block ends (resumed even if it fails)."""
        self.pause()
        try:
            yield
        finally:
            self.resume()


@pytest.fixture
def own_dynamodb(tmp_path: Path) -> Iterator[OwnDynamoDB]:
    port = free_port()
    value = OwnDynamoDB(port, start_dynamodb_local(port, tmp_path / "dynamodb-logs"))
    try:
        yield value
    finally:
        value.resume()
        value.process.stop()
