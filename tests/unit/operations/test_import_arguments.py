"""`socialgraph import` refuses what the operator must fix with exit 2 and one line, before any write."""

from __future__ import annotations

from pathlib import Path

import pytest

from graph_service.entrypoints.cli import main
from graph_service.entrypoints.exits import Exit
from graph_service.operations.import_state import save_state
from graph_service.operations.importer import ImportOptions, prepare


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["import", *argv])
    assert isinstance(code, Exit)  # the command's codes are the documented ones (exits.py), not its own
    return code, capsys.readouterr().err.strip()


def test_a_missing_or_binary_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.csv"
    assert run([str(missing)], capsys) == (2, f"socialgraph import: cannot read {missing}: No such file or directory")
    binary = tmp_path / "edges.csv"
    binary.write_bytes(b"1,2\n\x00")
    assert run([str(binary)], capsys) == (
        2,
        f"socialgraph import: {binary} is not a CSV text file (it holds NUL bytes)",
    )
    assert not (tmp_path / "edges.csv.import-state.json").exists()


def test_a_file_changed_since_its_saved_state_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "edges.csv"
    source.write_text("1,2\n")
    state_path = tmp_path / "edges.csv.import-state.json"
    state, _ = prepare(ImportOptions(source, state_path, tmp_path / "r.csv"))
    save_state(state_path, state)
    source.write_text("1,2\n3,4\n")
    code, err = run([str(source)], capsys)
    assert code == 2
    assert err.startswith(f"socialgraph import: {source} changed since the import recorded in {state_path} began")
    assert err.endswith("--restart imports it from the start (rows already imported are skipped)")


def test_concurrency_must_be_sensible(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run([str(tmp_path / "e.csv"), "--concurrency", "0"], capsys) == (
        2,
        "socialgraph import: --concurrency must be 1..64",
    )


def test_the_help_names_the_file_format_options_and_variables(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["import", "--help"])
    shown = capsys.readouterr().out
    for words in (
        "FILE.csv",
        "--rejects",
        "--state",
        "--concurrency",
        "--restart",
        "SG_MAX_FOLLOWING",
        "SG_TABLE_PREFIX",
    ):
        assert words in shown
