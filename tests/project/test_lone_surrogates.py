"""A lone surrogate (JSON "\\ud800") in any string of a write body is a 400 envelope, never a 500.

Ingest, label import and the span verifier name the field in their own terms (tests/project/
test_bad_inputs.py); every other write API is refused by the JSON parser before its serializer echoes
the value back into a response that has no UTF-8 form.
"""

from __future__ import annotations

import pytest

from audit.models import AuditEvent
from tests.factories import record
from tests.grading.helpers import next_item, pooled

LONE = "\\ud800"  # as the client writes it: the JSON escape, six characters


def _post(client, url: str, body: str):
    return client.generic("POST", url, body, content_type="application/json")


@pytest.mark.parametrize("verdict", [f'"{LONE}"', f'"correct{LONE}"', '"\\udfff"'])
def test_a_lone_surrogate_verdict_on_a_grade_is_a_400_that_keeps_the_lease(route, grader, verdict):
    pooled([record()])
    item = next_item(grader)
    events = AuditEvent.objects.count()
    response = _post(grader, f"/api/v1/grading/items/{item['id']}/grades", '{"verdict": ' + verdict + "}")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert error["details"] == [{"field": "verdict", "code": "invalid_unicode", "message": "must be valid Unicode"}]
    assert AuditEvent.objects.count() == events
    again = _post(grader, f"/api/v1/grading/items/{item['id']}/grades", '{"verdict": "correct"}')
    assert again.status_code == 201, again.content


def test_a_lone_surrogate_deep_in_a_body_or_in_a_key_is_named_by_its_path(route, grader):
    pooled([record()])
    item = next_item(grader)
    url = f"/api/v1/grading/items/{item['id']}/grades"
    nested = _post(grader, url, '{"verdict": "correct", "extra": [{"a": "ok"}, {"b": "x' + LONE + '"}]}')
    assert nested.json()["error"]["details"][0]["field"] == "extra[1].b"
    key = _post(grader, url, '{"verdict": "correct", "k' + LONE + '": 1}')
    assert key.status_code == 400
    assert key.json()["error"]["details"][0]["field"] == "k\\ud800"


def test_a_surrogate_pair_is_an_ordinary_character(route, grader):
    pooled([record()])
    item = next_item(grader)
    response = _post(
        grader, f"/api/v1/grading/items/{item['id']}/grades", '{"verdict": "correct", "note": "ok \\ud83d\\ude00"}'
    )
    assert response.status_code == 201, response.content
    assert response.json()["note"] == "ok \U0001f600"
