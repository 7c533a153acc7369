"""The caller's bearer token on each call: a fixed string, or a function called once per call that
returns the current one, so a token is rotated without reconnecting.

Over TLS the token travels as the call's credentials, which gRPC sends only over a secure channel;
over plaintext (the local stack, a trusted network) as ``authorization`` metadata. Neither the token
nor any part of it is ever put in an error message.
"""

from __future__ import annotations

from collections.abc import Callable

import grpc

__all__ = ["BearerToken", "Token"]

Token = str | Callable[[], str]
"""``connect(token=...)``: the token, or a function of no arguments returning the current one."""

AUTHORIZATION = "authorization"


class BearerToken:
    """The token of one client; ``secure``: its channel is TLS (or other ``ChannelCredentials``)."""

    def __init__(self, token: Token, *, secure: bool) -> None:
        if isinstance(token, str):
            _check(token, "token")
        elif not callable(token):
            raise ValueError(f"token must be a str or a function returning one, not a {type(token).__name__}")
        self._token = token
        self._secure = secure
        self._last: tuple[str, grpc.CallCredentials] | None = None
        """The credentials of the last token sent over TLS, reused while the token stays the same."""

    def for_call(self) -> tuple[tuple[tuple[str, str], ...], grpc.CallCredentials | None]:
        """What carries the current token on one call: metadata (plaintext) or call credentials (TLS).
        A token function's own exception reaches the caller as it is."""
        token = self._token
        if not isinstance(token, str):
            token = token()
            _check(token, "the token function's result")
        if not self._secure:
            return ((AUTHORIZATION, f"Bearer {token}"),), None
        last = self._last
        if last is None or last[0] != token:
            last = self._last = (token, grpc.access_token_call_credentials(token))
        return (), last[1]


def _check(token: object, what: str) -> None:
    if not isinstance(token, str):
        raise ValueError(f"{what} must be a str, not a {type(token).__name__}")
    if not token:
        raise ValueError(f"{what} is empty")
    if not (token.isascii() and token.isprintable()):
        raise ValueError(f"{what} must be printable ASCII (it is sent as an HTTP/2 header)")
