"""A mute given a duration, through the cached server: listed with its end, in force until then,
and gone by itself afterwards from GetRelationships (a cached entry included) and ListMutes,
with nothing deleting it. The rest of mute (bad input, paging, tokens) is in
test_relationship_bad_input.py; its rules against a model in test_relationship_model.py."""

from __future__ import annotations

from google.protobuf import duration_pb2
from socialgraph.v1 import social_graph_pb2 as pb

from graph_service.entrypoints.server import ServerRuntime
from tests.support.graph_calls import Stub, relationships
from tests.support.polling import eventually

MUTER, SHORT, LONG = 71, 72, 73


async def test_a_mute_with_a_duration_ends_by_itself_and_a_mute_without_one_stays(
    server: ServerRuntime, stub: Stub
) -> None:
    assert await relationships(stub, MUTER, [SHORT, LONG]) == [(SHORT, frozenset()), (LONG, frozenset())]
    await stub.Mute(
        pb.MuteRequest(muter_id=MUTER, muted_id=SHORT, duration=duration_pb2.Duration(seconds=1), notifications=True)
    )
    await stub.Mute(pb.MuteRequest(muter_id=MUTER, muted_id=LONG))
    muting = frozenset({"muting"})
    assert await relationships(stub, MUTER, [SHORT, LONG]) == [
        (SHORT, muting | {"muting_notifications"}),
        (LONG, muting),
    ]
    listed = (await stub.ListMutes(pb.ListMutesRequest(user_id=MUTER))).mutes
    assert [(m.user_id, m.notifications, m.HasField("expires_at")) for m in listed] == [
        (LONG, False, False),
        (SHORT, True, True),
    ]
    short = listed[1]
    assert short.expires_at.ToMicroseconds() - short.muted_at.ToMicroseconds() == 1_000_000

    async def in_force() -> list[int]:
        reply = await stub.ListMutes(pb.ListMutesRequest(user_id=MUTER))
        return [m.user_id for m in reply.mutes]

    await eventually(in_force, lambda found: found == [LONG], timeout=10)
    assert server.cache is not None
    hits = server.cache.hits
    assert await relationships(stub, MUTER, [SHORT, LONG]) == [(SHORT, frozenset()), (LONG, muting)]
    assert server.cache.hits == hits + 2  # both from the entries cached before the end, the end in them
