"""Opaque, tamper-evident page tokens bound to the query they came from (AIP-158).

A token is ``base64url(payload) "." base64url(HMAC-SHA256(secret, payload)[:16])``; the payload
names the query (RPC and its parameters) and the cursor: the last entry returned, as ``t`` (its
time, 0 for a timeline) and ``u`` (its user or tweet ID). A token from another query, a corrupted
one, or one signed with a key the server does not hold is rejected as INVALID_PAGE_TOKEN.

Keys rotate without breaking walks in progress: tokens are signed with the first key and
accepted with any (``SG_PAGE_TOKEN_SECRET=new,old`` on every replica, later ``new`` alone).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json

from graph_service.domain.errors import InvalidPageToken
from graph_service.domain.ids import is_id
from graph_service.domain.models import Edge, TweetCursor

__all__ = ["PageTokenCodec"]

VERSION = 1
MAC_BYTES = 16
MAX_TOKEN_LENGTH = 512


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class PageTokenCodec:
    def __init__(self, *secrets: str) -> None:
        """``secrets``: the signing key first, then keys still accepted (at least one)."""
        if not secrets or not all(secrets):
            raise ValueError("a page-token codec needs at least one non-empty secret")
        self._keys = [hashlib.sha256(secret.encode()).digest() for secret in secrets]

    def _mac(self, payload: bytes, key: bytes | None = None) -> bytes:
        return hmac.new(key or self._keys[0], payload, hashlib.sha256).digest()[:MAC_BYTES]

    def _signed_by_a_key(self, payload: bytes, signature: bytes) -> bool:
        # Every key is tried (no early exit), so the time taken says nothing about which matched.
        matches = [hmac.compare_digest(signature, self._mac(payload, key)) for key in self._keys]
        return any(matches)

    def encode(self, scope: str, cursor: Edge | TweetCursor) -> str:
        at, ident = (0, cursor.tweet_id) if isinstance(cursor, TweetCursor) else (cursor.at_us, cursor.user_id)
        payload = json.dumps({"v": VERSION, "q": scope, "t": at, "u": ident}, separators=(",", ":")).encode()
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def decode_edge(self, scope: str, token: str) -> Edge | None:
        """The list cursor of a token issued for ``scope``; None for the empty token (first page)."""
        fields = self._decode(scope, token)
        return None if fields is None else Edge(user_id=fields[1], at_us=fields[0])

    def decode_tweet(self, scope: str, token: str) -> TweetCursor | None:
        """The timeline cursor of a token issued for ``scope``; None for the empty token (first page)."""
        fields = self._decode(scope, token)
        if fields is None:
            return None
        if fields[0] != 0:
            raise InvalidPageToken("malformed")
        return TweetCursor(fields[1])

    def _decode(self, scope: str, token: str) -> tuple[int, int] | None:
        """The cursor's ``(t, u)``, checked: signed, well-formed and issued for ``scope``."""
        if not token:
            return None
        if len(token) > MAX_TOKEN_LENGTH or token.count(".") != 1:
            raise InvalidPageToken("malformed")
        body, mac = token.split(".")
        try:
            payload, signature = _unb64(body), _unb64(mac)
        except (binascii.Error, ValueError) as exc:
            raise InvalidPageToken("malformed") from exc
        if _b64(payload) != body or _b64(signature) != mac:
            # base64 decoding is lenient (unused low bits, padding, '+' for '-'): accept only the
            # one spelling encode() produces, so that no altered token is ever taken.
            raise InvalidPageToken("malformed")
        if not self._signed_by_a_key(payload, signature):
            raise InvalidPageToken("signature does not match")
        try:
            data = json.loads(payload)
            at, user = data["t"], data["u"]
            valid = data["v"] == VERSION and isinstance(at, int) and isinstance(user, int)
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidPageToken("malformed") from exc
        if not valid or at < 0 or not is_id(user):
            raise InvalidPageToken("malformed")
        if data["q"] != scope:
            raise InvalidPageToken("issued for a different query")
        return at, user
