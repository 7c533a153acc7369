"""What tracing costs a cached read: ``serve`` with tracing off vs on, in one run on one machine.

Run: .venv/bin/python -m bench.tracing_overhead [--seconds 1] [--rounds 6] [--concurrency 32]

Three ``serve`` processes run at once against the same DynamoDB Local and Redis:

- ``off``: no ``OTEL_*`` variable (no tracer provider, no tracing interceptor, no spans);
- ``on``: ``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at a local OTLP/gRPC receiver that drops what it
  gets (``bench.otlp_sink``, a process of its own), every call sampled (the SDK's default sampler;
  the calls carry no ``traceparent``, so each is the root of its own trace): the worst case;
- ``sampled_1pct``: the same exporter, ``OTEL_TRACES_SAMPLER=parentbased_traceidratio`` with
  ``OTEL_TRACES_SAMPLER_ARG=0.01``: what ``docs/operating.md`` advises for a busy service.

Per RPC (the cached reads of ``bench.cached_reads``), short slots drive one service then the next
(the order turns each round) with the same closed-loop client, so drift of a shared machine falls
on all. Figures per service, as ratios to ``off``: ``throughput_ratio`` (median of the rounds) and
``cpu_ratio`` (off's CPU seconds per call over the service's, from /proc/<pid>/stat: less disturbed
by other load than throughput). Ratios below 1 are the cost. The receiver's span count is checked,
so an ``on`` that exported nothing cannot pass for a cheap one.

``implied_ratio`` (for ``on``) takes the noise of three services on a shared machine out: the CPU of
the tracing interceptor's per-call code with the SDK, its batch processor and the OTLP encoding of
each span (``tracing_cpu_per_call``, timed in this process around a handler that does nothing, less
that handler alone), over ``off``'s CPU per call: 1 - that share. A cached read makes one span (the
near cache answers it; a read that goes to Redis or DynamoDB makes one more per call there).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc
from socialgraph_devstack.processes import free_port

from bench.cached_reads import calls, seed
from bench.harness import closed_loop, private_stack, start_process, stop_process, wait_port
from bench.metrics_overhead import cpu_seconds
from graph_service.api.interceptors import REQUEST_ID_HEADER
from graph_service.api.tracing import TracingInterceptor

BASELINE = "off"
METHOD = "/socialgraph.v1.SocialGraphService/IsFollowing"


class _Context:
    """What the tracing interceptor reads of a servicer context, as a successful call leaves it."""

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return ()

    def peer(self) -> str:
        return "ipv4:127.0.0.1:50000"

    def code(self) -> None:
        return None

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return ((REQUEST_ID_HEADER, "0" * 32),)


class _Details(grpc.HandlerCallDetails):
    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


class _EncodingExporter(SpanExporter):
    """Encodes each batch as the OTLP exporter does before sending it, and drops it."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        encode_spans(spans).SerializeToString()
        return SpanExportResult.SUCCESS


def tracing_cpu_per_call(n: int = 20_000) -> float:
    """CPU seconds the tracing of one call costs: the interceptor's wrapper, the span through the
    SDK's batch processor, and its OTLP encoding (every thread of this process, so the batch
    worker's too), less the same loop calling the handler bare."""
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(_EncodingExporter()))
    interceptor = TracingInterceptor(provider.get_tracer("bench"))

    async def inner(request: object, context: object) -> None:
        return None

    async def continuation(details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[Any, Any]:
        return grpc.unary_unary_rpc_method_handler(inner)

    async def per_call() -> tuple[float, float]:
        traced = (await interceptor.intercept_service(continuation, _Details(METHOD))).unary_unary
        assert traced is not None
        context: Any = _Context()  # what the interceptor reads of grpc.aio's context
        times = []
        for handler in (inner, traced):
            started = time.process_time()
            for _ in range(n):
                await handler(None, context)
            provider.force_flush()
            times.append((time.process_time() - started) / n)
        return times[0], times[1]

    bare, traced = asyncio.run(per_call())
    provider.shutdown()
    return traced - bare


def tracing_environments(sink_port: int) -> dict[str, dict[str, str]]:
    """The ``OTEL_*`` variables of each service (``off`` has none)."""
    on = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink_port}", "OTEL_SERVICE_NAME": "bench-serve"}
    return {
        BASELINE: {},
        "on": on,
        "sampled_1pct": {**on, "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.01"},
    }


async def compare(
    targets: dict[str, str], pids: dict[str, int], *, seconds: float, rounds: int, concurrency: int
) -> dict[str, dict[str, dict[str, float]]]:
    channels = {name: grpc.aio.insecure_channel(target) for name, target in targets.items()}
    try:
        stubs = {name: calls(pb_grpc.SocialGraphServiceStub(channel)) for name, channel in channels.items()}
        report: dict[str, dict[str, dict[str, float]]] = {}
        for call in stubs[BASELINE]:
            for name in stubs:
                for _ in range(300):  # warm: connections, caches
                    await stubs[name][call]()
            ratios: dict[str, list[float]] = {name: [] for name in stubs if name != BASELINE}
            cpu = dict.fromkeys(stubs, 0.0)
            done = dict.fromkeys(stubs, 0.0)
            order = sorted(stubs)
            for round_ in range(rounds):
                rps: dict[str, float] = {}
                for name in order[round_ % len(order) :] + order[: round_ % len(order)]:
                    before, started = cpu_seconds(pids[name]), time.perf_counter()
                    rps[name] = await closed_loop(stubs[name][call], concurrency=concurrency, seconds=seconds)
                    done[name] += rps[name] * (time.perf_counter() - started)
                    cpu[name] += cpu_seconds(pids[name]) - before
                for name in ratios:
                    ratios[name].append(rps[name] / rps[BASELINE])
            per_call = {name: cpu[name] / done[name] for name in stubs}
            report[call] = {
                name: {
                    "rps": round(done[name] / (rounds * seconds)),
                    "cpu_us_per_call": round(per_call[name] * 1e6, 1),
                    **(
                        {}
                        if name == BASELINE
                        else {
                            "throughput_ratio": round(statistics.median(ratios[name]), 3),
                            "cpu_ratio": round(per_call[BASELINE] / per_call[name], 3),
                        }
                    ),
                }
                for name in stubs
            }
        return report
    finally:
        for channel in channels.values():
            await channel.close(None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--followers", type=int, default=200)
    args = parser.parse_args()
    with private_stack(with_service=False) as stack, tempfile.TemporaryDirectory() as tmp:
        sink_port = free_port()
        sink = start_process(["-m", "bench.otlp_sink", str(sink_port)], stack.env, Path(tmp) / "sink.log")
        targets: dict[str, str] = {}
        processes: dict[str, subprocess.Popen[bytes]] = {}
        try:
            wait_port(sink_port)
            base = {k: v for k, v in stack.env.items() if not k.startswith("OTEL_")}
            for name, otel in tracing_environments(sink_port).items():
                port = free_port()
                env = {**base, **otel, "SG_GRPC_ADDRESS": f"127.0.0.1:{port}"}  # start_process gives it a metrics port
                processes[name] = start_process(["-m", "graph_service", "serve"], env, Path(tmp) / f"{name}.log")
                wait_port(port)
                targets[name] = f"127.0.0.1:{port}"
            asyncio.run(seed(targets[BASELINE], args.followers))
            pids = {name: process.pid for name, process in processes.items()}
            report = asyncio.run(
                compare(targets, pids, seconds=args.seconds, rounds=args.rounds, concurrency=args.concurrency)
            )
        finally:
            for process in processes.values():
                stop_process(process)  # SIGTERM: each exports what it still holds
            stop_process(sink)
        exported = json.loads((Path(tmp) / "sink.log").read_text().strip().splitlines()[-1])["spans"]
    if exported == 0:
        raise RuntimeError("the traced services exported no span: the 'on' figures measure nothing")
    cost = tracing_cpu_per_call()
    for figures in report.values():
        figures["on"]["tracing_cpu_us_per_call"] = round(cost * 1e6, 1)
        figures["on"]["implied_ratio"] = round(1 - cost / (figures[BASELINE]["cpu_us_per_call"] / 1e6), 3)
    summary = {
        "benchmark": "tracing_overhead",
        "concurrency": args.concurrency,
        "exporter": "OTLP/gRPC to a local receiver that drops the spans (bench.otlp_sink)",
        "spans_received": exported,
        "results": report,
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
