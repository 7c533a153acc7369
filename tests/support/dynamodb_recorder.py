"""A recording HTTP proxy in front of DynamoDB Local: what one component asks of DynamoDB and
DynamoDB Streams, seen on the wire, with no change to the component (point its
``SG_DYNAMODB_ENDPOINT`` at ``RecordingProxy.endpoint``).

Every request is forwarded unchanged and its answer returned unchanged; the proxy notes, per call,
the operation (``X-Amz-Target``: ``DynamoDB_20120810.GetItem``, ``DynamoDBStreams_20120810.GetRecords``)
and every table the request touches: ``TableName``, each table of ``RequestItems`` and of
``TransactItems`` (with the kind of each item: ``Put``, ``ConditionCheck``...), the table of a
``StreamArn``, and for ``GetRecords``, whose request names only a shard iterator, the stream that
iterator was handed out for (read from the ``GetShardIterator`` and ``GetRecords`` answers). A call
that DynamoDB refused is noted too: an operation attempted is an operation the caller's role must
allow, whatever the answer. What the notes mean in IAM terms is the reader's business
(``tests/deploy/test_iam_roles.py``).

The proxy runs on an event loop of its own, on a thread, so it keeps answering while the test's
loop waits on something blocking (a ``subprocess.run``, a Lambda handler on a worker thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = ["Access", "RecordingProxy", "accesses_of", "recording_proxy", "table_of_stream"]

DYNAMODB_TARGET = "DynamoDB_20120810."
STREAMS_TARGET = "DynamoDBStreams_20120810."
MAX_HEAD = 64 * 1024


@dataclass(frozen=True, order=True)
class Access:
    """One table touched by one call, as the request says it."""

    operation: str
    """The API operation: ``GetItem``, ``TransactWriteItems``, ``GetRecords``..."""
    table: str
    """The full table name; empty when the request names none (``ListTables``, ``ListStreams`` of
    every table), ``?`` when the proxy could not tell (a shard iterator it never saw handed out)."""
    part: str = ""
    """For ``TransactWriteItems``/``TransactGetItems`` the item's kind (``Put``, ``Update``,
    ``Delete``, ``ConditionCheck``, ``Get``); for ``BatchWriteItem`` ``PutRequest``/``DeleteRequest``."""
    index: str = ""
    """The ``IndexName`` of a ``Query`` or ``Scan``."""
    stream: bool = False
    """The call names the table's stream (a Streams operation), not the table."""


def table_of_stream(arn: str) -> str:
    """The table name in a stream ARN (``arn:aws:dynamodb:REGION:ACCOUNT:table/NAME/stream/LABEL``),
    ``?`` if it is not one."""
    _, found, rest = arn.partition(":table/")
    name, stream, _ = rest.partition("/stream/")
    return name if found and stream and name else "?"


def accesses_of(target: str, request: dict[str, Any], iterator_tables: dict[str, str]) -> list[Access]:
    """The tables one request touches. ``iterator_tables`` maps the shard iterators handed out so
    far to their tables (``GetRecords`` names only an iterator)."""
    if target.startswith(STREAMS_TARGET):
        operation = target.removeprefix(STREAMS_TARGET)
        if "StreamArn" in request:
            table = table_of_stream(str(request["StreamArn"]))
        elif "ShardIterator" in request:
            table = iterator_tables.get(str(request["ShardIterator"]), "?")
        else:  # ListStreams: of one table, or of the whole account
            table = str(request.get("TableName", ""))
        return [Access(operation, table, stream=True)]
    operation = target.removeprefix(DYNAMODB_TARGET) if target.startswith(DYNAMODB_TARGET) else f"?{target}"
    if "TransactItems" in request:
        return [
            Access(operation, str(body.get("TableName", "?")), part=kind)
            for element in request["TransactItems"]
            for kind, body in element.items()
        ]
    if "RequestItems" in request:
        found: list[Access] = []
        for table, value in request["RequestItems"].items():
            if isinstance(value, list):  # BatchWriteItem: a list of PutRequest/DeleteRequest
                found += [Access(operation, table, part=kind) for element in value for kind in element]
            else:  # BatchGetItem: {Keys, ProjectionExpression...}
                found.append(Access(operation, table))
        return found
    return [Access(operation, str(request.get("TableName", "")), index=str(request.get("IndexName", "")))]


@dataclass
class _Message:
    head: bytes
    raw_body: bytes
    """As it came on the wire (chunked framing kept), to forward unchanged."""
    body: bytes
    """The payload (de-chunked, gunzipped), to read."""
    headers: dict[str, str]

    @property
    def closes(self) -> bool:
        return self.headers.get("connection", "").lower() == "close"


def _headers(head: bytes) -> dict[str, str]:
    lines = head.decode("latin-1").split("\r\n")[1:]
    found: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if sep:
            found[name.strip().lower()] = value.strip()
    return found


async def _read_message(stream: asyncio.StreamReader, *, response: bool) -> _Message | None:
    """One HTTP/1.1 message (head and body), or None at a clean end of the connection."""
    try:
        head = await stream.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise
    if len(head) > MAX_HEAD:
        raise ValueError("HTTP head too large")
    headers = _headers(head)
    if headers.get("expect", "").lower() == "100-continue":
        raise ValueError("Expect: 100-continue is not supported by the recording proxy")
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raw, body = bytearray(), bytearray()
        while True:
            size_line = await stream.readuntil(b"\r\n")
            raw += size_line
            size = int(size_line.split(b";")[0].strip(), 16)
            chunk = await stream.readexactly(size + 2)
            raw += chunk
            body += chunk[:-2]
            if size == 0:
                break
        raw_body, payload = bytes(raw), bytes(body)
    elif "content-length" in headers:
        raw_body = payload = await stream.readexactly(int(headers["content-length"]))
    elif response:  # no length: the body runs to the end of the connection
        raw_body = payload = await stream.read()
        headers["connection"] = "close"
    else:
        raw_body = payload = b""
    if headers.get("content-encoding", "").lower() == "gzip":
        payload = gzip.decompress(payload)
    return _Message(head, raw_body, payload, headers)


class RecordingProxy:
    """Forwards to ``upstream`` (``http://host:port``) and records ``accesses``, until ``stop``."""

    def __init__(self, upstream: str, name: str) -> None:
        parts = urlsplit(upstream)
        assert parts.hostname, upstream
        assert parts.port, upstream
        self.name = name
        self._upstream = (parts.hostname, parts.port)
        self._lock = threading.Lock()
        self._accesses: set[Access] = set()
        self._calls = 0
        self._problems: list[str] = []
        self._iterator_tables: dict[str, str] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"proxy-{name}", daemon=True)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def endpoint(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def accesses(self) -> set[Access]:
        """Every access recorded so far; fails if the proxy met anything it could not read."""
        with self._lock:
            assert not self._problems, f"the {self.name} proxy: {self._problems}"
            return set(self._accesses)

    @property
    def calls(self) -> int:
        with self._lock:
            return self._calls

    def start(self) -> None:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop)
        self._server = started.result(timeout=10)

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self._loop.close()

    async def _serve(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            upstream_in, upstream_out = await asyncio.open_connection(*self._upstream)
        except OSError:
            client_out.close()
            self._tasks.discard(task)
            return
        try:
            await self._relay(client_in, client_out, upstream_in, upstream_out)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # a client or DynamoDB Local went away mid-message: nothing more to forward
        except Exception as exc:  # reported by accesses(), which the test reads
            with self._lock:
                self._problems.append(repr(exc))
        finally:
            for writer in (client_out, upstream_out):
                writer.close()
            self._tasks.discard(task)

    async def _relay(
        self,
        client_in: asyncio.StreamReader,
        client_out: asyncio.StreamWriter,
        upstream_in: asyncio.StreamReader,
        upstream_out: asyncio.StreamWriter,
    ) -> None:
        """Request, answer, request, answer... on one kept-alive connection (botocore does not
        pipeline: it sends the next request only after it has read the answer)."""
        while True:
            request = await _read_message(client_in, response=False)
            if request is None:
                return
            upstream_out.write(request.head + request.raw_body)
            await upstream_out.drain()
            answer = await _read_message(upstream_in, response=True)
            if answer is None:
                return
            self._record(request, answer)
            client_out.write(answer.head + answer.raw_body)
            await client_out.drain()
            if request.closes or answer.closes:
                return

    def _record(self, request: _Message, answer: _Message) -> None:
        target = request.headers.get("x-amz-target", "")
        try:
            body: dict[str, Any] = json.loads(request.body or b"{}")
            reply: dict[str, Any] = json.loads(answer.body or b"{}")
        except ValueError as exc:
            with self._lock:
                self._problems.append(f"{target}: not JSON ({exc})")
            return
        with self._lock:
            self._calls += 1
            found = accesses_of(target, body, self._iterator_tables)
            self._accesses.update(found)
            # Remember which stream each shard iterator handed out belongs to, for the GetRecords after it.
            for key in ("ShardIterator", "NextShardIterator"):
                if isinstance(reply.get(key), str) and found:
                    self._iterator_tables[reply[key]] = found[0].table


@contextlib.contextmanager
def recording_proxy(upstream: str, name: str) -> Iterator[RecordingProxy]:
    """A started ``RecordingProxy`` in front of ``upstream``, stopped when the block ends."""
    proxy = RecordingProxy(upstream, name)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
