"""Worlds: data a test module builds once and every one of its tests starts from.

A populated route or a demo workspace takes seconds to build, and most tests of a module start from
the same one. A world is built in a transaction opened for the module (Django's `TestCase`
class-level atomic block, the one `setUpTestData` builds in) and rolled back when the module ends;
each test's `db` runs in a savepoint inside it, rolled back after the test, so every test starts
from the world as it was built and no test sees another's writes. A module-scoped fixture builds it:

    @pytest.fixture(scope="module")
    def window_world(django_db_setup, django_db_blocker, tmp_path_factory):
        yield from build_world(django_db_blocker, tmp_path_factory, build_the_window)

and each test takes it through a function-scoped fixture that calls `world.enter(request)` (with
`db`), which hands it the data (ids and keys, not model instances: a shared instance would carry
one test's in-memory changes into the next).

A world whose data is a `RouteWorld` (it-support and the integrator that sent its decisions, built
by `route_world_start`) is the one the shared `route` and `integrator` fixtures (tests/conftest.py)
hand a test that starts from it; `owner` and `reviewer` too when the world made them.

A world fixture's name ends in `_world`, and a module has at most one. Once built, the world stays
until the module ends, where every later test of the module would see it; so within a module's
tests, those that start from a world run after those that do not (the hook below, in whatever
order the tests were collected or shuffled).

What does not roll back: sequences (ids and audit `seq` go on rising, as they do between ordinary
tests) and PostgreSQL's `now()`, which is the module's transaction's start; the application's
clock is Python's, so only a test's own SQL with `now()` could tell.

Not for tests that need real commits (`django_db(transaction=True)`, `transactional_db`, other
threads or connections): their writes would sit in the module's uncommitted transaction, which
other connections cannot see. pytest-django runs those after every other test, by when the
module's world is rolled back; `enter` refuses them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import pytest
from django.db import connection
from django.test import TestCase, override_settings
from pytest_django.fixtures import validate_django_db

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class RouteWorld:
    """it-support and its integrator as a world built them: ids and the token, not instances."""

    route_id: int
    integrator_id: int
    integrator_token: str
    # The policy owner and the reviewer, when the world needed them (a policy signed once for the module).
    owner_id: int | None = None
    reviewer_id: int | None = None


def route_world_start():
    """it-support and an integrator with a token, for a world's build: (route, an API client, the ids)."""
    from tests import factories

    route = factories.make_route("it-support", "IT support")
    user = factories.make_user("integrator", "integrator")
    token = factories.make_token(user)
    made = RouteWorld(route_id=route.pk, integrator_id=user.pk, integrator_token=token)
    return route, token_client(user, token), made


def token_client(user, token: str):
    """An API client signed in with this token (a world's token stays valid in each of its tests)."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    client.user = user
    return client


def route_world_of(request: pytest.FixtureRequest) -> RouteWorld | None:
    """The route world this test starts from, if any (its world fixture is already built: a
    module-scoped fixture is set up before the function-scoped ones that ask)."""
    for name in request.fixturenames:
        if name.endswith("_world"):
            data = request.getfixturevalue(name).data
            return data if isinstance(data, RouteWorld) else None
    return None


# The roll-backs of the worlds open in this process (at most one: a world per module).
_open_worlds: list[Callable[[], None]] = []


@dataclass
class World(Generic[T]):
    data: T
    data_dir: Path  # the world's DATA_DIR (demo logins, audit checkpoints), kept for the module
    # Characters of passages the ingest counted towards asking for a passage dictionary when the
    # world was built: every test's teardown sets the count to 0 (tests/conftest.py), and a test
    # built on the world would have started where the build left it.
    text_without_dictionary: int

    def enter(self, request: pytest.FixtureRequest) -> T:
        """The world's data for this test (call it from a function-scoped fixture that uses `db`)."""
        from console.ledger import services as ledger

        marker = request.node.get_closest_marker("django_db")
        committing = marker is not None and validate_django_db(marker)[0]
        if committing or "transactional_db" in request.fixturenames:
            pytest.fail(
                "A test that commits cannot start from a world: the world is an open transaction "
                "(tests/worlds.py). Build its data in the test."
            )
        ledger._text_without_dictionary = self.text_without_dictionary
        return self.data


def build_world(django_db_blocker, tmp_path_factory, build: Callable[[], T]) -> Iterator[World[T]]:
    """Yields the world `build()` writes, for a module-scoped fixture to `yield from`; rolls it back
    afterwards. The build runs with its own data directory and audit checkpoint files, as every
    test does (tests/conftest.py)."""
    from console.ledger import services as ledger
    from console.ledger.compression import dictionaries_forget

    data_dir = tmp_path_factory.mktemp("world")
    with django_db_blocker.unblock():
        if connection.in_atomic_block:
            pytest.fail(
                "A world is built in a transaction of its own, but one is open (a second world in "
                "the module, or a test's own): give the module one world, taken by a module-scoped fixture."
            )
        atomics = TestCase._enter_atomics()

    def roll_back() -> None:
        """Once: by the module's teardown, or earlier before a test that commits (below)."""
        if roll_back in _open_worlds:
            _open_worlds.remove(roll_back)
        if atomics:
            with django_db_blocker.unblock():
                TestCase._rollback_atomics(atomics)
            atomics.clear()

    try:
        with (
            django_db_blocker.unblock(),
            override_settings(
                DATA_DIR=data_dir,
                AUDIT_SIGNING_KEY=None,
                AUDIT_SIGNING_KEY_FILE=data_dir / "audit-signing-key.pem",
                AUDIT_CHECKPOINT_LOG=data_dir / "audit-checkpoints.jsonl",
                AUDIT_CHECKPOINT_WEBHOOK=None,
            ),
        ):
            data = build()
        world = World(data, data_dir, ledger._text_without_dictionary)
        # As after every test: what the process remembers of dictionaries may name rows a test rolls back.
        dictionaries_forget()
        ledger._text_without_dictionary = 0
        _open_worlds.append(roll_back)
        yield world
    finally:
        roll_back()


def _commits(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("django_db")
    names = getattr(item, "fixturenames", ())
    return (marker is not None and validate_django_db(marker)[0]) or bool(
        {"transactional_db", "live_server"} & set(names)
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test that commits needs no world open. In one process, pytest has ended the module's world
    before (the tests that commit run after all others); under pytest-xdist a file's tests that commit
    follow its world's tests in the same run, with the module's fixtures still up, so the world is
    rolled back here first. Its fixture's teardown then finds nothing left to roll back."""
    if _open_worlds and _commits(item):
        for roll_back in reversed(list(_open_worlds)):
            roll_back()


def _starts_from_a_world(item: pytest.Item) -> bool:
    return any(name.endswith("_world") for name in getattr(item, "fixturenames", ()))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """In each run of one module's tests, those that start from a world go last (after pytest-django
    has put the tests that commit after all others, and after any shuffling)."""
    start = 0
    while start < len(items):
        end = start + 1
        while end < len(items) and items[end].path == items[start].path:
            end += 1
        items[start:end] = sorted(items[start:end], key=_starts_from_a_world)
        start = end
