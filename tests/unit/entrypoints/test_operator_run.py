"""What ``import``, ``fsck`` and ``reconcile`` share: the line naming the endpoint, region and tables
they are about to touch, and the run's metrics file for node_exporter's textfile collector (written
at the start, as a progress meter moves, and at the end with the exit code, keeping the last success)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from graph_service.domain.errors import Unavailable
from graph_service.entrypoints.operator_run import measured, target_line
from graph_service.operations.progress import meter
from graph_service.settings import Settings
from graph_service.telemetry.build_info import build_info
from graph_service.telemetry.operator_runs import FsckRunMetrics, ImportRunMetrics, RunMetrics


def test_the_target_line_names_endpoint_region_tables_and_cache() -> None:
    local = Settings(dynamodb_endpoint="http://127.0.0.1:8000", table_prefix="sg_")
    assert target_line("import", local) == (
        "socialgraph import: DynamoDB http://127.0.0.1:8000 (region us-east-1), tables sg_*"
    )
    cached = Settings(dynamodb_endpoint="http://127.0.0.1:8000", redis_url="rediss://ops:s3cret@cache.internal:6380/0")
    assert target_line("fsck", cached, cache_url=cached.redis_url).endswith(
        ", tables sg_*, cache rediss://cache.internal:6380/0"
    )
    assert target_line("fsck", Settings(), cache_url="").endswith(", no cache")


def test_without_an_endpoint_the_line_names_the_regional_aws_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB", raising=False)
    line = target_line("reconcile", Settings(aws_region="eu-west-1", table_prefix="prod_"))
    assert line == (
        "socialgraph reconcile: DynamoDB https://dynamodb.eu-west-1.amazonaws.com (region eu-west-1), tables prod_*"
    )


def samples(path: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(path.read_text()):
        for sample in family.samples:
            found[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return found


def common(path: Path, name: str, command: str) -> float:
    return samples(path)[f"socialgraph_operator_{name}", (("command", command),)]


def test_a_run_is_in_the_file_from_start_to_end_with_its_progress(tmp_path: Path) -> None:
    path = tmp_path / "import.prom"
    metrics = ImportRunMetrics(path, every_seconds=0)
    seen_while_running: list[tuple[float, float, float]] = []

    def work() -> int:
        seen_while_running.append((common(path, "running", "import"), common(path, "exit_code", "import"), 0))
        with meter("import", 10, every_seconds=3600) as progress:
            progress.advance(4)
            done = common(path, "progress_done", "import"), common(path, "progress_total", "import")
            seen_while_running.append((*done, samples(path)["socialgraph_import_rows", (("outcome", "written"),)]))
        return 0

    metrics.refresh_with(lambda: metrics.tally(read=4, written=3, already_present=0, rejected={"SELF_FOLLOW": 1}))
    assert measured("import", metrics, work) == 0
    assert seen_while_running == [(1, -1, 0), (4, 10, 3)]
    assert common(path, "running", "import") == 0
    assert common(path, "exit_code", "import") == 0
    assert common(path, "last_success_timestamp_seconds", "import") > 0
    assert samples(path)["socialgraph_import_rejected_rows", (("reason", "SELF_FOLLOW"),)] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["import.prom"]  # the temporary file was renamed
    release = [labels for name, labels in samples(path) if name == "socialgraph_build_info"]
    assert [dict(labels)["version"] for labels in release] == [build_info().version]


def test_a_failed_run_ends_with_the_exit_code_main_gives_and_keeps_the_last_success(tmp_path: Path) -> None:
    path = tmp_path / "fsck.prom"
    assert measured("fsck", FsckRunMetrics(path, ["edge_one_sided"]), lambda: 0) == 0
    succeeded = common(path, "last_success_timestamp_seconds", "fsck")

    def unreachable() -> int:
        raise Unavailable("DynamoDB query: Could not connect")

    with pytest.raises(Unavailable):
        measured("fsck", FsckRunMetrics(path, ["edge_one_sided"]), unreachable)
    assert common(path, "exit_code", "fsck") == 3
    assert common(path, "last_success_timestamp_seconds", "fsck") == succeeded
    assert samples(path)["socialgraph_fsck_violations", (("kind", "edge_one_sided"),)] == 0  # every kind, at 0

    assert measured("fsck", FsckRunMetrics(path, ["edge_one_sided"]), lambda: 1) == 1
    assert common(path, "exit_code", "fsck") == 1
    assert common(path, "last_success_timestamp_seconds", "fsck") == succeeded


def test_progress_is_written_at_most_every_few_seconds(tmp_path: Path) -> None:
    path = tmp_path / "reconcile.prom"
    metrics = RunMetrics("reconcile", path, every_seconds=3600)
    metrics.start()
    metrics.progress(5, 10)
    assert common(path, "progress_done", "reconcile") == 0  # the next write is the end's
    metrics.end(0)
    assert common(path, "progress_done", "reconcile") == 5


def test_a_metrics_file_that_cannot_be_written_stops_the_run_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "no-such-dir" / "fsck.prom"
    ran: list[bool] = []
    assert measured("fsck", RunMetrics("fsck", path), lambda: ran.append(True) or 0) == 2
    assert ran == []
    assert capsys.readouterr().err == (
        f"socialgraph fsck: cannot write the metrics file {path}: No such file or directory\n"
    )
