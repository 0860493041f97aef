"""Disputes 0005: after ledger 0024 split a passage several routes shared, a dispute of a decision
on another route than its quoted passage's names that route's copy."""

from __future__ import annotations

import importlib

import pytest
from django.db import connection, transaction

from console.core.db_roles import as_owner
from console.disputes.models import Dispute
from console.ledger.models import Passage
from tests.disputes.conftest import client_for, open_dispute, passage_id
from tests.factories import make_user
from tests.ledger.passages_before_origins import passage_columns_restored, passage_routes

_MIGRATION = importlib.import_module("console.disputes.migrations.0005_evidence_names_its_routes_passage")


@pytest.mark.django_db(transaction=True)  # the owner's role adds the passages' old columns back
def test_a_dispute_quoting_a_passage_split_by_route_names_its_routes_copy(route, other_route, decisions):
    refused, _, on_hr = decisions
    response = open_dispute(client_for(make_user("hr-agent", "reader", other_route)), on_hr)
    assert response.status_code == 201, response.content
    dispute = Dispute.objects.get(decision_id=on_hr)
    theirs = Passage.objects.get(pk=dispute.passage_id)
    shared = Passage.objects.get(pk=passage_id(refused, 1))  # the it-support row a shared chunk kept
    with as_owner(), transaction.atomic():
        passage_columns_restored()  # the passages' route a column again, as this migration read it
        # as ledger 0024 leaves it: the dispute names the shared row, and hr-policy's copy has the key
        # made from the shared row's key and hr-policy's id
        Dispute.objects.filter(pk=dispute.pk).update(passage=shared)
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE ledger_passage SET content_key = sha256(%s || int8send(%s::bigint)) WHERE id = %s",
                [bytes.fromhex(shared.content_key), other_route.pk, theirs.pk],
            )
            cursor.execute(_MIGRATION.TO_COPIES)
            assert Dispute.objects.get(pk=dispute.pk).passage_id == theirs.pk
            cursor.execute(_MIGRATION.TO_COPIES)  # on its route's row, nothing moves again
        assert Dispute.objects.get(pk=dispute.pk).passage_id == theirs.pk
        assert passage_routes()[shared.pk] == route.pk  # the shared row stays its route's
        transaction.set_rollback(True)
