"""Fixtures of the statistics tests; the builders live in tests/analysis/populations.py."""

import pytest

from tests.analysis.populations import Population, census


@pytest.fixture
def make_census(integrator):
    def build(**options) -> Population:
        return census(integrator, **options)

    return build
