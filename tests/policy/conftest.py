"""Fixtures of the statistics tests; the builders live in tests/policy/populations.py."""

import pytest

from tests.policy.populations import Population, census


@pytest.fixture
def make_census(integrator):
    def build(**options) -> Population:
        return census(integrator, **options)

    return build
