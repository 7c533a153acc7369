"""What every implementation of the graph cache's roles must do: ``CountCache``, ``ListCache``,
``GraphCacheReads``, ``CacheInvalidations`` and ``CacheRepairs`` (``FollowerCache`` is the first two).

Each contract runs against the in-memory fake (``tests/unit/fakes``) and the Redis ``GraphCache``
(``tests/integration/cache``): a test module provides the ``graph_cache`` fixture, a cache that
keeps whole lists of up to ``LIST_LIMIT`` entries. Every test takes fresh user IDs, so
implementations may share one Redis between tests. A contract calls its own role; it sets entries
up, and looks at what a write left, through the read role (``GraphCacheReads``), as callers do.
"""

from tests.support.contracts.graph_cache.counts import CountCacheContract
from tests.support.contracts.graph_cache.harness import LIST_LIMIT, GraphCacheRoles, GraphCacheUnderTest
from tests.support.contracts.graph_cache.invalidations import CacheInvalidationsContract
from tests.support.contracts.graph_cache.lists import ListCacheContract
from tests.support.contracts.graph_cache.reads import GraphCacheReadsContract
from tests.support.contracts.graph_cache.repairs import CacheRepairsContract

__all__ = [
    "LIST_LIMIT",
    "CacheInvalidationsContract",
    "CacheRepairsContract",
    "CountCacheContract",
    "GraphCacheReadsContract",
    "GraphCacheRoles",
    "GraphCacheUnderTest",
    "ListCacheContract",
]
