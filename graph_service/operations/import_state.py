"""What lets an import stop anywhere (Ctrl-C, ``kill -9``, a lost machine) and go on later as if
it had never stopped: the state file and the reject file.

The state file (JSON, ``FILE.import-state.json`` beside the input unless ``--state``) holds the
input's identity (size, SHA-256, line count), the import's start time (rows without a time are
stamped from it, and no time may be after it), the watermark (every line up to it is settled:
written, already present or rejected, and its reject is in the reject file), the reject file's
length at that watermark, and the tallies so far. It is replaced atomically (temporary file,
fsync, rename, fsync of the directory), and only after the reject file is fsynced, so after a
crash the reject file is at least as long as the state says; a resumed import cuts it back to
that length and redoes the lines after the watermark. A redone row whose edge the lost run had
written is then "already present": the tables end as after one run.

A new import's state (reject file length 0: "not begun") replaces any old one before the reject
file is begun, so that a ``--restart`` killed at any point leaves either the old state with its
reject file untouched or the new state, never an old state whose reject file was cut.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO

from graph_service.operations.import_rows import Reject

__all__ = [
    "ImportFileError",
    "ImportState",
    "InputIdentity",
    "RejectFile",
    "Tally",
    "identify",
    "load_state",
    "save_state",
]

CHUNK = 1 << 20
REJECT_COLUMNS = ("line", "reason", "detail", "raw")
STATE_VERSION = 1


class ImportFileError(Exception):
    """The input, state or reject file cannot be used as it is (the operator's to fix: exit 2)."""


@dataclass(frozen=True, slots=True)
class InputIdentity:
    path: str
    size: int
    sha256: str
    lines: int

    def same_file(self, other: InputIdentity) -> bool:
        return (self.size, self.sha256) == (other.size, other.sha256)


def identify(path: Path) -> InputIdentity:
    """Size, hash and line count of the input, read once; a file holding NUL bytes is not CSV."""
    digest, size, newlines, last = hashlib.sha256(), 0, 0, b"\n"
    try:
        with path.open("rb") as source:
            while chunk := source.read(CHUNK):
                if b"\0" in chunk:
                    raise ImportFileError(f"{path} is not a CSV text file (it holds NUL bytes)")
                digest.update(chunk)
                size += len(chunk)
                newlines += chunk.count(b"\n")
                last = chunk[-1:]
    except OSError as exc:
        raise ImportFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
    lines = newlines + (last != b"\n")
    return InputIdentity(str(path.resolve()), size, digest.hexdigest(), lines)


@dataclass(slots=True)
class Tally:
    """What the import has done so far (over all its runs)."""

    rows: int = 0
    written: int = 0
    already_present: int = 0
    rejected: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, object]:
        return {
            "rows": self.rows,
            "written": self.written,
            "already_present": self.already_present,
            "rejected": sum(self.rejected.values()),
            "rejected_by_reason": dict(sorted(self.rejected.items())),
        }


@dataclass(slots=True)
class ImportState:
    input: InputIdentity
    started_us: int
    watermark: int = 0
    rejects_bytes: int = 0
    finished: bool = False
    tally: Tally = field(default_factory=Tally)


def load_state(path: Path) -> ImportState | None:
    """The saved state, None when there is none; an unreadable one is the operator's to look at."""
    try:
        raw = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ImportFileError(f"cannot read the state file {path}: {exc} (--restart starts over)") from exc
    try:
        if raw["version"] != STATE_VERSION:
            raise ValueError(f"version {raw['version']}")
        tally = raw["tally"]
        return ImportState(
            input=InputIdentity(**raw["input"]),
            started_us=int(raw["started_us"]),
            watermark=int(raw["watermark"]),
            rejects_bytes=int(raw["rejects_bytes"]),
            finished=bool(raw["finished"]),
            tally=Tally(tally["rows"], tally["written"], tally["already_present"], Counter(tally["rejected"])),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ImportFileError(
            f"the state file {path} is not one this version wrote: {exc} (--restart starts over)"
        ) from exc


def save_state(path: Path, state: ImportState) -> None:
    """Replace the state file atomically and durably. A path that cannot be written (no such
    directory, no permission, disk full) is the operator's to fix: ``ImportFileError``, and the
    old state file, if any, is left as it was."""
    body = {
        "version": STATE_VERSION,
        "input": asdict(state.input),
        "started_us": state.started_us,
        "watermark": state.watermark,
        "rejects_bytes": state.rejects_bytes,
        "finished": state.finished,
        "tally": {
            "rows": state.tally.rows,
            "written": state.tally.written,
            "already_present": state.tally.already_present,
            "rejected": dict(state.tally.rejected),
        },
    }
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        try:
            with temporary.open("w", encoding="utf-8") as out:
                json.dump(body, out, indent=1)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)  # gone after the rename; after a failure, not left behind
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except OSError as exc:
        raise ImportFileError(f"cannot write the state file {path}: {exc.strerror or exc}") from exc


class RejectFile:
    """The reject file (CSV ``line,reason,detail,raw``), appended in line order. Failing to write
    it (disk full) is ``ImportFileError``, as failing to open it is."""

    def __init__(self, path: Path, *, keep_bytes: int) -> None:
        """A new file (``keep_bytes`` 0: the state of a new import, saved before its reject file
        was begun), or the old one cut back to ``keep_bytes``."""
        self.path = path
        try:
            if not keep_bytes:
                self._out: IO[str] = path.open("w", encoding="utf-8", newline="")
                csv.writer(self._out, lineterminator="\n").writerow(REJECT_COLUMNS)
            else:
                if path.stat().st_size < keep_bytes:
                    raise ImportFileError(
                        f"the reject file {path} is shorter than the state says (--restart starts over)"
                    )
                self._out = path.open("r+", encoding="utf-8", newline="")
                self._out.truncate(keep_bytes)
                self._out.seek(keep_bytes)
        except FileNotFoundError as exc:
            raise ImportFileError(f"the reject file {path} is gone (--restart starts over)") from exc
        except OSError as exc:
            raise ImportFileError(f"cannot write the reject file {path}: {exc.strerror or exc}") from exc
        self._writer = csv.writer(self._out, lineterminator="\n")

    def _failed(self, exc: OSError) -> ImportFileError:
        return ImportFileError(f"cannot write the reject file {self.path}: {exc.strerror or exc}")

    def write(self, rejects: list[Reject]) -> None:
        try:
            self._writer.writerows((r.line, r.reason.value, r.detail, r.raw) for r in rejects)
        except OSError as exc:
            raise self._failed(exc) from exc

    def sync(self) -> int:
        """Make what was written durable; the file's length."""
        try:
            self._out.flush()
            os.fsync(self._out.fileno())
            return os.fstat(self._out.fileno()).st_size
        except OSError as exc:
            raise self._failed(exc) from exc

    def close(self) -> None:
        """Close the file; what it could not write is lost, which the saved state never counts
        (it counts only what ``sync`` made durable)."""
        try:
            self._out.close()
        except OSError as exc:
            raise self._failed(exc) from exc
