"""A DynamoDB Local of one test alone, which the test may kill, pause and start again.

On disk (``-dbPath`` in the test's tmp_path), not in memory: a DynamoDB Local killed and started
again on the same files keeps its tables, items and stream records (measured: 100 items and
their 100 stream records all there after a ``kill -9``), so "down and back" is an outage, not a
new empty database. Starting one costs about 2 s; the session's DynamoDB Local is shared by
other tests and must never be stopped or paused.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from socialgraph_devstack.processes import ManagedProcess, free_port, port_is_open, start_dynamodb_local

__all__ = ["OwnDynamoDB", "own_dynamodb"]


@dataclass
class OwnDynamoDB:
    port: int
    log_dir: Path
    data_dir: Path
    process: ManagedProcess
    paused: bool = False

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        """``kill -9`` the java process: every connection to it is reset, new ones are refused."""
        self.resume()
        self.process.process.kill()
        self.process.process.wait(timeout=10)
        assert not port_is_open(self.port)

    def restart(self) -> None:
        """Start again on the same port and files; ready (listening) when this returns."""
        self.process = start_dynamodb_local(self.port, self.log_dir, self.data_dir)

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
    log_dir, data_dir = tmp_path / "dynamodb-logs", tmp_path / "dynamodb-data"
    value = OwnDynamoDB(port, log_dir, data_dir, start_dynamodb_local(port, log_dir, data_dir))
    try:
        yield value
    finally:
        value.resume()
        value.process.stop()
