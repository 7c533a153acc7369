"""The report's lines and summary, when a run counts as clean, second looks, and the command's arguments."""

from __future__ import annotations

import io

import pytest
from structlog.testing import capture_logs

from graph_service.cache.inspection import CachedEntry, EntryKind, parse_key
from graph_service.entrypoints.cli import build_parser
from graph_service.entrypoints.fsck import run
from graph_service.operations.fsck import FsckPlan, clean
from graph_service.operations.fsck_confirm import Confirmer
from graph_service.operations.fsck_report import KINDS, Report, Violation
from graph_service.settings import Settings


def test_each_violation_is_one_line_and_one_log_line_once_and_the_summary_counts_by_kind() -> None:
    out = io.StringIO()
    report = Report(out)
    with capture_logs() as logs:
        assert report.add(Violation("edge_one_sided", 5, 6, "followers pk=5 E#6 (at 1) has no following pk=6 E#5"))
        assert not report.add(Violation("edge_one_sided", 5, 6, "followers pk=5 E#6 (at 1) has no following pk=6 E#5"))
        assert report.add(Violation("cache_counts", 7, None, "sg:{7}:cnt = ..."), repaired=True)
        report.summary({"partitions": 3, "cache_entries": 9})
    assert out.getvalue().splitlines() == [
        "edge_one_sided user=5 other=6: followers pk=5 E#6 (at 1) has no following pk=6 E#5",
        "cache_counts user=7: sg:{7}:cnt = ... (repaired: entry deleted)",
        "fsck: 2 violations (cache_counts 1, edge_one_sided 1); 1 repaired (3 partitions, 9 cache entries)",
    ]
    violations = [e for e in logs if e["event"] == "fsck_violation"]
    assert [(e["kind"], e["user_id"], e["other_id"], e["repaired"]) for e in violations] == [
        ("edge_one_sided", 5, 6, False),
        ("cache_counts", 7, None, True),
    ]
    (summary,) = [e for e in logs if e["event"] == "fsck_summary"]
    assert summary["by_kind"] == {"edge_one_sided": 1, "cache_counts": 1}
    assert summary["violations"] == 2
    assert summary["repaired"] == 1


def test_an_unknown_kind_is_a_bug_not_a_line() -> None:
    with pytest.raises(ValueError, match="unknown violation kind"):
        Report(io.StringIO()).add(Violation("edge_sideways", 1, None, ""))


def test_a_run_is_clean_without_violations_or_with_only_cache_ones_all_repaired() -> None:
    repairing = FsckPlan(everything=True, repair_cache=True)
    empty = Report(io.StringIO())
    assert clean(empty, FsckPlan(everything=True))
    cache_only = Report(io.StringIO())
    cache_only.add(Violation("cache_list", 1, None, "x"), repaired=True)
    assert clean(cache_only, repairing)
    assert not clean(cache_only, FsckPlan(everything=True))
    unrepaired = Report(io.StringIO())
    unrepaired.add(Violation("cache_list", 1, None, "x"), repaired=False)
    assert not clean(unrepaired, repairing)
    mixed = Report(io.StringIO())
    mixed.add(Violation("cache_list", 1, None, "x"), repaired=True)
    mixed.add(Violation("counter_drift", 1, None, "y"))
    assert not clean(mixed, repairing)
    assert {k for k in KINDS if k.startswith("cache_")} == {
        "cache_follow_state",
        "cache_list",
        "cache_counts",
        "cache_relationship",
        "cache_mute",
        "cache_account_state",
        "cache_privacy",
    }


async def test_second_looks_all_run_before_the_block_ends() -> None:
    done: list[int] = []

    async def check(n: int) -> None:
        done.append(n)

    async with Confirmer(0.01, workers=2) as later:
        for n in range(5):
            later.add(lambda n=n: check(n))  # type: ignore[misc]  # mypy cannot type the lambda's default
    assert sorted(done) == [0, 1, 2, 3, 4]


async def test_a_failing_second_look_is_raised_at_the_end_of_the_block() -> None:
    async def fail() -> None:
        raise ConnectionError("redis went away")

    with pytest.raises(ConnectionError, match="went away"):
        async with Confirmer(0) as later:
            later.add(fail)


def test_cache_keys_are_named_by_kind_user_and_other_and_the_rest_ignored() -> None:
    assert parse_key("sg:{12}:fs:34") == CachedEntry("sg:{12}:fs:34", EntryKind.FOLLOW_STATE, 12, 34)
    assert parse_key("sg:{12}:rl:34") == CachedEntry("sg:{12}:rl:34", EntryKind.RELATIONSHIP, 12, 34)
    assert parse_key("sg:{12}:fl") == CachedEntry("sg:{12}:fl", EntryKind.FOLLOWERS_LIST, 12)
    assert parse_key("sg:{12}:fg") == CachedEntry("sg:{12}:fg", EntryKind.FOLLOWING_LIST, 12)
    assert parse_key("sg:{12}:cnt") == CachedEntry("sg:{12}:cnt", EntryKind.COUNTS, 12)
    assert parse_key("sg:{12}:pv") == CachedEntry("sg:{12}:pv", EntryKind.PRIVACY, 12)
    for other in (
        "sg:{12}:ep",
        "sg:{12}:pe",
        "sg:{12}:sg",
        "sg:{12}:fl:gone",
        "sg:{12}:fl:fill:ab12",
        "home_timeline:{12}",
    ):
        assert parse_key(other) is None


@pytest.mark.parametrize(
    "argv",
    [
        ["fsck", "0"],
        ["fsck", "x"],
        ["fsck", str(2**64)],
        ["fsck", "--sample", "0"],
        ["fsck", "--all", "--sample", "3"],
        ["fsck", "--all", "--segments", "0"],
        ["fsck", "--all", "--settle-seconds", "-1"],
    ],
)
def test_bad_arguments_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["fsck"], "give USER_IDs, or --all, or --sample N"),
        (["fsck", "5", "--all"], "give USER_IDs, or --all, or --sample N"),
        (["fsck", "5", "--sample", "2"], "give USER_IDs, or --all, or --sample N"),
        (["fsck", "--all", "--segments", "1000001"], "--segments is at most 1000000"),
        (["fsck", "--all", "--repair-cache"], "--repair-cache needs the cache"),
    ],
)
def test_what_argparse_cannot_see_is_a_usage_error_before_anything_connects(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(argv)
    assert run(Settings(redis_url=""), args) == 2
    assert message in capsys.readouterr().err


def test_the_help_describes_the_lifecycle_checks_and_lists_every_kind(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        build_parser(["fsck", "--help"]).parse_args(["fsck", "--help"])
    assert ended.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "The account lifecycle (deactivate, reactivate, delete) is checked too" in shown
    for kind in KINDS:
        assert kind in shown
