"""The route's data version (the key under which statistics documents are stored) and the stored
documents' JSON text."""

import json

import numpy as np
import pytest
from django.db import connection, transaction

from audit.services import _CHAIN_LOCK_KEY
from console.analysis import selectors
from console.analysis.cache import as_json
from grading.models import FinalLabel
from tests.analysis.populations import label
from tests.factories import ingest, record


def _revision(label_id: int) -> int:
    return FinalLabel.objects.values_list("revision", flat=True).get(pk=label_id)


def test_every_write_of_a_label_stamps_a_newer_revision_and_moves_the_version(route):
    first, second = ingest([record(), record()])
    before = selectors.data_version(route)
    made = label(first, True)
    after_insert = selectors.data_version(route)
    stamped = _revision(made.pk)

    FinalLabel.objects.filter(pk=made.pk).update(correct=False)  # by hand, with no service or event
    assert _revision(made.pk) > stamped
    after_flip = selectors.data_version(route)

    other = label(second, True)
    assert _revision(other.pk) > _revision(made.pk)
    assert len({before, after_insert, after_flip, selectors.data_version(route)}) == 4


def test_another_routes_labels_leave_the_version_alone(route, other_route):
    [here] = ingest([record()])
    [there] = ingest([record(route="hr-policy")])
    label(here, True)
    version = selectors.data_version(route)
    label(there, False)
    assert selectors.data_version(route) == version


def _holds_the_audit_chain_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory' "
            "AND granted AND ((classid::bigint << 32) | objid::bigint) = %s)",
            [_CHAIN_LOCK_KEY],
        )
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_labels_revision_is_drawn_under_the_audit_chains_lock(route):
    # Held until commit, the lock orders revisions as their transactions commit: a label committed
    # later can never carry a revision lower than one a reader has already seen.
    [decision_id] = ingest([record()])
    with transaction.atomic():
        assert not _holds_the_audit_chain_lock()
        label(decision_id, True)
        assert _holds_the_audit_chain_lock()
    assert not _holds_the_audit_chain_lock()


def test_documents_are_written_as_the_json_module_writes_them():
    document = {
        "auroc": np.float64(0.8125),
        "rows": [{"cutoff": 0.7, "value": None, "low": 1e-05, "n": 12}],
        "by_bin": {3: 0.25},
        "route": "café",
    }
    text = as_json(document)
    assert json.loads(text) == json.loads(json.dumps(document, separators=(",", ":")))
    assert " " not in text.replace("café", "")
