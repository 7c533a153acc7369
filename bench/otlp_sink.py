"""An OTLP/gRPC trace receiver that drops what it is sent: the collector of ``bench.tracing_overhead``.

Run: .venv/bin/python -m bench.otlp_sink PORT
Answers ``TraceService/Export`` on 127.0.0.1:PORT and counts the spans; on SIGTERM it prints
``{"spans": N}`` and exits, so the benchmark can check that the traced service really exported.
A process of its own, so that decoding the spans takes no CPU from the load generator.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


class Sink(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans = 0
        self._lock = threading.Lock()

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        count = sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)
        with self._lock:
            self.spans += count
        return trace_service_pb2.ExportTraceServiceResponse()


def main() -> None:
    sink = Sink()
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(sink, server)  # type: ignore[no-untyped-call]  # generated without annotations
    server.add_insecure_port(f"127.0.0.1:{int(sys.argv[1])}")
    server.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    stop.wait()
    server.stop(None)
    print(json.dumps({"spans": sink.spans}), flush=True)


if __name__ == "__main__":
    main()
