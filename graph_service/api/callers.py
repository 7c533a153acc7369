"""The callers file (SPEC §7.1): who may call, with which scopes, known by a token's SHA-256.

    [[caller]]
    name = "feed"
    scopes = ["read"]
    token_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

The file holds hashes only, so it is not a secret. Anything unexpected (an unknown key or scope,
a duplicate name or hash, a hash that is not 64 hex digits, an empty file) is refused with a
message naming the line, so a typo or a file caught half written can never open or close access
silently. A file with no callers but a comment is taken: it refuses every call, which is how the
last caller is revoked.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import tomllib
from dataclasses import dataclass

__all__ = ["SCOPES", "Caller", "CallerTable", "CallersFileError", "caller_entry", "mint_token", "token_sha256"]

SCOPES = ("read", "write", "admin")
"""SPEC §7.1. ``admin`` is for the account lifecycle RPCs (§3b); no RPC of this release needs it,
and it grants nothing else: a caller that also reads or writes lists those scopes too."""
TOKEN_PREFIX = "sgt_"  # noqa: S105 - a marker in front of random tokens, not a secret
"""Minted tokens start with this, so secret scanners and humans can tell one when they see it."""
_KEYS = {"name", "scopes", "token_sha256"}
_HEX64 = re.compile(r"[0-9a-f]{64}")
_TABLE_HEADER = re.compile(r"^\s*\[\[\s*caller\s*\]\]")


class CallersFileError(ValueError):
    """The callers file cannot be used; the message names the line."""


@dataclass(frozen=True, slots=True)
class Caller:
    name: str
    scopes: frozenset[str]


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def mint_token() -> str:
    """A new random bearer token (256 bits)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def caller_entry(name: str, scopes: list[str], token: str) -> str:
    """The ``[[caller]]`` table to append to the callers file for ``token``."""
    listed = ", ".join(f'"{scope}"' for scope in scopes)
    return f'[[caller]]\nname = "{name}"\nscopes = [{listed}]\ntoken_sha256 = "{token_sha256(token)}"\n'


class CallerTable:
    """The callers of one version of the file; ``find`` looks a token up in constant time."""

    def __init__(self, callers: dict[bytes, Caller]) -> None:
        self._callers = list(callers.items())

    def __len__(self) -> int:
        return len(self._callers)

    def find(self, token: str) -> Caller | None:
        """The caller whose hash is the token's. Every entry is compared (no early exit, no dict
        lookup), so the time taken does not depend on which entry, if any, matched."""
        digest = hashlib.sha256(token.encode()).digest()
        found: Caller | None = None
        for known, caller in self._callers:
            if hmac.compare_digest(digest, known):
                found = caller
        return found

    @classmethod
    def parse(cls, text: str) -> CallerTable:
        if not text.strip():
            # Most often a file caught while being rewritten; an empty table on purpose is written
            # with a comment (``# no callers``), which is accepted.
            raise CallersFileError(
                "the file is empty (half written?); to refuse every caller on purpose, leave a comment in it"
            )
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise CallersFileError(f"not valid TOML: {exc}") from exc
        unknown = set(document) - {"caller"}
        if unknown:
            raise CallersFileError(f"unknown top-level key {sorted(unknown)[0]!r} (only [[caller]] tables)")
        entries = document.get("caller", [])
        if not isinstance(entries, list):
            raise CallersFileError("'caller' must be an array of tables: write [[caller]]")
        lines = _table_lines(text)
        callers: dict[bytes, Caller] = {}
        names: set[str] = set()
        for index, entry in enumerate(entries):
            where = f"line {lines[index]}" if index < len(lines) else f"caller #{index + 1}"
            caller, digest = _caller(entry, where)
            if caller.name in names:
                raise CallersFileError(f"{where}: duplicate caller name {caller.name!r}")
            if digest in callers:
                raise CallersFileError(f"{where}: caller {caller.name!r} has the same token_sha256 as another caller")
            names.add(caller.name)
            callers[digest] = caller
        return cls(callers)


def _table_lines(text: str) -> list[int]:
    """The line number of each ``[[caller]]`` header, in order."""
    return [number for number, line in enumerate(text.splitlines(), start=1) if _TABLE_HEADER.match(line)]


def _caller(entry: object, where: str) -> tuple[Caller, bytes]:
    if not isinstance(entry, dict):
        raise CallersFileError(f"{where}: a caller must be a table")
    unknown = set(entry) - _KEYS
    if unknown:
        raise CallersFileError(f"{where}: unknown key {sorted(unknown)[0]!r} (expected name, scopes, token_sha256)")
    missing = _KEYS - set(entry)
    if missing:
        raise CallersFileError(f"{where}: missing {sorted(missing)[0]!r}")
    name, scopes, digest = entry["name"], entry["scopes"], entry["token_sha256"]
    if not isinstance(name, str) or not name.strip():
        raise CallersFileError(f"{where}: name must be a non-empty string")
    if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
        raise CallersFileError(f"{where}: scopes must be a list of strings")
    bad = [s for s in scopes if s not in SCOPES]
    if bad:
        raise CallersFileError(f"{where}: unknown scope {bad[0]!r} (known: {', '.join(SCOPES)})")
    if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
        raise CallersFileError(f"{where}: token_sha256 must be 64 lower-case hex digits (the SHA-256 of the token)")
    return Caller(name, frozenset(scopes)), bytes.fromhex(digest)
