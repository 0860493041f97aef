"""Statistics documents are derived data in an unlogged table (analysis migration 0003): their
writes skip the write-ahead log, and a crash empties the table, after which they are computed again."""

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def test_the_stored_documents_table_is_unlogged_and_nothing_else_is():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND c.relpersistence = 'u'"
        )
        assert [name for (name,) in cursor.fetchall()] == ["policy_statsresult"]


@pytest.mark.django_db(transaction=True)
def test_a_document_stored_outside_a_transaction_is_served_next_and_leaves_the_commit_setting_alone(
    route, reviewer, integrator
):
    from console.analysis.models import StatsResult
    from tests.analysis.populations import census

    census(integrator, n=40)
    url = "/api/v1/routes/it-support/operating-points?cutoffs=0.5,0.9"
    first = reviewer.get(url)
    assert first.status_code == 200, first.content
    (stored,) = StatsResult.objects.filter(kind="operating_points")
    assert stored.document == first.content.decode() and stored.data_version == first.json()["data_version"]
    again = reviewer.get(url)
    assert again.content == first.content  # served as stored, not computed again
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone() == ("on",)  # only the store's own transaction went without waiting
