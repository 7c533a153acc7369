"""``create-tables`` with a client of its own, built from the settings: for the command, the local
stack, the tests and the benches.

A builder, as ``client.py`` is: it may read ``Settings`` (the import contract in pyproject.toml
names it); ``tables.py`` takes the table names only.
"""

from __future__ import annotations

from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames, create_tables
from graph_service.settings import Settings

__all__ = ["ensure_tables"]


async def ensure_tables(settings: Settings, *, protect: bool = False) -> list[str]:
    """``create_tables`` on the tables of ``settings``; returns the names created by this call."""
    dynamo = AsyncDynamo.build(settings)
    try:
        return await create_tables(dynamo, TableNames(settings.table_prefix), protect=protect)
    finally:
        dynamo.close()
