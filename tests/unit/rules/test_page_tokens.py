"""Page tokens: opaque, tamper-evident, and bound to the query they came from."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graph_service.domain.errors import InvalidPageToken
from graph_service.domain.models import Edge
from graph_service.rules.page_tokens import MAX_TOKEN_LENGTH, PageTokenCodec

SCOPE = "followers:42"
CURSOR = Edge(user_id=17, at_us=1_760_000_000_123_456)
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


@pytest.fixture
def codec() -> PageTokenCodec:
    return PageTokenCodec("unit-test-secret")


@pytest.fixture
def token(codec: PageTokenCodec) -> str:
    return codec.encode(SCOPE, CURSOR)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_round_trip_returns_the_cursor(codec: PageTokenCodec, token: str) -> None:
    """A token decodes, for the query it was issued for, to the cursor it was made from."""
    assert codec.decode_edge(SCOPE, token) == CURSOR


@pytest.mark.parametrize(
    "cursor",
    [Edge(1, 0), Edge(2**64 - 1, 0), Edge(2**64 - 1, 9_999_999_999_999_999), Edge(123, 1)],
)
def test_round_trip_at_the_extremes(codec: PageTokenCodec, cursor: Edge) -> None:
    """The smallest and largest user IDs and timestamps survive a round trip."""
    assert codec.decode_edge(
        "following:18446744073709551615", codec.encode("following:18446744073709551615", cursor)
    ) == (cursor)


def test_empty_token_means_first_page(codec: PageTokenCodec) -> None:
    """The empty token decodes to no cursor (start from the first page)."""
    assert codec.decode_edge(SCOPE, "") is None


def test_token_is_url_safe_and_short(token: str) -> None:
    """A token uses only URL-safe characters and stays well under the length limit."""
    assert set(token) <= set(ALPHABET + ".")
    assert len(token) < MAX_TOKEN_LENGTH


def test_same_cursor_and_scope_give_the_same_token(codec: PageTokenCodec, token: str) -> None:
    """Encoding is deterministic, and replicas sharing the secret accept each other's tokens."""
    assert codec.encode(SCOPE, CURSOR) == token
    assert PageTokenCodec("unit-test-secret").decode_edge(SCOPE, token) == CURSOR


@pytest.mark.parametrize("other_scope", ["followers:43", "following:42", "followers:4", "followers:420", ""])
def test_token_for_another_query_is_refused(codec: PageTokenCodec, token: str, other_scope: str) -> None:
    """A token issued for one list is refused by any other list (other user or other direction)."""
    with pytest.raises(InvalidPageToken):
        codec.decode_edge(other_scope, token)


def test_token_signed_with_another_secret_is_refused(token: str) -> None:
    """A replica with a different secret refuses the token."""
    with pytest.raises(InvalidPageToken):
        PageTokenCodec("another-secret").decode_edge(SCOPE, token)


def test_rotation_signs_with_the_first_secret_and_accepts_every_listed_one(token: str) -> None:
    """During a rotation (``new,old``) a token of the old key still walks on, new tokens use the new
    key, and once the old key is dropped its tokens are refused."""
    rotating = PageTokenCodec("new-secret", "unit-test-secret")
    assert rotating.decode_edge(SCOPE, token) == CURSOR
    fresh = rotating.encode(SCOPE, CURSOR)
    assert fresh != token
    assert PageTokenCodec("new-secret").decode_edge(SCOPE, fresh) == CURSOR
    with pytest.raises(InvalidPageToken):
        PageTokenCodec("unit-test-secret").decode_edge(SCOPE, fresh)
    with pytest.raises(InvalidPageToken):
        PageTokenCodec("new-secret").decode_edge(SCOPE, token)


@pytest.mark.parametrize("secrets", [(), ("",), ("a", "")])
def test_a_codec_without_a_usable_secret_cannot_be_built(secrets: tuple[str, ...]) -> None:
    """No key, or an empty one, is a programming error caught at start, never a token anyone can forge."""
    with pytest.raises(ValueError, match="secret"):
        PageTokenCodec(*secrets)


def test_every_single_character_substitution_is_refused(codec: PageTokenCodec, token: str) -> None:
    """Replacing any one character with any other token character makes the token invalid."""
    for i, char in enumerate(token):
        for replacement in ALPHABET + ".":
            if replacement == char:
                continue
            with pytest.raises(InvalidPageToken):
                codec.decode_edge(SCOPE, token[:i] + replacement + token[i + 1 :])


def test_every_truncation_is_refused(codec: PageTokenCodec, token: str) -> None:
    """Every non-empty proper prefix and every proper suffix of a token is refused."""
    for end in range(1, len(token)):
        with pytest.raises(InvalidPageToken):
            codec.decode_edge(SCOPE, token[:end])
    for start in range(1, len(token)):
        with pytest.raises(InvalidPageToken):
            codec.decode_edge(SCOPE, token[start:])


@pytest.mark.parametrize(
    "alter",
    [
        lambda t: t + "=",
        lambda t: t + "==",
        lambda t: t.replace(".", "=.", 1),
        lambda t: t + "\n",
        lambda t: " " + t,
        lambda t: t.replace("-", "+").replace("_", "/") if ("-" in t or "_" in t) else t + "+",
        lambda t: t[:5] + "!" + t[5:],
        lambda t: t + "A",
        lambda t: t + ".",
        lambda t: t + "." + t,
    ],
    ids=[
        "padding",
        "double padding",
        "padding inside",
        "newline",
        "leading space",
        "standard base64 alphabet",
        "non-alphabet character",
        "extra character",
        "extra dot",
        "two tokens",
    ],
)
def test_other_spellings_of_a_token_are_refused(codec: PageTokenCodec, token: str, alter: object) -> None:
    """Only the exact token string is accepted: padding, whitespace or alphabet variants are refused."""
    assert callable(alter)
    altered = alter(token)
    assert altered != token
    with pytest.raises(InvalidPageToken):
        codec.decode_edge(SCOPE, altered)


def test_edited_payload_with_the_original_signature_is_refused(codec: PageTokenCodec, token: str) -> None:
    """Pointing a token at another cursor or query without re-signing it is detected."""
    body, mac = token.split(".")
    data = json.loads(_unb64(body))
    for field, value in [("u", 18), ("t", 1), ("q", "followers:43"), ("v", 2)]:
        edited = {**data, field: value}
        with pytest.raises(InvalidPageToken):
            codec.decode_edge(SCOPE, f"{_b64(json.dumps(edited, separators=(',', ':')).encode())}.{mac}")


@pytest.mark.parametrize(
    "payload",
    [
        {"v": 2, "q": SCOPE, "t": 1, "u": 1},
        {"v": 1, "q": SCOPE, "t": -1, "u": 1},
        {"v": 1, "q": SCOPE, "t": 1, "u": 0},
        {"v": 1, "q": SCOPE, "t": 1, "u": 2**64},
        {"v": 1, "q": SCOPE, "t": "1", "u": 1},
        {"v": 1, "q": SCOPE, "t": 1, "u": 1.5},
        {"v": 1, "q": SCOPE, "t": 1},
        [1, 2, 3],
        "text",
    ],
    ids=[
        "version",
        "negative time",
        "user 0",
        "user too large",
        "time as text",
        "user as float",
        "no user",
        "list",
        "str",
    ],
)
def test_correctly_signed_but_invalid_payload_is_refused(payload: object) -> None:
    """Even a correctly signed token is refused when its content is not a valid cursor."""
    codec = PageTokenCodec("unit-test-secret")
    raw = json.dumps(payload, separators=(",", ":")).encode()
    signed = f"{_b64(raw)}.{_b64(codec._mac(raw))}"
    with pytest.raises(InvalidPageToken):
        codec.decode_edge(SCOPE, signed)


def test_correctly_signed_non_json_payload_is_refused() -> None:
    """A correctly signed token whose payload is not JSON (or not UTF-8) is refused."""
    codec = PageTokenCodec("unit-test-secret")
    for raw in [b"not json", b"\xff\xfe\x00", b""]:
        signed = f"{_b64(raw)}.{_b64(codec._mac(raw))}"
        with pytest.raises(InvalidPageToken):
            codec.decode_edge(SCOPE, signed)


@pytest.mark.parametrize("length", [MAX_TOKEN_LENGTH + 1, 10_000, 1_000_000])
def test_overlong_token_is_refused(codec: PageTokenCodec, token: str, length: int) -> None:
    """A token longer than the limit is refused without further work."""
    long_token = (token * (length // len(token) + 1))[:length]
    with pytest.raises(InvalidPageToken):
        codec.decode_edge(SCOPE, long_token)


@given(st.text(min_size=1, max_size=600))
def test_arbitrary_text_is_refused_with_invalid_page_token(text: str) -> None:
    """Any non-empty text that was not issued by the codec fails with InvalidPageToken and nothing else."""
    codec = PageTokenCodec("unit-test-secret")
    with pytest.raises(InvalidPageToken):
        codec.decode_edge(SCOPE, text)


@given(st.binary(min_size=0, max_size=120), st.binary(min_size=0, max_size=40))
def test_arbitrary_base64_pairs_are_refused(body: bytes, mac: bytes) -> None:
    """Random base64 of the token's shape (body.signature) is refused."""
    codec = PageTokenCodec("unit-test-secret")
    with pytest.raises(InvalidPageToken):
        codec.decode_edge(SCOPE, f"{_b64(body)}.{_b64(mac)}")


@given(
    st.integers(min_value=1, max_value=2**64 - 1),
    st.integers(min_value=0, max_value=10**16 - 1),
    st.sampled_from(["followers", "following"]),
    st.integers(min_value=1, max_value=2**64 - 1),
)
def test_any_cursor_round_trips_and_is_bound_to_its_user(user: int, at: int, direction: str, owner: int) -> None:
    """Any valid cursor round-trips for its own list and is refused for the other direction."""
    codec = PageTokenCodec("unit-test-secret")
    scope = f"{direction}:{owner}"
    token = codec.encode(scope, Edge(user, at))
    assert codec.decode_edge(scope, token) == Edge(user, at)
    other = "following" if direction == "followers" else "followers"
    with pytest.raises(InvalidPageToken):
        codec.decode_edge(f"{other}:{owner}", token)
