"""How the server notices that a file it serves from (callers, certificates) was replaced or edited."""

from __future__ import annotations

from pathlib import Path

__all__ = ["Stamp", "stamp"]

Stamp = tuple[int, int, int] | None


def stamp(path: Path) -> Stamp:
    """(modification time in ns, size, inode); None when the file cannot be looked at. Any edit
    or an atomic replace (a new inode) changes it."""
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_mtime_ns, found.st_size, found.st_ino
