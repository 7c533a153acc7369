"""The in-memory cache lease registry keeps the contract that the DynamoDB one keeps."""

from __future__ import annotations

import pytest

from tests.support.contracts.cache_leases import LeaseRegistryContract
from tests.support.fakes.cache_leases import FakeLeaseRegistry


class TestFakeLeaseRegistry(LeaseRegistryContract):
    @pytest.fixture
    def registry(self) -> FakeLeaseRegistry:
        return FakeLeaseRegistry()
