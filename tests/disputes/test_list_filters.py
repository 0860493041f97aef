"""GET /api/v1/disputes: a filter value the list does not know is refused, not read as "no disputes"."""

import pytest


@pytest.mark.parametrize("query", ["status=AAA", "kind=complaint", "overdue=maybe", "mine=2", "status=OPEN"])
def test_an_unknown_filter_value_is_refused_rather_than_ignored(reviewer, query):
    response = reviewer.get(f"/api/v1/disputes?{query}")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and error["details"][0]["field"] == query.split("=")[0]


@pytest.mark.parametrize("query", ["", "status=all", "status=open", "kind=other", "overdue=1", "mine=false", "route="])
def test_every_documented_filter_value_is_accepted(reviewer, query):
    assert reviewer.get(f"/api/v1/disputes?{query}").status_code == 200
