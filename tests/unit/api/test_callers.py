"""The callers file (SPEC §7.1): what is accepted, what is refused and with which line, and the token lookup."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from graph_service.api.auth import OUR_PACKAGE, SCOPE_OF, Authenticator, required_scope
from graph_service.api.callers import Caller, CallersFileError, CallerTable, caller_entry, mint_token
from graph_service.domain.errors import MissingScope, Unauthenticated
from tests.support.declared_rpcs import declared_methods

HASH = hashlib.sha256(b"secret-token").hexdigest()
OTHER = hashlib.sha256(b"other-token").hexdigest()


def entry(name: str = "feed", scopes: str = '["read"]', digest: str = HASH, extra: str = "") -> str:
    return f'[[caller]]\nname = "{name}"\nscopes = {scopes}\ntoken_sha256 = "{digest}"\n{extra}'


def test_a_minted_token_is_found_by_its_entry_and_only_it() -> None:
    """``socialgraph token``'s entry, appended to the file, lets exactly that token in with its scopes."""
    token = mint_token()
    table = CallerTable.parse(caller_entry("feed", ["read", "write"], token) + "\n" + entry("other", digest=OTHER))
    assert table.find(token) == Caller("feed", frozenset({"read", "write"}))
    assert table.find("other-token") == Caller("other", frozenset({"read"}))
    assert table.find(mint_token()) is None
    assert table.find("") is None
    assert token.startswith("sgt_")
    assert len(token) > 40


@pytest.mark.parametrize("text", ["", "  \n\n"])
def test_an_empty_file_is_refused(text: str) -> None:
    """An empty file is most often one caught while being rewritten: refused like any mistake, so
    at start the server does not run and on reload the callers in force stay."""
    with pytest.raises(CallersFileError, match="empty"):
        CallerTable.parse(text)


def test_a_file_with_no_callers_but_a_comment_revokes_everyone() -> None:
    """Removing the last caller (leaving a comment) is taken: every token is then unknown."""
    table = CallerTable.parse("# no callers: all revoked\n")
    assert len(table) == 0
    assert table.find("secret-token") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[caller]\nname = 1", "not valid TOML"),
        ('name = "feed"\n', "unknown top-level key 'name'"),
        ('[caller]\nname = "feed"\n', "array of tables"),
        (entry(extra='role = "admin"\n'), "line 1: unknown key 'role'"),
        ('[[caller]]\nname = "feed"\nscopes = ["read"]\n', "line 1: missing 'token_sha256'"),
        (entry(scopes='["read", "owner"]'), "unknown scope 'owner'"),
        (entry(scopes='"read"'), "scopes must be a list"),
        (entry(name=""), "name must be a non-empty string"),
        (entry(digest=HASH.upper()), "64 lower-case hex digits"),
        (entry(digest=HASH[:-1]), "64 lower-case hex digits"),
        (entry() + "\n" + entry(digest=OTHER), "line 6: duplicate caller name 'feed'"),
        (entry() + "\n" + entry(name="notifications"), "line 6: caller 'notifications' has the same token_sha256"),
    ],
    ids=[
        "bad toml",
        "top-level key",
        "table not array",
        "unknown key",
        "missing hash",
        "unknown scope",
        "scopes not a list",
        "empty name",
        "upper-case hex",
        "short hash",
        "duplicate name",
        "duplicate hash",
    ],
)
def test_a_bad_file_is_refused_naming_the_line(text: str, message: str) -> None:
    """Every kind of mistake is refused whole, with a message that says what and where."""
    with pytest.raises(CallersFileError, match=message.replace("[", r"\[")):
        CallerTable.parse(text)


def test_every_rpc_of_ours_needs_a_scope_and_other_services_none() -> None:
    """Reads need ``read``, writes ``write``, the account lifecycle's changes ``admin``; health and
    reflection are open; an RPC of ours missing from the table fails closed (needs ``write``)."""
    assert required_scope("/socialgraph.v1.SocialGraphService/IsFollowing") == "read"
    assert required_scope("/socialgraph.v1.SocialGraphService/Follow") == "write"
    assert required_scope("/socialgraph.v1.TimelineService/GetHomeTimeline") == "read"
    assert required_scope("/grpc.health.v1.Health/Check") is None
    assert required_scope("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo") is None
    assert required_scope(OUR_PACKAGE + "SocialGraphService/SomethingNew") == "write"
    for name in ("DeactivateAccount", "ReactivateAccount", "DeleteAccount"):
        assert required_scope(f"/socialgraph.v1.SocialGraphService/{name}") == "admin"
    assert required_scope("/socialgraph.v1.SocialGraphService/GetAccountState") == "read"
    assert set(SCOPE_OF.values()) == {"read", "write", "admin"}


def test_the_scope_table_names_exactly_the_rpcs_the_protos_declare() -> None:
    """An RPC added to a proto and not to ``SCOPE_OF`` (it would need ``write``) fails here."""
    assert SCOPE_OF.keys() == declared_methods().keys()


def test_the_readme_scope_table_is_the_code_table() -> None:
    """The README's "which RPC needs which scope" table says what ``SCOPE_OF`` does, RPC for RPC."""
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| RPC | scope |") :].split("\n\n", 1)[0]
    rows = [line.strip("| ").split(" | ") for line in table.splitlines()[2:]]
    documented = {name.strip("`"): scope for name, scope in rows}
    in_code = {method.rsplit("/", 1)[1]: scope for method, scope in SCOPE_OF.items()}
    assert documented == in_code


def test_the_authenticator_identifies_then_authorizes() -> None:
    """No token or an unknown one is Unauthenticated; a known caller without the scope is MissingScope
    naming the scope; the message never repeats the token."""
    auth = Authenticator(CallerTable.parse(entry()))
    follow, counts = "/socialgraph.v1.SocialGraphService/Follow", "/socialgraph.v1.SocialGraphService/GetCounts"
    caller = auth.identify(counts, [("authorization", "Bearer secret-token")])
    assert caller == Caller("feed", frozenset({"read"}))
    auth.authorize(caller, counts)
    with pytest.raises(MissingScope) as denied:
        auth.authorize(caller, follow)
    assert denied.value.metadata == {"scope": "write"}
    for metadata in ([], [("authorization", "Bearer nope-token")], [("authorization", "nope-token")]):
        with pytest.raises(Unauthenticated) as refused:
            auth.identify(counts, metadata)
        assert "nope-token" not in refused.value.message
    assert auth.identify("/grpc.health.v1.Health/Check", []) is None


def test_the_admin_scope_is_accepted_and_grants_no_other() -> None:
    """SPEC §7.1's three scopes are accepted; an ``admin``-only caller may not read or write."""
    token = mint_token()
    table = CallerTable.parse(caller_entry("ops", ["admin"], token))
    caller = table.find(token)
    assert caller == Caller("ops", frozenset({"admin"}))
    auth = Authenticator(table)
    for method in ("/socialgraph.v1.SocialGraphService/GetCounts", "/socialgraph.v1.SocialGraphService/Mute"):
        with pytest.raises(MissingScope):
            auth.authorize(caller, method)
