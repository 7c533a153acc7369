"""The pages of ``socialgraph_client.testing``'s lists, by the service's rules (AIP-158, SPEC §2).

Newest first; ``page_size`` 0 is the default (50), above the maximum (1000) is clamped; a page that
is not the last is never empty, and the last one has no token. A token is opaque, tamper-evident
(signed with a key of the graph's own, so any client of the same graph takes it) and bound to the
query it came from: a changed one, or one handed to another query, is ``INVALID_PAGE_TOKEN``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
from collections.abc import Mapping

import grpc

from socialgraph_client.fake_graph import Refusal
from socialgraph_client.reasons import Reason

__all__ = ["DEFAULT_PAGE_SIZE", "MAX_PAGE_SIZE", "Pages"]

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000
MAC_BYTES = 16


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _invalid(why: str) -> Refusal:
    return Refusal(
        grpc.StatusCode.INVALID_ARGUMENT, Reason.INVALID_PAGE_TOKEN, f"page_token is not valid for this request: {why}"
    )


class Pages:
    def __init__(self) -> None:
        self._key = os.urandom(32)

    def page(self, scope: str, entries: Mapping[int, int], page_size: int, page_token: str) -> tuple[list[int], str]:
        """One page of ``entries`` (user ID -> time in microseconds) for the query ``scope``: the
        IDs, newest first (ties by the higher ID), and the next page's token ("" on the last)."""
        limit = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        order = sorted(((at, user) for user, at in entries.items()), reverse=True)
        after = self._decode(scope, page_token)
        rest = order if after is None else [position for position in order if position < after]
        page = rest[:limit]
        token = self._encode(scope, page[-1]) if len(rest) > limit else ""
        return [user for _, user in page], token

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()[:MAC_BYTES]

    def _encode(self, scope: str, position: tuple[int, int]) -> str:
        payload = json.dumps({"q": scope, "t": position[0], "u": position[1]}, separators=(",", ":")).encode()
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def _decode(self, scope: str, token: str) -> tuple[int, int] | None:
        if not token:
            return None
        body, _, mac = token.partition(".")
        try:
            payload, signature = _unb64(body), _unb64(mac)
        except (binascii.Error, ValueError) as exc:
            raise _invalid("malformed") from exc
        if _b64(payload) != body or _b64(signature) != mac:
            raise _invalid("malformed")  # another spelling of the same bytes: taken as altered
        if not hmac.compare_digest(signature, self._mac(payload)):
            raise _invalid("signature does not match")
        data = json.loads(payload)
        if data["q"] != scope:
            raise _invalid("issued for a different query")
        return int(data["t"]), int(data["u"])
