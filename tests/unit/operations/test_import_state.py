"""The resume state and the reject file: saved atomically, read back, refused when the input changed,
and a path that cannot be written is an ``ImportFileError`` (one line, exit 2), never a traceback."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pytest

from graph_service.operations.import_rows import Reason, Reject
from graph_service.operations.import_state import (
    ImportFileError,
    ImportState,
    RejectFile,
    Tally,
    identify,
    load_state,
    save_state,
)
from graph_service.operations.importer import ImportOptions, prepare


def test_identity_is_size_hash_and_line_count(tmp_path: Path) -> None:
    source = tmp_path / "e.csv"
    source.write_bytes(b"1,2\n3,4")
    identity = identify(source)
    assert (identity.size, identity.lines) == (7, 2)
    assert identity.sha256 == hashlib.sha256(b"1,2\n3,4").hexdigest()
    source.write_bytes(b"1,2\n3,5")
    assert not identity.same_file(identify(source))


def test_a_binary_or_missing_file_is_refused(tmp_path: Path) -> None:
    binary = tmp_path / "b.csv"
    binary.write_bytes(b"1,2\n\0\0")
    with pytest.raises(ImportFileError, match="holds NUL bytes"):
        identify(binary)
    with pytest.raises(ImportFileError, match="cannot read"):
        identify(tmp_path / "missing.csv")
    with pytest.raises(ImportFileError, match="cannot read"):
        identify(tmp_path)


def test_state_round_trips_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    source = tmp_path / "e.csv"
    source.write_bytes(b"1,2\n")
    state = ImportState(
        input=identify(source),
        started_us=5,
        watermark=1,
        rejects_bytes=30,
        tally=Tally(rows=3, written=1, already_present=1, rejected=Counter({"BLOCKED": 1})),
    )
    path = tmp_path / "state.json"
    save_state(path, state)
    assert load_state(path) == state
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.csv", "state.json"]
    assert load_state(tmp_path / "none.json") is None


def test_an_unreadable_state_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text("{not json")
    with pytest.raises(ImportFileError, match="--restart starts over"):
        load_state(path)
    path.write_text('{"version": 99}')
    with pytest.raises(ImportFileError, match="not one this version wrote"):
        load_state(path)


def test_a_changed_input_is_refused_unless_restarted(tmp_path: Path) -> None:
    source = tmp_path / "e.csv"
    source.write_bytes(b"1,2\n")
    options = ImportOptions(source, tmp_path / "s.json", tmp_path / "r.csv")
    state, fresh = prepare(options)
    assert fresh
    state.watermark = 1
    save_state(options.state_path, state)
    assert prepare(options) == (state, False)
    source.write_bytes(b"1,3\n")
    with pytest.raises(ImportFileError, match="changed since the import"):
        prepare(options)
    restarted, fresh = prepare(ImportOptions(source, options.state_path, options.rejects_path, restart=True))
    assert fresh
    assert restarted.watermark == 0


def test_the_reject_file_is_csv_and_is_cut_back_to_the_saved_length(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    rejects = RejectFile(path, keep_bytes=0)
    rejects.write([Reject(2, Reason.MALFORMED, "expected two fields", 'a,"b')])
    kept = rejects.sync()
    rejects.write([Reject(9, Reason.BLOCKED, "x", "1,2")])
    rejects.close()
    assert path.read_text() == 'line,reason,detail,raw\n2,MALFORMED,expected two fields,"a,""b"\n9,BLOCKED,x,"1,2"\n'
    again = RejectFile(path, keep_bytes=kept)
    again.write([Reject(9, Reason.BLOCKED, "x", "1,2")])
    again.close()
    assert path.read_text() == 'line,reason,detail,raw\n2,MALFORMED,expected two fields,"a,""b"\n9,BLOCKED,x,"1,2"\n'
    with pytest.raises(ImportFileError, match="shorter than the state says"):
        RejectFile(path, keep_bytes=10_000)
    with pytest.raises(ImportFileError, match="is gone"):
        RejectFile(tmp_path / "gone.csv", keep_bytes=10)


def test_a_state_path_that_cannot_be_written_is_an_import_file_error(tmp_path: Path) -> None:
    """No such directory, or a directory where the file should be: one line for the operator, the
    old state (if any) kept, and no temporary file left behind."""
    source = tmp_path / "e.csv"
    source.write_bytes(b"1,2\n")
    state = ImportState(input=identify(source), started_us=5)
    missing = tmp_path / "no-such-dir" / "state.json"
    with pytest.raises(ImportFileError) as raised:
        save_state(missing, state)
    assert str(raised.value) == f"cannot write the state file {missing}: No such file or directory"
    taken = tmp_path / "taken"
    taken.mkdir()
    with pytest.raises(ImportFileError) as raised:
        save_state(taken, state)
    assert str(raised.value) == f"cannot write the state file {taken}: Is a directory"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.csv", "taken"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a device that is always full)")
def test_a_full_disk_under_the_reject_file_is_an_import_file_error() -> None:
    """Writes are buffered: the disk is found full when they are made durable, or at close."""
    rejects = RejectFile(Path("/dev/full"), keep_bytes=0)
    rejects.write([Reject(2, Reason.MALFORMED, "expected two fields", "a")])
    with pytest.raises(ImportFileError) as raised:
        rejects.sync()
    assert str(raised.value) == "cannot write the reject file /dev/full: No space left on device"
    with pytest.raises(ImportFileError, match="No space left on device"):
        rejects.close()


def test_a_state_of_a_new_import_begins_a_new_reject_file(tmp_path: Path) -> None:
    """Length 0 (saved before the reject file was begun): an old file there is replaced, header first."""
    path = tmp_path / "r.csv"
    path.write_text("line,reason,detail,raw\n9,BLOCKED,x,y\n")
    rejects = RejectFile(path, keep_bytes=0)
    assert rejects.sync() == len("line,reason,detail,raw\n")
    rejects.close()
    assert path.read_text() == "line,reason,detail,raw\n"
