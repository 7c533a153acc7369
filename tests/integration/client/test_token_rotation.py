"""A caller's token rotated without reconnecting, against the real server with auth on (SPEC §7.1):
the client reads its token function for every call, so the calls after the rotation carry the new
token on the same channel."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from socialgraph_client import AsyncSocialGraphClient, FollowState, Unauthenticated

from graph_service.api.callers import caller_entry, mint_token
from graph_service.settings import Settings
from tests.support.polling import eventually
from tests.support.runtimes import running_server


async def test_calls_carry_the_token_the_function_returns_now(settings: Settings, tmp_path: Path) -> None:
    """The callers file moves from the old token to the new one (the old one refused from then on);
    the token function moves too, and the same client goes on calling."""
    old, new = mint_token(), mint_token()
    callers = tmp_path / "callers.toml"
    callers.write_text(caller_entry("feed-old", ["read", "write"], old), encoding="utf-8")
    secured = replace(settings, auth_tokens_file=str(callers), auth_reload_seconds=0.05)
    current = [old]
    async with (
        running_server(secured) as server,
        await AsyncSocialGraphClient.connect(f"127.0.0.1:{server.port}", token=lambda: current[0]) as graph,
    ):
        assert await graph.follow(1, 2) == FollowState.FOLLOWING
        callers.write_text(caller_entry("feed-new", ["read", "write"], new), encoding="utf-8")

        async def old_refused() -> bool:
            try:
                await graph.is_following(1, 2)
            except Unauthenticated:
                return True
            return False

        await eventually(old_refused, bool, timeout=10)
        current[0] = new
        assert await graph.is_following(1, 2)
        assert await graph.follow(1, 3) == FollowState.FOLLOWING
