"""What one test leaves in the process or in tables that no rollback or flush reaches does not reach
the next (tests/conftest.py). The tests here run in pairs, in this order, on one process: the first
of each pair leaves something behind, the second reads that it is gone. Found when the longest
files began to run first and tests after them failed: 429 for a wrong token (the fuzz run's failed
attempts, counted in the cache table), and `.get()` refused as a wait inside a task."""

from __future__ import annotations

import pytest
from celery.result import EagerResult, _set_task_join_will_block, task_join_will_block
from django.core.cache import cache

LEFT_BEHIND = "tests-start-clean:left-behind"


@pytest.mark.django_db(transaction=True)
def test_a_committing_test_leaves_a_cache_entry():
    cache.set(LEFT_BEHIND, "from the test before", 3600)
    assert cache.get(LEFT_BEHIND) == "from the test before"


@pytest.mark.django_db(transaction=True)
def test_the_next_test_does_not_find_it():
    assert cache.get(LEFT_BEHIND) is None


def test_a_test_leaves_celerys_join_flag_set_as_two_inline_jobs_at_once_can():
    _set_task_join_will_block(True)


def test_the_next_test_may_wait_for_a_jobs_result():
    assert not task_join_will_block()
    assert EagerResult("a-job", 42, "SUCCESS").get() == 42  # an inline job's result, as .delay() gives it
