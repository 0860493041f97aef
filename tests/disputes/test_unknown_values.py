"""The disputes API refuses what it does not know instead of reading it as nothing: a filter value of the
list (not "no disputes"), a note or contact that is not text (not "no note")."""

import pytest

from tests.disputes.conftest import open_dispute


@pytest.mark.parametrize("query", ["status=AAA", "kind=complaint", "overdue=maybe", "mine=2", "status=OPEN"])
def test_an_unknown_filter_value_is_refused_rather_than_ignored(reviewer, query):
    response = reviewer.get(f"/api/v1/disputes?{query}")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and error["details"][0]["field"] == query.split("=")[0]


@pytest.mark.parametrize("query", ["", "status=all", "status=open", "kind=other", "overdue=1", "mine=false", "route="])
def test_every_documented_filter_value_is_accepted(reviewer, query):
    assert reviewer.get(f"/api/v1/disputes?{query}").status_code == 200


@pytest.mark.parametrize("note", [[], 0, False, {}])
def test_a_withdrawal_note_that_is_not_text_is_refused_rather_than_read_as_none(decisions, reader, note):
    # schemathesis: {"resolution": "withdrawn", "note": []} was accepted, as `note or None` read it as absent.
    opened = open_dispute(reader, decisions[0]).json()
    response = reader.post(
        f"/api/v1/disputes/{opened['id']}/resolve", {"resolution": "withdrawn", "note": note}, format="json"
    )
    assert response.status_code == 400 and response.json()["error"]["details"][0]["field"] == "note"


@pytest.mark.parametrize("note", [None, ""])
def test_a_withdrawal_needs_no_note(decisions, reader, note):
    opened = open_dispute(reader, decisions[0]).json()
    response = reader.post(
        f"/api/v1/disputes/{opened['id']}/resolve", {"resolution": "withdrawn", "note": note}, format="json"
    )
    assert response.status_code == 200


def test_a_contact_that_is_not_text_is_refused(decisions, reader):
    response = open_dispute(reader, decisions[0], contact=[])
    assert response.status_code == 400 and response.json()["error"]["details"][0]["field"] == "contact"
