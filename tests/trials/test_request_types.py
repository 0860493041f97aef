"""POST /api/v1/routes/{slug}/gate-trials: a header field of the wrong type is refused, not read as none
(schemathesis sent `"headers_env": {}` and the trial started)."""

import pytest

REFERENCE = {"name": "reference-rule", "kind": "reference"}


@pytest.mark.parametrize(
    ("field", "value"), [("headers_env", {}), ("headers_env", 0), ("headers_env", []), ("headers", []), ("headers", "")]
)
def test_a_header_field_of_the_wrong_type_is_refused(route, reviewer, field, value):
    response = reviewer.post("/api/v1/routes/it-support/gate-trials", {**REFERENCE, field: value}, format="json")
    assert response.status_code == 400
    assert [d["field"] for d in response.json()["error"]["details"]] == [field]


@pytest.mark.parametrize(
    ("field", "value"), [("headers_env", None), ("headers_env", ""), ("headers", None), ("headers", {})]
)
def test_null_or_empty_header_fields_mean_none(route, reviewer, field, value):
    # The body passes validation and reaches the service, which finds nothing graded on this route.
    response = reviewer.post("/api/v1/routes/it-support/gate-trials", {**REFERENCE, field: value}, format="json")
    assert response.json()["error"]["code"] == "no_graded_items"
