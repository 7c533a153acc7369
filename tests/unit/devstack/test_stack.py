"""What ``socialgraph up`` hands its components, and what it tells the person who ran it."""

from __future__ import annotations

import pytest
from socialgraph_devstack.stack import _banner, local_environment

from graph_service.settings import Settings


def test_settings_given_to_up_reach_every_component(monkeypatch: pytest.MonkeyPatch) -> None:
    """Auth, TLS and limit variables in ``up``'s environment are passed through; only the local
    endpoints are set by ``up`` itself."""
    given = {
        "SG_AUTH_TOKENS_FILE": "/etc/sg/callers.toml",
        "SG_TLS_CERT_FILE": "/etc/sg/tls.pem",
        "SG_FOLLOW_RATE_LIMIT": "50",
        "SG_MAX_FOLLOWING": "100",
    }
    for name, value in given.items():
        monkeypatch.setenv(name, value)
    env = local_environment(8000, 6379, 9092)
    assert {name: env[name] for name in given} == given
    assert env["SG_DYNAMODB_ENDPOINT"] == "http://127.0.0.1:8000"


def test_the_banner_says_how_to_call_with_auth_and_tls() -> None:
    """With callers configured the banner shows the header to add; with TLS, the flag to use."""
    assert "authorization" not in _banner("127.0.0.1:50051", 8000, Settings())
    secured = Settings(auth_tokens_file="callers.toml", tls_cert_file="c.pem", tls_key_file="k.pem")
    banner = _banner("127.0.0.1:50051", 8000, secured)
    assert "-H 'authorization: Bearer <token>'" in banner
    assert "callers.toml" in banner
    assert "-cacert" in banner
