"""`socialgraph import` edges/s vs bare TransactWriteItems batches of the same items.

Run: .venv/bin/python -m bench.import_edges [--rows 6000] [--users 1000] [--concurrency 8]
One DynamoDB Local; each pass writes into tables of its own, made without streams (DynamoDB
Local slows down with every stream record it holds, which would favour whichever pass ran first),
in the order bare, import, import, bare, each figure the mean of its two passes. The bare
baseline sends the very transactions the import would (same packing: up to 100 elements, one
capped outgoing-count update per follower) from a pool of ``concurrency`` threads, built before
the clock starts; the import runs the whole path (read and check the CSV, pack, schedule, commit,
keep the state and the reject file) in this process. SPEC §8 asks for a ratio of at least 0.5.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import ClientError

from bench.harness import private_stack
from graph_service.domain.times import now_us
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING, TableNames, table_specs
from graph_service.entrypoints.importer import run_import
from graph_service.entrypoints.logging import configure_logging
from graph_service.operations.import_batches import pack, transaction
from graph_service.operations.import_rows import RowParser
from graph_service.operations.importer import ImportOptions, prepare
from graph_service.operations.progress import meter
from graph_service.settings import Settings


def fresh_tables(settings: Settings, prefix: str) -> Settings:
    """The project's tables under ``prefix``, without streams."""
    tables = replace(settings, table_prefix=prefix)
    client = boto3.client("dynamodb", endpoint_url=settings.dynamodb_endpoint, region_name=settings.aws_region)
    for spec in table_specs(TableNames(tables.table_prefix)):
        client.create_table(**{k: v for k, v in spec.items() if k != "StreamSpecification"})
        client.get_waiter("table_exists").wait(TableName=spec["TableName"], WaiterConfig={"Delay": 0.05})  # type: ignore[typeddict-item]  # the stubs want whole seconds; botocore sleeps any
    return tables


def edge_list(rows: int, users: int, seed: int = 7) -> list[tuple[int, int]]:
    """Distinct random pairs among ``users`` accounts (no self-follows), in random order."""
    chooser = random.Random(seed)
    pairs: dict[tuple[int, int], None] = {}
    while len(pairs) < rows:
        a, b = chooser.randint(1, users), chooser.randint(1, users)
        if a != b:
            pairs[(a, b)] = None
    return list(pairs)


def bare(settings: Settings, pairs: list[tuple[int, int]], concurrency: int) -> float:
    """Edges/s of the import's transactions sent as they are, ``concurrency`` at a time."""
    parser = RowParser(now_us())
    lines = [(n, parser.parse(n, f"{a},{b}\n".encode())) for n, (a, b) in enumerate(pairs, start=1)]
    batches = [
        transaction(unit.rows, settings.table(FOLLOWERS), settings.table(FOLLOWING), settings.max_following)[0]
        for unit in pack(lines)
    ]
    client = boto3.client("dynamodb", endpoint_url=settings.dynamodb_endpoint, region_name=settings.aws_region)

    def send(elements: list[dict[str, Any]]) -> None:
        while True:
            try:
                client.transact_write_items(TransactItems=elements)  # type: ignore[arg-type]  # plain dicts, not the stubs' TypedDicts
                return
            except ClientError as exc:  # a conflict with a concurrent batch on a shared count: again
                if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                    raise

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(send, batches))
    return len(pairs) / (time.perf_counter() - started)


def imported(settings: Settings, pairs: list[tuple[int, int]], concurrency: int, work: Path) -> float:
    """Edges/s of the import path, from the CSV file to the committed batches."""
    work.mkdir(parents=True, exist_ok=True)
    source = work / "edges.csv"
    source.write_text("follower_id,followee_id\n" + "".join(f"{a},{b}\n" for a, b in pairs))
    options = ImportOptions(
        source=source,
        state_path=work / "state.json",
        rejects_path=work / "rejects.csv",
        concurrency=concurrency,
    )

    async def go() -> float:
        started = time.perf_counter()
        state, fresh = prepare(options)
        with meter("import", stream=work.joinpath("progress.log").open("w"), every_seconds=3600) as progress:
            result = await run_import(settings, options, state, fresh=fresh, stop=asyncio.Event(), meter=progress)
        assert result.written_now == len(pairs), result
        return len(pairs) / (time.perf_counter() - started)

    return asyncio.run(go())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=6000)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    configure_logging("warning")
    pairs = edge_list(args.rows, args.users)
    figures: dict[str, list[float]] = {"bare": [], "import": []}
    with private_stack(with_service=False) as stack, tempfile.TemporaryDirectory(prefix="sg-import-") as tmp:
        bare(fresh_tables(stack.settings, "bench_warm_"), edge_list(300, args.users, seed=1), args.concurrency)
        for number, kind in enumerate(("bare", "import", "import", "bare")):
            tables = fresh_tables(stack.settings, f"bench_{number}_")
            if kind == "bare":
                figures[kind].append(bare(tables, pairs, args.concurrency))
            else:
                figures[kind].append(imported(tables, pairs, args.concurrency, Path(tmp) / str(number)))
    baseline, measured = statistics.mean(figures["bare"]), statistics.mean(figures["import"])
    report = {
        "benchmark": "import_edges",
        "rows": args.rows,
        "users": args.users,
        "concurrency": args.concurrency,
        "import_edges_per_second": round(measured, 1),
        "bare_transact_write_items_edges_per_second": round(baseline, 1),
        "import_passes": [round(f, 1) for f in figures["import"]],
        "bare_passes": [round(f, 1) for f in figures["bare"]],
        "ratio": round(measured / baseline, 3),
        "target": 0.5,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
