"""Who sees trials: reviewers and policy owners of the route; graders never (API and pages)."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from tests.factories import make_user
from tests.jobs_inline import run_jobs
from tests.trials.conftest import graded_items

REFERENCE = {"name": "reference", "kind": "reference", "repeats": 1}


def _browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def trial_id(route, reviewer):
    graded_items([(True, 0.9), (False, 0.4)])
    with run_jobs():
        response = reviewer.post("/api/v1/routes/it-support/gate-trials", REFERENCE, format="json")
    return response.json()["id"]


def test_graders_never_see_a_trial(trial_id, grader):
    assert grader.get(f"/api/v1/gate-trials/{trial_id}").status_code == 403
    assert grader.post("/api/v1/routes/it-support/gate-trials", REFERENCE, format="json").status_code == 403
    page = _browser(grader.user)
    for url in (f"/trials/{trial_id}/", "/routes/it-support/trials/"):
        response = page.get(url)
        assert response.status_code in (403, 404)
        assert b"reference" not in response.content


def test_outsiders_integrators_and_other_routes_reviewers_are_refused(trial_id, outsider, integrator, other_route):
    assert outsider.get(f"/api/v1/gate-trials/{trial_id}").status_code == 403
    assert integrator.get(f"/api/v1/gate-trials/{trial_id}").status_code == 403
    elsewhere = make_user("rev-hr", "reviewer", other_route)
    page = _browser(elsewhere)
    assert page.get(f"/trials/{trial_id}/").status_code == 404
    assert page.get("/routes/it-support/trials/").status_code == 404


def test_policy_owners_start_and_read_trials(trial_id, owner):
    assert owner.get(f"/api/v1/gate-trials/{trial_id}").json()["status"] == "done"
    with run_jobs():
        response = owner.post("/api/v1/routes/it-support/gate-trials", REFERENCE, format="json")
    assert response.status_code == 202


def test_the_pages_list_trials_and_show_the_figures_beside_the_current_gate(trial_id, reviewer):
    page = _browser(reviewer.user)
    listing = page.get("/routes/it-support/trials/")
    assert listing.status_code == 200 and f"/trials/{trial_id}/".encode() in listing.content
    detail = page.get(f"/trials/{trial_id}/")
    text = detail.content.decode()
    for region in ('id="gates"', 'id="figures"', 'id="confusion"', 'id="disagreements"', 'id="errors"'):
        assert region in text
    assert "Current gate" in text and "Wrong answers served: upper bound at most" in text


def test_the_trial_page_labels_gates_in_words_and_rounds_the_p_value(trial_id, reviewer):
    text = _browser(reviewer.user).get(f"/trials/{trial_id}/").content.decode()
    assert "max_unsafe_upper" not in text and "min_stability" not in text
    assert re.search(r"McNemar exact test \(answer vs not, paired items\): p (= \d\.\d{3}|&lt; 0\.001|= —)<", text)


def test_the_page_form_starts_a_trial(route, reviewer):
    graded_items([(True, 0.9)])
    page = _browser(reviewer.user)
    with run_jobs():
        response = page.post("/routes/it-support/trials/", {"name": "ref", "kind": "reference", "repeats": "2"})
    assert response.status_code == 302
    assert page.get(response["Location"]).status_code == 200


def test_the_list_page_costs_the_same_queries_with_more_trials(trial_id, reviewer, django_assert_max_num_queries):
    page = _browser(reviewer.user)
    page.get("/routes/it-support/trials/")
    with run_jobs():
        for _ in range(3):
            reviewer.post("/api/v1/routes/it-support/gate-trials", REFERENCE, format="json")
    with django_assert_max_num_queries(12):
        assert page.get("/routes/it-support/trials/").status_code == 200


def test_the_demo_opens_on_a_finished_reference_trial(db, reviewer, settings, tmp_path):
    import io
    import time

    from django.core.management import call_command

    from console.trials.models import Trial

    settings.DATA_DIR = tmp_path
    started = time.monotonic()
    call_command("load_demo", "--decisions", "120", stdout=io.StringIO())
    trial = Trial.objects.get(route__slug="hr-policy")
    assert trial.status == "done" and trial.candidate.kind == "reference"
    doc = reviewer.get(f"/api/v1/gate-trials/{trial.pk}").json()
    assert doc["calls"]["made"] == trial.items * 3 and doc["calls"]["errors"] == 0
    assert time.monotonic() - started < 120


def test_the_trial_form_asks_for_dates_as_yyyy_mm_dd_and_explains_itself(route, reviewer):
    text = _browser(reviewer.user).get("/routes/it-support/trials/").content.decode()
    assert 'type="date"' not in text and text.count('placeholder="YYYY-MM-DD"') == 2
    assert "see the README" not in text
