"""Fixtures for grading: several graders with API tokens, and signed-in page clients."""

from __future__ import annotations

import pytest
from django.test import Client

from tests import factories
from tests.grading.helpers import api_client


@pytest.fixture
def make_grader(route):
    def make(name: str, role: str = "grader", on=None):
        return api_client(factories.make_user(name, role, on))

    return make


@pytest.fixture
def graders(make_grader):
    return [make_grader(f"grader-{n}") for n in range(1, 4)]


@pytest.fixture
def page_of():
    def login(user) -> Client:
        client = Client()
        client.force_login(user)
        return client

    return login
