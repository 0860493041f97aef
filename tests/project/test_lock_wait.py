import pytest
from django.db import connection

from console.core.locks import lock_wait_at_most

pytestmark = pytest.mark.django_db


def _lock_timeout() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW lock_timeout")
        return cursor.fetchone()[0]


def test_the_wait_applies_inside_the_block_and_the_previous_setting_returns_after_it():
    before = _lock_timeout()
    with lock_wait_at_most("250ms"):
        assert _lock_timeout() == "250ms"
    # A transaction-local setting outlives a released savepoint; the block puts the old one back.
    assert _lock_timeout() == before
